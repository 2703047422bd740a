"""The first recorded step (P1.6, P1.7 as the runs show them): often wider, warmed up or not.

It is the first step with the profiler's callbacks on: each event is recorded there for the first
time, so every op and the gaps between them are longer. It is a cold start only when it is also the
workload's first call (``--schedule 0,0,N`` without a warm-up); under the default schedule the first
call runs in the unrecorded wait step. :func:`cold_first_step` names a real cold start (:mod:`.timeline`'s
``annotation_gap`` zooms in on it); :func:`first_recorded_step` names the profiler's step for what it is.
"""

from __future__ import annotations

from common.report.model import names as trace_names
from common.report.findings import Finding, in_window
from common.report.rules.judge import cold_step, first_step, warmed_up, wide_first_step
from common.report.facts.steadiness import COLD, PROFILER, FirstVsRest, Spread
from common.report.facts.tables import Tables
from common.report.units import fmt_us, rounded

AGREE = 1.1  # device times per step within 10 % of each other agree


def others_label(t: Tables) -> str:
    """``#3..#4``: the steps after the first."""
    n = len(t.model.steps)
    return f"{t.step_label(1)}..{t.step_label(n - 1)}" if n > 2 else t.step_label(1)


def others_range(t: Tables, cmp: FirstVsRest) -> str:
    """``51 µs to 224 µs``: the range of the steps the first is judged against; where one stalled step
    was left out (:attr:`FirstVsRest.stall`), it is named: ``..., but for #5, which stalled at 4.37 ms: ...``."""
    if cmp.stall is None:
        return f"{fmt_us(cmp.rest.low)} to {fmt_us(cmp.rest.high)}"
    said = f"{fmt_us(cmp.others.low)} to {fmt_us(cmp.others.high)}"
    at = next(i for i, s in enumerate(t.model.steps) if i and s.dur == cmp.stall)
    return (f"{said}, but for {t.step_label(at)}, which stalled at {fmt_us(cmp.stall)}: one slow step of "
            f"{len(cmp.rest.values)}, an outlier (a busy machine's time slice), not the others' noise; "
            f"{t.step_label(0)} may hold such a stall too")


def what_it_holds(t: Tables) -> str:
    """Where the first step's extra time went: the events whose own time grew most (against their
    median in the other steps), the events no other step has, and the annotation's gap to its first op."""
    parts = t.first_step.parts
    if parts is None:
        return ""
    grown = ", ".join(f"{trace_names.short_name(g.name, 40)} {fmt_us(g.first_us)} vs {fmt_us(g.others_median_us)}" for g in parts.grown[:3])
    out = [f"own time against the other steps' median: {grown}"] if grown else []
    if parts.only_first:
        out.append("in no other step: " + ", ".join(f"{trace_names.short_name(n, 40)} {fmt_us(us)}"
                                                     for n, us in parts.only_first[:3]))
    gaps = [r.annotation_gap_us for r in t.step_rows]
    if len(gaps) >= 3 and None not in gaps:
        out.append(f"'{t.step_rows[0].annotation}' waits {fmt_us(gaps[0])} for its first op "
                   f"({fmt_us(Spread(tuple(gaps[1:])).median)} in the others)")
    return "; ".join(out)


def ran_before(t: Tables) -> str:
    """``the schedule's unrecorded #0..#1 and 3 warm-up calls``: what ran the workload before the window."""
    first, knobs = first_step(t), t.knobs
    n = first.number or 0
    parts = [f"the schedule's unrecorded step{'s' if n > 1 else ''} #0{f'..#{n - 1}' if n > 1 else ''}"] if n else []
    if knobs is not None and knobs.warmup and knobs.warmup_calls:
        parts.append(f"{knobs.warmup_calls} warm-up calls before the profiler, --warmup")
    return " and ".join(parts)


def where_cold_start_is(t: Tables) -> str:
    """Where the workload's first call ran, and how to record it: a schedule without wait and warmup
    steps, and no warm-up calls."""
    knobs, number = t.knobs, first_step(t).number or 0
    where = ("in the unrecorded #0" if number else "in the warm-up before the profiler")
    if knobs is None:
        return f"{where}: a schedule of wait=0, warmup=0 without warm-up calls records it"
    return f"{where}: `{knobs.script}.py ... --no-warmup --schedule 0,0,{knobs.schedule.active}` records it as #0"


def times(ratio: float) -> str:
    return f"{ratio:.1f}x" if ratio < 10 else f"{ratio:,.0f}x"


