"""Rules on the timeline (the first recorded step and a cold start are :mod:`.first_step`'s): noisy
steps, the annotation's cold-start gap, the profiler's buffer requests (and why a CPU trace has none),
a gap between kernels and what the CPU did meanwhile, a kernel (on the CPU: an op) timing differently
across steps, the final synchronize."""

from __future__ import annotations

import statistics

from common.report.model import names as trace_names
from common.report.findings import Finding, in_window
from common.report.rules.first_step import times
from common.report.rules.judge import (cold_step, first_step, implausibly_slow, is_real_steps, step_times,
                                      typical_matmul_gflops)
from common.report.facts.steadiness import COLD, PROFILER, WIDER_RATIO, first_vs_rest, steady, typical
from common.report.facts.tables import Tables
from common.report.units import fmt_us, rounded


def noisy_steps(t: Tables):
    """The steps after the first recorded one (on a GPU run: their device time) more than 2x apart (with five steps
    or more, beyond one slow step), or (with a lesson's knobs) matmul arithmetic far slower than any CPU: too noisy
    to judge a slower step; says so instead of advising.

    Profile more active steps on an idle machine, and read the median, not the mean."""
    if not is_real_steps(t):
        return None
    what, durs = step_times(t)
    after_first = steady(durs)
    judged = after_first if typical(after_first).noisy else typical(after_first)  # one slow step is no noise
    skip = len(durs) - len(after_first.values)
    cmp = first_vs_rest([s.dur for s in t.model.steps])
    first_in_noise = first_step(t).kind == COLD and cmp is not None and cmp.wider and not cmp.beyond_noise
    busy = implausibly_slow(t)
    if not judged.noisy and not first_in_noise and not busy:
        return None
    which = f"the steps' {what} after the first recorded step" if skip else f"the steps' {what}"
    parts = [f"{which} is {fmt_us(judged.low)} to {fmt_us(judged.high)} ({judged.high / max(judged.low, 1e-9):.1f}x "
             f"apart, median {fmt_us(judged.median)}): too noisy to judge step-to-step differences"]
    if busy:
        parts = [f"the matmul arithmetic ran at {typical_matmul_gflops(t) * 1e3:,.0f} MFLOP/s, far slower than any CPU "
                 "multiplies matrices: the machine was busy (other programs, more threads than cores), so these "
                 "timings cannot tell overhead-bound from compute-bound"] + (parts if judged.noisy else [])
    if first_in_noise:
        parts.append(f"{t.step_label(0)} (the workload's first call) is {cmp.ratio:.1f}x the others' median, but "
                     "they vary as much: no telling its cold start from noise")
    hint_steps = " (--schedule 1,1,10)" if t.knobs else ""
    return Finding("noisy_steps", "; ".join(parts),
                   f"profile more active steps{hint_steps} on an idle machine"
                   + (" (or with OMP_NUM_THREADS=1 beside other work)" if busy else "") + " and compare medians, not means",
                   dict(steps_us=[rounded(d) for d in durs], judged_on=what, judged_from=skip,
                        median_us=rounded(judged.median), max_over_min=rounded(judged.high / max(judged.low, 1e-9), 2)),
                   level="note",
                   spans=in_window(t, [(s.start, s.dur) for s in
                                       sorted(t.model.steps[skip:], key=lambda s: -s.dur)[:1]]))


def annotation_gap(t: Tables):
    """The gap from a ``record_function`` start to its first ``aten::`` op, much wider in a cold first step (the
    workload's first call); not after the workload ran (the profiler's first step often widens it:
    ``first_recorded_step`` gives it), nor inside the others' noise, nor where one other step's gap (a stall) is as
    wide: the cold-start tax, zoomed in."""
    rows = [(i, r) for i, r in enumerate(t.step_rows) if r.annotation_gap_us is not None]
    if len(rows) < 2 or rows[0][0] != 0 or cold_step(t) is None:
        return None
    cmp = first_vs_rest([r.annotation_gap_us for _, r in rows])
    if cmp is None or not cmp.beyond_noise or cmp.stall is not None or cmp.ratio < 2:  # a stalled step's gap as wide: silent
        return None
    r0 = rows[0][1]
    gaps = {t.model.steps[i].name: rounded(r.annotation_gap_us, 3) for i, r in rows}
    start = t.timeline.first_annotation_start_us  # the gap, drawn: from the annotation's start to its first op
    per = ", ".join(f"{t.step_label(i)} {fmt_us(r.annotation_gap_us)}" for i, r in rows[:6])
    return Finding("annotation_gap", f"record_function gap: '{r0.annotation}' starts {fmt_us(cmp.first)} before its "
                   f"first op ({r0.first_op}) in {t.step_label(0)}, the workload's first call, vs "
                   f"{fmt_us(cmp.rest.median)} in the other steps ({per})",
                   "the cold start, zoomed in: the first call's one-time work before its first op is dispatched "
                   "(the profiler's first recorded step widens it too)",
                   dict(annotation=r0.annotation, first_op=r0.first_op,
                        gaps_us=gaps), level="warn",
                   spans=in_window(t, [(start, gaps[t.model.steps[0].name])] if start is not None else []))


