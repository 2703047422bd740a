"""Two traces side by side (eager vs compile is the common case).

Per step: CPU (wall) time and device time and their ratio B/A, kernels per step; the device work
(kernels, memcpys, memsets) in both, changed (a GEMM renamed only in its flags), gone and new, and
the ops whose calls (or, on a GPU, device time) changed, all per step (:mod:`.rows`). The
summary compares medians, not means (one slow step moves a mean of three; P1.14), over the steps
after the profiler's first (often wider: the profiler starting; how much, said per run), shows each run's
range, and judges the ratio only when the runs ran the same work per step (:mod:`.alike`: else it says
what differs, first), every step of one run is faster than every step of the other, and the ratio lies
beyond what the machine's drift, measured by the work that did not change, explains (:mod:`.control`).
Otherwise the verdict is "cannot tell" and why, with the numbers: one stalled step never makes a 200x
claim, and a busier machine is not a slower program. The result is a JSON-ready dict (what ``--compare --json`` writes); people read
it through :mod:`common.report.render.compare` and the HTML page.
"""

from __future__ import annotations

from common.report.compare.alike import other_differences, unlike_text, workload_differences
from common.report.compare.rows import device_changes, judged_steps, op_changes
from common.report.compare.control import cpu_control, device_control, judge
from common.report.facts.steps import RunSteps
from common.report.units import json_ready
from common.report.facts.steadiness import FirstVsRest, Spread


def _per_step(t: RunSteps) -> dict:
    rows = [t.step_rows[i] for i in judged_steps(t).tolist()]
    return dict(
        steps=len(t.step_rows), judged=len(rows),
        cpu=Spread(tuple(r.wall_us for r in rows)),
        device=Spread(tuple(r.device_us for r in rows)) if t.has_gpu else None,
        kernels=Spread(tuple(float(r.kernels) for r in rows)),
    )


def _first_ratio(t: RunSteps) -> float | None:
    """The left-out first step's wall time over the judged steps' median (None: none left out)."""
    if not _left_out(t):
        return None
    rest = Spread(tuple(t.step_rows[i].wall_us for i in judged_steps(t).tolist()))
    return FirstVsRest(t.step_rows[0].wall_us, rest).ratio


def _left_out(t: RunSteps) -> list[str]:
    """The steps compare does not judge (the profiler's first, in a run of three or more)."""
    first = judged_steps(t)
    return [t.step_rows[i].name for i in range(int(first[0]) if first.size else 0)]


def compare(a: RunSteps, b: RunSteps) -> dict:
    sa, sb = _per_step(a), _per_step(b)
    workload, other = workload_differences(a, b), other_differences(a, b)
    alike = not workload  # a step of A is a step of B: their ratio means something
    steps = []
    for i in range(max(len(a.step_rows), len(b.step_rows))):
        ra = a.step_rows[i] if i < len(a.step_rows) else None
        rb = b.step_rows[i] if i < len(b.step_rows) else None
        steps.append(dict(
            a=ra.name if ra else None, b=rb.name if rb else None,
            a_cpu_us=ra.wall_us if ra else None, b_cpu_us=rb.wall_us if rb else None,
            cpu_ratio=(rb.wall_us / ra.wall_us) if alike and ra and rb and ra.wall_us > 0 else None,
            a_device_us=ra.device_us if ra else None, b_device_us=rb.device_us if rb else None,
            device_ratio=(rb.device_us / ra.device_us) if alike and ra and rb and ra.device_us > 0 else None,
            a_kernels=ra.kernels if ra else None, b_kernels=rb.kernels if rb else None,
        ))
    other_work = ", ".join(workload)
    cpu = judge("CPU", sa["cpu"], sb["cpu"], cpu_control(a, b), needs_control=True, other_work=other_work) \
        if sa["cpu"].values and sb["cpu"].values else None
    device = judge("device", sa["device"], sb["device"], device_control(a, b), needs_control=False,
                   other_work=other_work) if sa["device"] is not None and sb["device"] is not None else None
    changed_ops = op_changes(a, b)
    return json_ready(dict(
        a=a.model.path, b=b.model.path,
        summary=dict(
            unlike=unlike_text(workload, other), workload_differences=workload, other_differences=other,
            a_steps=sa["steps"], b_steps=sb["steps"], a_left_out=_left_out(a), b_left_out=_left_out(b),
            a_first_ratio=_first_ratio(a), b_first_ratio=_first_ratio(b),
            cpu=cpu, device=device,
            a_kernels_per_step=sa["kernels"].median, b_kernels_per_step=sb["kernels"].median,
        ),
        steps=steps,
        kernels=device_changes(a, b),
        ops=dict(changed=changed_ops,
                 vanished=[dict(name=r["name"], calls=r["a_calls_per_step"]) for r in changed_ops
                           if not r["b_calls_per_step"]],
                 appeared=[dict(name=r["name"], calls=r["b_calls_per_step"]) for r in changed_ops
                           if not r["a_calls_per_step"]]),
    ))
