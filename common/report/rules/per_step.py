"""The per-step figures of the CPU verdicts and the hotspot op: medians over the steady steps (a cold
first call or one stalled step is not the typical cost), and the time around the compute ops named
for what it is (dispatch, or stretches with no op running)."""

from __future__ import annotations

from common.report.facts.cpu_work import LONG_NO_OP_US
from common.report.model.build import PYTHON
from common.report.rules.judge import first_step, steady_work
from common.report.facts.steadiness import COLD, PROFILER
from common.report.facts.tables import Tables
from common.report.units import fmt_us
from common.amounts import fmt_bytes_decimal


def ops_per_call(ops, n: int = 3, t: Tables | None = None) -> str:
    """``aten::mm 30 µs/call, aten::add 4.0 µs/call``; with ``t``, a typical step's: each op's median own
    time per step over its calls per step (a cold first call does not move it)."""
    work, calls = (steady_work(t), {o.name: o.calls for o in t.ops}) if t is not None else (None, {})

    def per_call(o) -> float:
        per_step = calls.get(o.name, 0) / max(len(t.model.steps), 1) if work is not None else 0
        return work.median_per_step(o.name) / per_step if per_step and work.by_step else o.per_call_us

    return ", ".join(f"{o.name} {fmt_us(per_call(o))}/call" for o in ops[:n]) + (
        f" and {len(ops) - n} more" if len(ops) > n else "")


def dispatch_text(t: Tables, n: int = 3) -> str:
    """The biggest holders of the dispatch time in a typical step (their medians over the steady steps,
    as the step time beside them): ``ProfilerStep (...) 12 µs, matmul_add 10 µs``."""
    return ", ".join(f"{o.name} {fmt_us(o.self_us)}" for o in steady_work(t).dispatch_medians[:n])


def around(t: Tables) -> str:
    """What the time around the compute ops is: dispatch (µs between ops; with the Python tracer's events
    in the trace, with_stack, their own cost is part of it), or, where stretches of a millisecond or more run
    no op at all (big tensors freed, Python), that, named as such."""
    w = steady_work(t)
    if w.median_longest_no_op_us < LONG_NO_OP_US:
        return "dispatch around them" + (" and the Python tracer's own time (with_stack)"
                                         if (t.model.cpu.kind == PYTHON).any() else "")
    freed = w.median_freed_in_stretches
    what = ("Python between ops, or freeing large tensors: --profile-memory shows the frees" if freed != freed else
            f"{fmt_bytes_decimal(freed)} freed in them: releasing memory" if freed > 0 else "no memory freed in them")
    return (f"mostly not dispatch: no op runs for {fmt_us(w.median_no_op_us)} a step, in stretches up to "
            f"{fmt_us(w.median_longest_no_op_us)} ({what})")


def outlier_note(t: Tables, top) -> str:
    """``; its total 6.06 ms is mostly #3's 6.04 ms``: where one step carries the op's total (the table's
    figure) far above its median, say so: that step is the outlier, not the typical cost."""
    per = dict(t.cpu_work.by_step).get(top.name, ())
    if len(per) < 2 or max(per) <= 0:
        return ""
    i = max(range(len(per)), key=lambda j: per[j])
    rest = sorted(per[:i] + per[i + 1:])
    if per[i] < 0.5 * top.self_cpu_us or per[i] < 2 * max(rest[len(rest) // 2], 1e-9):
        return ""
    what = {COLD: "the workload's first call", PROFILER: "the profiler's first recorded step"}.get(
        first_step(t).kind, "an outlier step") if i == 0 else "an outlier step"
    return f"; its total {fmt_us(top.self_cpu_us)} is mostly {t.step_label(i)}'s {fmt_us(per[i])}, {what}"