def long_final_sync(t: Tables):
    """A long final ``cudaDeviceSynchronize`` over little GPU work: the profiler flushing, mostly the GPU finishing.

    Not a real CPU cost; a sync over tiny GPU work is a classic overhead-bound symptom."""
    sync = t.timeline.final_sync
    if sync is None or sync.dur_us < 50:
        return None
    d, busy = sync.dur_us, sync.gpu_busy_us
    if busy > 0.5 * d:
        return None
    total = t.numbers.gpu.busy_in_window_us or 0.0
    return Finding("long_final_sync", f"long final {sync.name}: {fmt_us(d)} while the GPU is busy "
                   f"{fmt_us(busy)} of it ({100 * (1 - busy / d):.0f}% idle); GPU work in the whole window is {fmt_us(total)}",
                   "the profiler flushing at the end of the window, not a real cost; a sync this long over so little "
                   "GPU work says the run is overhead-bound",
                   dict(sync_us=rounded(d), gpu_busy_during_us=rounded(busy), gpu_busy_in_window_us=rounded(total),
                        start_us=rounded(sync.start_us)),
                   spans=in_window(t, [(rounded(sync.start_us), rounded(d))]))


def activity_buffer_request(t: Tables):
    """The profiler's own buffer request on the GPU lane; the first one usually accounts for the CPU-GPU lane
    offset."""
    reqs = t.timeline.buffer_requests.requests
    if not reqs:
        return None
    first, total = reqs[0], t.timeline.buffer_requests.total_us
    where = sorted({t.step_label(r.step) for r in reqs if r.step >= 0})
    return Finding("activity_buffer_request", f"{len(reqs)} Activity Buffer Request(s) on the GPU lane, "
                   f"{fmt_us(total)} in total; the first at +{fmt_us(first.start_us)} ({fmt_us(first.dur_us)})"
                   + (f", in steps {', '.join(where)}" if where else ""),
                   "the profiler's own buffer management, not your code, warmed up or not: a schedule warmup step "
                   "(the default 1,1,3) starts the profiler before the recorded steps; more steps show it only once",
                   dict(count=len(reqs), total_us=rounded(total), first_at_us=rounded(first.start_us), steps=where),
                   spans=in_window(t, sorted((r.start_us, r.dur_us) for r in reqs)))


def kernel_gap(t: Tables):
    """An idle gap between device work inside one step (its neighbours named as what they are: two kernels, or a
    memset (4 B) and a kernel, a memcpy), and what the CPU was doing: when the next kernel's launch began inside the
    gap, the GPU waited for the CPU (the launch, the op it sits in, the CPU events in the gap); when the launch call
    began before the gap and ran on into it, the slow launch set the gap; when the work was queued before, the
    device side idled (an overlapping Activity Buffer Request: the profiler). Once is a one-time cost or the
    profiler, every step is your code."""
    if not t.has_gpu or not is_real_steps(t):
        return None
    best = t.timeline.kernel_gaps
    if len([b for b in best if b is not None]) < 2:
        return None
    i = max((i for i, b in enumerate(best) if b is not None), key=lambda i: best[i].gap_us)
    gap = best[i]
    g, med = gap.gap_us, statistics.median(b.gap_us for j, b in enumerate(best) if b is not None and j != i)
    if g < 20 or g < 3 * max(med, 1.0):
        return None
    overlap, (why, hint) = list(gap.overlapping), _gap_story(t, i, gap)
    over, between = f"; overlapping {', '.join(overlap)}" if overlap else "", getattr(gap.cause, "neighbours", "two events")
    return Finding("kernel_gap", f"GPU gap: {fmt_us(g)} idle between {between} inside {t.step_label(i)} (at "
                   f"+{fmt_us(gap.start_us)}), vs a median largest gap of {fmt_us(med)} in the other steps{over}; {why}", hint,
                   dict(step=t.model.steps[i].name, gap_us=rounded(g), at_us=rounded(gap.start_us),
                        median_other_steps_us=rounded(med), overlapping=overlap, **_cause_evidence(gap.cause)),
                   spans=in_window(t, [(rounded(gap.start_us), rounded(g))]))


