"""Overhead-bound or compute-bound (on a GPU, and the CPU analogue), and the profiler table's rows:
hotspot op, an op called very often, an op whose cost lives in its children."""

from __future__ import annotations

from dataclasses import dataclass

from common.report.facts import knob_work
from common.report.model.build import STEP_RE
from common.report.findings import Finding, in_window
from common.report.rules import advice, regime
from common.report.rules.judge import (implausibly_slow, matmul_gflops, plausible_floor, steady_work,
                                      typical_matmul_gflops)
from common.report.rules.per_step import around, dispatch_text, ops_per_call, outlier_note
from common.report.rates import fmt_tflops
from common.report.facts.tables import Tables
from common.report.units import fmt_us, rounded


def _every_step(t: Tables) -> tuple:
    """The place of a whole-run finding: every step."""
    return in_window(t, [(s.start, s.dur) for s in t.model.steps])


def _ops(t: Tables) -> list:
    """The op rows (by CPU total), without ProfilerStep#N (an op, not an annotation, in old traces)."""
    return [o for o in t.ops if o.kind == "op" and not STEP_RE.match(o.name)]


CPU_OVERHEAD_BELOW_PCT = 75.0  # compute ops' share of the step below this: overhead-bound on the CPU


CPU_COMPUTE_FROM_PCT = 90.0  # ...at or above this: compute-bound


def _rate_text(t: Tables) -> str:
    """The matmul's rate in the median step the verdict reads; where one step's matmul took far longer, the
    roofline's rate over every step beside it."""
    rate, every = typical_matmul_gflops(t), matmul_gflops(t)
    if rate is None:
        return ""
    if every is not None and max(rate, every) <= 1.25 * min(rate, every):  # the roofline's figure, as it says
        return f"; the matmul arithmetic ran at {fmt_tflops(every / 1e3)}"
    return (f"; the matmul arithmetic ran at {fmt_tflops(rate / 1e3)} in the median step ({fmt_tflops(every / 1e3)} "
            "over every step, the roofline's)")


@dataclass(frozen=True)
class Regime:
    verdict: str | None  # "overhead" | "compute" | None (in between, or cannot tell)
    cannot_tell: str = ""  # why the steps cannot carry a verdict ("" when they can)
    shares: tuple = ()  # the compute share of each step read (the fastest half), %
    between: bool = False  # the steps agree on a share between the two thresholds: neither regime alone