def device_agrees(t: Tables) -> str:
    """On a GPU run: the device time per step, which the profiler's host-side step does not widen."""
    if not t.has_gpu:
        return ""
    dev = Spread(tuple(r.device_us for r in t.step_rows))
    if dev.high <= AGREE * dev.low:
        same = f"{fmt_us(dev.low)} in every step" if fmt_us(dev.low) == fmt_us(dev.high) else \
            f"{fmt_us(dev.low)} to {fmt_us(dev.high)}"
        return f"; the device time per step agrees ({same}): the extra is host-side"
    return f"; the device time per step is {fmt_us(dev.low)} to {fmt_us(dev.high)}"


def first_recorded_step(t: Tables):
    """The first recorded step wider when the workload ran before it (the schedule's unrecorded steps,
    ``--warmup``): the profiler's first recorded step, not a cold start; where its extra went (ops' own time, the
    annotation's gap) and, on a GPU, that the device time per step agrees; where the real cold start is and the
    command that records it. A step ``#0`` of a trace without the lesson's knobs: cannot tell.

    Every run shows it, warmed up or not: read the steps after it. The real cold start runs in the unrecorded wait
    step; a schedule of wait=0, warmup=0 without warm-up records it."""
    cmp = wide_first_step(t)
    first = first_step(t)
    if cmp is None or first.kind == COLD:
        return None
    rest, label = cmp.rest, t.step_label(0)
    seen = (f"{fmt_us(cmp.first)}, {times(cmp.ratio)} the median {fmt_us(rest.median)} of {others_label(t)} "
            f"({others_range(t, cmp)})")
    holds = what_it_holds(t)
    if first.kind == PROFILER:
        started = "" if (first.number or 0) else " and the profiler starts in it (no schedule step before it)"
        message = (f"{label} is the profiler's first recorded step, not a cold start: {seen}; the workload ran "
                   f"before it ({ran_before(t)}), so its first call's one-time costs fell outside the window; "
                   f"its extra time comes with the profiler switching to recording at its start{started}" + (f": {holds}" if holds else "")
                   + device_agrees(t))
        hint = ("read the steps after it: every run records its first step wider, warmed up or not; the real "
                f"cold start is the workload's first call, {where_cold_start_is(t)}")
    else:
        message = (f"first recorded step {label}: {seen}; the trace does not say whether the workload ran before "
                   "the profiler, so a cold start cannot be told from the profiler's first recorded step (wider in "
                   "every run)" + (f": {holds}" if holds else "") + device_agrees(t))
        hint = "read the steps after it; to see a cold start alone, compare with a run that warmed up before profiling"
    return Finding("first_recorded_step", message, hint,
                   dict(first_step=t.model.steps[0].name, first_us=rounded(cmp.first),
                        median_others_us=rounded(rest.median), ratio=rounded(cmp.ratio, 2), kind=first.kind,
                        calls_before=first.calls_before), level="note",
                   spans=in_window(t, [(t.model.steps[0].start, t.model.steps[0].dur)]))


def cold_first_step(t: Tables):
    """The first recorded step much wider than the others, beyond their own spread (with five or more, one stalled
    step left out and named: an outlier, not their noise), when it is the workload's first call (``#0``, no
    warm-up: ``--schedule 0,0,N``): the cold start (workspaces, cuBLAS heuristics, lazy loading) plus the
    profiler's own start; names the ops whose own time grew and the events no other step has. Paid once:
    the default schedule's wait step (or ``--warmup``) keeps it out of the window.

    A wider first step after the workload already ran is the profiler's (``first_recorded_step``), never this."""
    cmp = cold_step(t)
    if cmp is None:
        return None
    rest, label = cmp.rest, t.step_label(0)
    holds = what_it_holds(t)
    return Finding("cold_first_step", f"cold start: {label} is the workload's first call (nothing ran it before the "
                   f"profiler) and took {fmt_us(cmp.first)}, {times(cmp.ratio)} the median {fmt_us(rest.median)} of "
                   f"{others_label(t)} (they range {others_range(t, cmp)})"
                   + (f"; {holds}" if holds else "") + "; the profiler's own start is in it too (every run records its "
                   "first step wider)",
                   "one-time costs of the first call, paid once: the default schedule runs them in its unrecorded "
                   "wait step (and --warmup before the profiler), so the profiled steps show the steady cost; "
                   "neither removes them",
                   dict(first_step=t.model.steps[0].name, first_us=rounded(cmp.first), median_others_us=rounded(rest.median),
                        others_range_us=[rounded(rest.low), rounded(rest.high)], ratio=rounded(cmp.ratio, 2),
                        stall_us=None if cmp.stall is None else rounded(cmp.stall),
                        warmed_up=warmed_up(t) if t.knobs else None), level="warn",
                   spans=in_window(t, [(s.start, s.dur) for s in t.model.steps if s.name == t.model.steps[0].name]))