def _cause_evidence(c) -> dict:
    return dict(next_event=c and c.next_event, launch=c and c.launch, launching_op=c and c.op, between=c and c.neighbours,
                launched_into_gap_us=c and rounded(c.late_us), launch_in_gap_us=c and rounded(c.launch_in_gap_us),
                cpu_during_gap={n: rounded(u) for n, u in (c.busy if c else ())})


def _gap_story(t: Tables, step: int, gap) -> tuple[str, str]:
    """What the CPU was doing during the gap (the message's end) and what to make of it (the hint)."""
    cause = gap.cause
    once = "run more active steps: a gap that shows once is a one-time cost or the profiler, one in every step is the code"
    if cause is None or cause.launch is None:
        return ("the trace does not link the work after the gap to a launch: cannot tell what held it", once)
    busy = ", ".join(f"{n} {fmt_us(us)}" for n, us in cause.busy)
    nxt = trace_names.short_name(cause.next_event, 50)
    if cause.cpu_late:
        call = f"; the launch call itself took {fmt_us(cause.launch_us)}" if cause.launch_us > 0.25 * gap.gap_us else ""
        first = (f" ({t.step_label(step)} is the workload's first call: one-time work, paid once)"
                 if step == 0 and cold_step(t) is not None else "")
        return (f"the GPU waited for the CPU: {nxt} was launched ({cause.launch} in {cause.op}, which took "
                f"{fmt_us(cause.op_us)}) "
                f"{fmt_us(cause.late_us)} into the gap{call}; meanwhile the CPU ran {busy}",
                f"the CPU launching late set this gap, not the GPU nor the profiler's buffer{first}; {once}")
    if "Activity Buffer Request" in gap.overlapping:
        return (f"{nxt} was launched before the gap opened, and the profiler's Activity Buffer Request overlaps it",
                "the profiler's own buffer request (P1.8): if it appears once, it is the profiler, not your code")
    if not cause.slow_launch:
        return (f"{nxt} was launched before the gap opened ({cause.launch} in {cause.op}): the GPU idled on the "
                "device side, and the trace names nothing there", once)
    return (f"{nxt} was launched by a {cause.launch} call (in {cause.op}) that began before the gap opened and ran "
            f"{fmt_us(cause.launch_in_gap_us)} into it ({fmt_us(cause.launch_us)} in all): the work could not start "
            f"before its launch handed it over; meanwhile the CPU ran {busy}", "the slow launch call set this gap, not "
            f"the device side (the driver's work in the call, such as loading the kernel's module); {once}")


def kernel_time_spread(t: Tables):
    """The same kernel timing differently across steps (clocks, thermals, power management, the driver): read the
    median, not the mean."""
    if not t.has_gpu or not is_real_steps(t):
        return None
    hits = []
    for k in t.kernels[:10]:
        if k.share_pct < 1 or k.detail is None:
            continue
        calls = [c for c in k.detail.per_step_calls if c]
        if len(calls) < 2 or len(set(calls)) != 1:
            continue
        per = [us for us, c in zip(k.detail.per_step_us, k.detail.per_step_calls) if c]
        lo, hi = min(per), max(per)
        if lo <= 0 or hi / lo < 1.5:
            continue
        hits.append((k, per, hi / lo))
    if not hits:
        return None
    k, per, ratio = max(hits, key=lambda h: h[0].total_us)
    steps = [t.step_label(i) for i, c in enumerate(k.detail.per_step_calls) if c]
    per_txt = ", ".join(f"{s} {fmt_us(us)}" for s, us in list(zip(steps, per))[:8])
    return Finding("kernel_time_spread", f"{trace_names.short_name(k.name, 60)} times differently across steps: {per_txt} "
                   f"(max/min {ratio:.1f}x); mean {fmt_us(k.mean_us)} vs median {fmt_us(k.median_us)} per call",
                   "clocks, thermals and driver housekeeping move single runs: read the trace and the median, "
                   "not the mean; profile more steps",
                   dict(kernel=k.name, per_step_us=[rounded(us) for us in per], max_over_min=rounded(ratio, 2),
                        mean_us=rounded(k.mean_us), median_us=rounded(k.median_us), others=len(hits) - 1))


