"""Each variant against the one before it (``--glance``'s ``vs`` lines): two traces of the same workload,
judged as ``--compare`` judges them (:mod:`.control`: apart in every step, with the unchanged work as the
control), and what device work (on a CPU: which ops) is gone, new or changed.

In: each trace's :class:`~common.report.facts.steps.RunSteps` (a :class:`~common.report.facts.tables.Tables`
is one), boiled down by :func:`digest` (the glance keeps no tables). Out: per trace, the JSON-ready ``versus`` dict (:func:`with_versus`), shown by
:mod:`common.report.render.glance`."""

from __future__ import annotations

from typing import Optional

from common.report.compare.rows import device_changes_between, device_series, differing, judged_steps, \
    op_changes_between, op_series
from common.report.compare.control import control_of, cpu_control_between, judge
from common.report.compare.same_work import same_work_series
from common.report.model.names import short_name
from common.report.facts.steadiness import Spread
from common.report.facts.steps import RunSteps
from common.report.units import fmt_us


def digest(t: RunSteps, variant: str) -> dict:
    """What :func:`versus` reads of a trace (small: the tables themselves are not kept); ``variant`` names it."""
    k = t.knobs
    steps = [t.step_rows[i] for i in judged_steps(t).tolist()]
    return dict(variant=variant, has_gpu=t.has_gpu,
                schedule=k.schedule if k is not None else None,
                workload=(tuple(k.shape), k.dtype, k.device) if k is not None else None,
                device=device_series(t), ops=op_series(t), same_work=same_work_series(t),
                probe=k.probe if k is not None else None,
                cpu_steps=Spread(tuple(r.wall_us for r in steps)),
                device_steps=Spread(tuple(r.device_us for r in steps)) if t.has_gpu else None)


def versus(a: dict, b: dict) -> Optional[dict]:
    """Run ``b`` against ``a`` (the variant before it), when both ran the same workload: the verdict on
    the time per step (device time on a GPU, and the CPU's beside it; else CPU; judged with the
    control, as --compare does) and what changed: device work gone, new, changed (on a GPU), else the
    ops gone and new."""
    if a["workload"] is None or a["workload"] != b["workload"]:
        return None
    gpu = a["has_gpu"] and b["has_gpu"]
    if gpu:
        sa = {n: s for n, (_, s) in a["device"].items()}
        sb = {n: s for n, (_, s) in b["device"].items()}
        side = judge("device", a["device_steps"], b["device_steps"], control_of("device event", sa, sb),
                     needs_control=False)
        k = device_changes_between(a["device"], b["device"])
        gone = [(r["name"], r["a_per_step_us"]) for r in k["only_a"]]
        new = [(r["name"], r["b_per_step_us"]) for r in k["only_b"]]
        changed = [(f"{short_name(r['name'], 30)} ({' '.join(differing(r['name'], r['b_name']))} -> "
                    f"{' '.join(differing(r['b_name'], r['name']))})", r["b_per_step_us"]) for r in k["changed"]]
    control = cpu_control_between(a["same_work"], b["same_work"], True, a["probe"], b["probe"])
    cpu = judge("CPU", a["cpu_steps"], b["cpu_steps"], control, needs_control=True)
    if not gpu:
        side = cpu
        rows = op_changes_between(a["ops"], b["ops"], False)
        gone = [(r["name"], r["a_cpu_us"]) for r in rows if not r["b_calls_per_step"]]
        new = [(r["name"], r["b_cpu_us"]) for r in rows if not r["a_calls_per_step"]]
        changed = []
    return dict(against=a["variant"], time="device" if gpu else "cpu", judged=side["judged"], ratio=side["ratio"],
                verdict=side["verdict"], short=_short_verdict(side, "device" if gpu else "CPU"), gone=gone, new=new,
                changed=changed, cpu_judged=cpu["judged"], cpu_ratio=cpu["ratio"],
                cpu_short=_short_verdict(cpu, "CPU") if gpu else None)


def _short_verdict(side: dict, what: str) -> str:
    """``device per step 0.86x (1.26 ms -> 1.08 ms), apart in every step; control: 6 unchanged device
    events 1.00x``, or ``device per step: cannot tell (why)``."""
    if not side["judged"]:
        return f"{what} per step: cannot tell ({side['why_not']})"
    c = side["control"]
    if c is None or not c["measures"]:
        control = "no control (no unchanged work in both, long enough to measure the machine)"
    elif c["unit"] == "probe":
        control = f"control: the machine probe {c['ratio']:.2f}x"
    else:
        control = f"control: {len(c['names'])} unchanged {c['unit']}{'s' if len(c['names']) > 1 else ''} {c['ratio']:.2f}x"
    near = " at the nearest steps (a noisy run)" if side.get("at_least") else ""
    medians = f"{fmt_us(side['a_median_us'])} -> {fmt_us(side['b_median_us'])}"
    return f"{what} per step {side['ratio']:.2f}x{near} ({medians}), apart in every step; {control}"


def with_versus(digests: list[dict]) -> list[Optional[dict]]:
    """Per trace (in the posts' order), its :func:`versus` against the nearest earlier trace of its workload
    (one with the same profiler schedule first)."""
    out = []
    for i, b in enumerate(digests):
        same = [a for a in reversed(digests[:i]) if a["workload"] is not None and a["workload"] == b["workload"]]
        before = next((a for a in same if a["schedule"] == b["schedule"]), same[0] if same else None)
        out.append(versus(before, b) if before is not None else None)
    return out