def _fastest_half(work) -> list:
    """The steps a verdict reads: the fastest half (at least one). A busy machine only ever adds time,
    and it adds it to whatever op runs when it strikes: the fastest steps are the least disturbed."""
    steps = sorted(work.steps, key=lambda s: s.wall_us)
    return steps[:max(1, (len(steps) + 1) // 2)]


def cpu_regime(t: Tables) -> Regime | None:
    """The CPU analogue of overhead- or compute-bound, judged on the fastest half of the steady steps;
    None when the trace has no CPU steps to read (a GPU trace, no ops)."""
    work = steady_work(t)
    if work is None or not work.compute_ops:
        return None
    if implausibly_slow(t):
        rate = typical_matmul_gflops(t)
        return Regime(None, f"the matmul ran at {rate:.2g} GFLOP/s, slower than any CPU computes it "
                            f"(at least {plausible_floor(t):.2g}): the machine was busy, so the times are "
                            "waiting, not work")
    shares = tuple(s.compute_pct for s in _fastest_half(work))
    if min(shares) < CPU_OVERHEAD_BELOW_PCT <= CPU_COMPUTE_FROM_PCT <= max(shares):
        return Regime(None, f"the fastest steps disagree (compute ops {min(shares):.0f}% of one step, "
                            f"{max(shares):.0f}% of another): too noisy to call", shares)
    median = sorted(shares)[len(shares) // 2]
    if CPU_OVERHEAD_BELOW_PCT <= median < CPU_COMPUTE_FROM_PCT:
        return Regime(None, f"the compute ops' own work is {median:.0f}% of the fastest steps, between the "
                            f"{CPU_OVERHEAD_BELOW_PCT:.0f}% under which the dispatch around them is the cost and the "
                            f"{CPU_COMPUTE_FROM_PCT:.0f}% from which their work is", shares, between=True)
    return Regime("overhead" if median < CPU_OVERHEAD_BELOW_PCT else "compute", "", shares)


def _read_pct(t: Tables) -> float:
    """The compute share the verdict read: the median of the fastest steps'."""
    shares = sorted(cpu_regime(t).shares)
    return shares[len(shares) // 2]


def _cpu_regime(t: Tables) -> str | None:
    """"overhead" | "compute" | None (between, noisy or no steps) for a CPU-only trace."""
    regime = cpu_regime(t)
    return regime.verdict if regime is not None else None


def regime_cannot_tell(t: Tables):
    """On the CPU, where the steps cannot carry an overhead- or compute-bound verdict (the fastest half of the steps
    disagree, or the matmul ran slower than any CPU computes it, allowing for a dtype the lesson measured as
    emulated): says so and why, instead of a verdict; where the fastest steps agree on a compute share between 75%
    and 90%, "neither overhead- nor compute-bound", with the share.

    A busy machine's waiting is not a regime; silence would leave the run without one."""
    if t.has_gpu:
        return None
    regime = cpu_regime(t)
    if regime is None or not regime.cannot_tell:
        return None
    threads = (t.knobs.cpu or {}).get("threads") if t.knobs is not None and isinstance(t.knobs.cpu, dict) else None
    pinned = f" (this run used {threads} intra-op thread{'s' if threads != 1 else ''})" if threads else ""
    hint = ("both count: the ops' own work (the hotspot) and the dispatch around them (fewer, larger ops)"
            if regime.between else
            f"run it again when the machine is quieter, or with more active steps (--schedule 1,1,10){pinned}")
    said = "neither overhead- nor compute-bound" if regime.between else "cannot tell overhead-bound from compute-bound"
    return Finding("regime_cannot_tell", f"{said}: {regime.cannot_tell}", hint,
                   dict(reason=regime.cannot_tell, between=regime.between, fastest_steps_compute_pct=[rounded(x) for x in regime.shares],
                        matmul_gflops=rounded(matmul_gflops(t), 3),
                        median_step_matmul_gflops=rounded(typical_matmul_gflops(t), 3),
                        plausible_floor_gflops=rounded(plausible_floor(t), 3)),
                   level="note", spans=_every_step(t))


def _cpu_work_evidence(t: Tables) -> dict:
    w = steady_work(t)
    return dict(median_step_us=rounded(w.median_wall_us), median_compute_us=rounded(w.median_compute_us),
                compute_pct=rounded(w.median_compute_pct), compute_per_call_us=rounded(w.per_call_us),
                compute_calls_per_step=rounded(w.median_calls),
                compute_ops={o.name: dict(calls=o.calls, per_call_us=rounded(o.per_call_us)) for o in w.compute_ops[:8]},
                dispatch_per_step_us={o.name: rounded(o.self_us) for o in w.dispatch_medians[:8]},  # medians
                matmul_gflops=rounded(matmul_gflops(t), 2), verdict_compute_pct=rounded(_read_pct(t)),
                per_step_compute_pct=[rounded(s.compute_pct) for s in w.steps])


def _analogue(t: Tables, size: int) -> str:
    """`` (the CPU analogue of Part 1's size N)`` in Part 1's own lesson; other runs (a copy of it too, whose
    sizes are its own) tell their own story."""
    return f" (the CPU analogue of Part 1's size {size})" if knob_work.part1_lesson(t.knobs) else " (on the CPU)"


def _cpu_overhead_bound(t: Tables):
    if _cpu_regime(t) != "overhead":
        return None
    w, pct = steady_work(t), _read_pct(t)
    return Finding("overhead_bound", f"overhead-bound{_analogue(t, 64)}: in the fastest "
                   f"steps the compute ops' own work is {pct:.0f}% of a step, under {CPU_OVERHEAD_BELOW_PCT:.0f}% (from "
                   f"{CPU_COMPUTE_FROM_PCT:.0f}% it is compute-bound): {ops_per_call(w.compute_ops, t=t)}{_rate_text(t)}; "
                   f"the other {100 - pct:.0f}% is {around(t)} (per step, medians: "
                   f"{dispatch_text(t)}); a step takes {fmt_us(w.median_wall_us)} (median)",
                   "each call does too little work to pay for its dispatch: give it more work (bigger or batched "
                   f"tensors) or make fewer calls ({advice.fuse_ops(t, 'torch.compile fuses ops')}); on a GPU this is "
                   "the run where the GPU idles",
                   _cpu_work_evidence(t), level="warn", spans=_every_step(t))


def _cpu_compute_bound(t: Tables):
    if _cpu_regime(t) != "compute":
        return None
    w, pct = steady_work(t), _read_pct(t)
    return Finding("compute_bound", f"compute-bound{_analogue(t, 4096)}: in the fastest steps "
                   f"{pct:.0f}% of a step is the compute ops' own work ({ops_per_call(w.compute_ops, t=t)}{_rate_text(t)}); "
                   f"the other {100 - pct:.0f}% is {around(t)}; a step takes {fmt_us(w.median_wall_us)} (median)",
                   "the arithmetic itself is the cost: less of it, or a faster kernel for this shape and dtype, helps; "
                   "cutting dispatch overhead would not",
                   _cpu_work_evidence(t), spans=_every_step(t))


def overhead_bound(t: Tables):
    """On a GPU: the device time of the work a step launched is under 50% of the step's host wall time (medians over
    the steps): the GPU idles while the host dispatches (no "fuse ops" where a step launches one kernel). On a
    CPU-only trace, the CPU analogue: the compute ops' own work is below 75% of each step, the dispatch around them
    (the annotation, the dispatcher chain, Python and the profiler between ops) the rest.

    The posts' cheatsheet row: Self CPU time total ≫ Self CUDA time total (CPU in ms, GPU in µs): overhead-bound.
    The GPU's test is :func:`.regime.gpu_overhead_bound`."""
    return _cpu_overhead_bound(t) if not t.has_gpu else regime.gpu_overhead_bound(t)


def compute_bound(t: Tables):
    """On a CPU-only trace, 90% and more of each step is the compute ops' own work (on a GPU, busy is not
    compute-bound: ``device_bound``).

    On a GPU, :func:`.regime.device_bound` says who sets the pace and which roof bounds the kernels."""
    return _cpu_compute_bound(t) if not t.has_gpu else None


def launched_work(op) -> str:
    """``3 kernels, 3 memcpys, 3 memsets``: what an op launched, each counted as what it is."""
    parts = [(op.kernels, "kernel"), (op.memcpys, "memcpy"), (op.memsets, "memset")]
    return ", ".join(f"{n:,} {word}{'s' if n != 1 else ''}" for n, word in parts if n) or "no device work"


def _its_shapes(t: Tables) -> str:
    """Where the op's shapes are: in the trace where the run recorded them (the roofline read them), else a flag
    away."""
    if t.roofline is not None and t.roofline.source == "record_shapes":
        return "its shapes (in the trace: the run recorded them; the roofline table gives the rate per shape)"
    return "its shapes (record_shapes=True)"


def hotspot_op(t: Tables):
    """One op owns most of the device (on a CPU trace, the CPU: its median own time per step, and the step that
    carries its total when one does) time: the op-level hotspot."""
    ops = _ops(t)
    if not ops:
        return None
    if t.has_gpu:
        total = sum(o.self_device_us for o in ops)
        top = max(ops, key=lambda o: o.self_device_us)
        if total <= 0 or top.self_device_us < 0.25 * total:
            return None
        share = 100 * top.self_device_us / total
        return Finding("hotspot_op", f"hotspot op: {top.name} launches {share:.1f}% of device time "
                       f"({fmt_us(top.self_device_us)} in {top.calls:,} calls: {launched_work(top)})",
                       f"look at {_its_shapes(t)} and the kernels it picks",
                       dict(op=top.name, share_pct=rounded(share), self_device_us=rounded(top.self_device_us),
                            calls=top.calls))
    work = steady_work(t)
    if work is None or not work.by_step:
        return None
    typical = sorted(((o, work.median_per_step(o.name)) for o in ops), key=lambda x: -x[1])
    total = sum(us for _, us in typical)
    top, top_us = typical[0]
    if total <= 0 or top_us < 0.25 * total or top_us < 0.05 * work.median_wall_us:
        return None  # (a few µs of ops in a long window, e.g. a trace of annotations, is no hotspot)
    share = 100 * top_us / total
    calls = top.calls / max(len(t.model.steps), 1)
    hint = {"overhead": "each call is short: bigger batches or fewer calls amortise the dispatch",
            "compute": "its own work is the cost: less arithmetic or a faster kernel for this shape and dtype"}.get(
        _cpu_regime(t), f"look at {_its_shapes(t)} and how often it is called")
    return Finding("hotspot_op", f"hotspot op: {top.name} takes {share:.1f}% of the ops' self CPU time in a step "
                   f"({fmt_us(top_us)} per step, {calls:,.0f} call{'s' if calls != 1 else ''}; medians over "
                   f"{len(work.steps)} steps){outlier_note(t, top)}",
                   hint,
                   dict(op=top.name, share_pct=rounded(share), self_cpu_us_per_step=rounded(top_us),
                        self_cpu_us=rounded(top.self_cpu_us), calls=top.calls))


def many_calls(t: Tables):
    """An op with a huge call count per step: cheap per call, costly in all; fuse or batch (foreach/fused optimizers
    only where an optimizer stepped, torch.compile only where the run did not compile).

    The posts' cheatsheet row: one event has a huge # of Calls: a potential bottleneck even if each call is cheap.
    """
    ops = _ops(t)
    if not ops:
        return None
    top = max(ops, key=lambda o: o.calls)
    nsteps = max(len(t.model.steps), 1)
    per_step = top.calls / nsteps
    if per_step < 100:
        return None
    return Finding("many_calls", f"{top.name} is called {top.calls:,} times ({per_step:,.0f} per step), "
                   f"{fmt_us(top.cpu_total_us)} CPU in total, {fmt_us(top.cpu_total_us / top.calls)} per call",
                   "a cheap op called this often adds up: " + _many_calls_cure(t),
                   dict(op=top.name, calls=top.calls, calls_per_step=rounded(per_step),
                        cpu_total_us=rounded(top.cpu_total_us)))


def _many_calls_cure(t: Tables) -> str:
    """Fuse or batch, with the tools that fit the run: foreach/fused optimizers only where an optimizer
    stepped, torch.compile only where the run did not compile."""
    tools = (["foreach/fused optimizers"] if advice.trains(t) else []) + ([] if advice.compiled(t) else ["torch.compile"])
    return "fuse or batch it" + (f" ({', '.join(tools)})" if tools else "")


def children_heavy(t: Tables):
    """CPU total ≫ self CPU for a row: the cost lives in the children; drill into the nested events, not the parent.
    """
    ops = [o for o in _ops(t) if o.cpu_total_us > 0]
    if not ops:
        return None
    top = ops[0]  # the ops are sorted by CPU total
    if top.self_cpu_us >= 0.2 * top.cpu_total_us or top.cpu_total_us < 0.05 * max(t.window_us, 1e-9):
        return None
    kids = t.overhead.top_op_children
    child = ""
    ev = {}
    if kids is not None and kids.op == top.name and kids.heaviest is not None:
        child = f"; the heaviest child is {kids.heaviest} ({fmt_us(kids.heaviest_us)})"
        ev = dict(heaviest_child=kids.heaviest, heaviest_child_us=rounded(kids.heaviest_us))
    return Finding("children_heavy", f"{top.name}: CPU total {fmt_us(top.cpu_total_us)} but self only "
                   f"{fmt_us(top.self_cpu_us)}: the cost lives in its children{child}",
                   "drill into the nested events, not the parent",
                   dict(op=top.name, cpu_total_us=rounded(top.cpu_total_us), self_cpu_us=rounded(top.self_cpu_us), **ev))