SPREAD_MIN_STEPS = 8  # a spread needs a long window (the posts' active=20); the default 3 steps cannot show one
MEAN_MISLEADS = 1.2  # the mean over the median beyond this: a few slow steps carry the mean


def op_time_spread(t: Tables):
    """CPU, 8 steps or more (P1.14 with ``--schedule 0,0,20``): the heaviest compute op's own time per step, its
    median, mean and range; says whether a few slow steps carry the mean (it misleads) or the steps agree.

    The heaviest: the largest median own time per step (a spike in a light op does not pick it); the profiler
    table's averages are means over every call."""
    work = t.cpu_work
    if t.has_gpu or not is_real_steps(t) or work is None or len(work.heaviest_per_step) < SPREAD_MIN_STEPS:
        return None
    per = work.heaviest_per_step
    calls = {s.compute_calls for s in per}
    if len(calls) != 1 or not min(calls):
        return None  # not the same calls in every step: their times do not compare
    op, us = work.heaviest_op, [s.compute_us for s in per]
    mean, median = statistics.fmean(us), statistics.median(us)
    if median <= 0:
        return None
    slow = sorted((i for i, u in enumerate(us) if u > WIDER_RATIO * median), key=lambda i: -us[i])
    first = {COLD: ": the workload's first call", PROFILER: ": the profiler's first recorded step"}.get(first_step(t).kind, "")
    slow_txt = ", ".join(f"{t.step_label(i)} {fmt_us(us[i])}{first if i == 0 else ''}" for i in slow[:3]) + \
        (" ..." if len(slow) > 3 else "")
    seen = (f"{op}'s own time per step over {len(us)} steps: median {fmt_us(median)}, mean {fmt_us(mean)}, "
            f"from {fmt_us(min(us))} to {fmt_us(max(us))}")
    misleads = mean > MEAN_MISLEADS * median
    if misleads:
        verdict = (f"the mean is {mean / median:.1f}x the median, carried by {len(slow)} slow step"
                   f"{'s' if len(slow) != 1 else ''} ({slow_txt}): the mean misleads, the median holds")
    else:
        verdict = f"the mean is within {100 * abs(mean / median - 1):.0f}% of the median: in this run the steps agree"
    return Finding("op_time_spread", f"{seen}; {verdict}",
                   "read the median and the steps themselves, not the table's averages (means over every call)"
                   if misleads else "",
                   dict(op=op, per_step_us=[rounded(u) for u in us], calls_per_step=min(calls), mean_us=rounded(mean),
                        median_us=rounded(median), mean_over_median=rounded(mean / median, 2), mean_misleads=misleads,
                        slow_steps=[t.model.steps[i].name for i in slow]),
                   spans=in_window(t, [(t.model.steps[i].start, t.model.steps[i].dur) for i in slow]))


def buffer_request_gpu_only(t: Tables):
    """CPU, ``wait=0, warmup=0`` (P1.8's experiment): no Activity Buffer Request, because it is a GPU-lane event
    (CUPTI filling its first buffer); what the cold window shows on the CPU instead (its first step, or that it is
    not cold)."""
    knobs = t.knobs
    if t.has_gpu or knobs is None or knobs.schedule.wait or knobs.schedule.warmup or not is_real_steps(t):
        return None
    cmp, kind = cold_step(t), first_step(t).kind
    if cmp is not None:
        shows = (f"what this cold window does show is its first step, {t.step_label(0)}, the workload's first call, "
                 f"at {times(cmp.ratio)} the others' median")
    elif kind == COLD:
        shows = "its first step, the workload's first call, is not wider than the others beyond their noise"
    else:
        shows = ("the lesson warmed up before profiling, so its first step is not the workload's first call: "
                 "only the profiler's first recorded step")
    return Finding("buffer_request_gpu_only", f"schedule wait={knobs.schedule.wait}, warmup={knobs.schedule.warmup} on the "
                   "CPU: no Activity Buffer Request here, as expected: it is an event of the GPU lane (the profiler's "
                   f"CUDA side filling its buffer, P1.8), and a CPU trace has no GPU lane; {shows}",
                   "on a GPU the same schedule shows the request, and with active=20 the one gap it leaves between "
                   "two kernels",
                   dict(wait=knobs.schedule.wait, warmup=knobs.schedule.warmup, active=knobs.schedule.active,
                        cold_first_step=cmp is not None), level="note")
