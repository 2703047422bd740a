"""Judgements several themes share: are these real steps, was the run warmed up, is the first step
cold, the CPU work of the steady steps, the matmul rate a lesson's knobs give."""

from __future__ import annotations

from common.knobs import RunKnobs
from common.report.steadiness import COLD, FirstRecorded, first_recorded, first_vs_rest
from common.report.tables import Tables


MIN_PLAUSIBLE_GFLOPS = 0.5  # any CPU of this century multiplies matrices faster: slower means a busy machine


def is_real_steps(t: Tables) -> bool:
    return t.model.window_source == "ProfilerStep" and len(t.model.steps) >= 2


def warmed_up(t: Tables) -> bool:
    """The lesson that wrote the trace ran its workload un-profiled before profiling (--warmup)."""
    knobs = t.knobs
    return knobs is not None and knobs.warmup


def warmup_hint(knobs: RunKnobs | None) -> str:
    """How to warm up, fitted to what the run did (a lesson's trace says; another trace does not)."""
    if knobs is None:
        return "warm up before profiling (a few un-profiled calls + synchronize) and/or use the schedule's warmup"
    keep = "" if knobs.schedule.warmup else " and give the schedule a warmup step (the default 1,1,3)"
    return f"run it again with --warmup ({knobs.script}.py: un-profiled calls + synchronize before profiling){keep}"


def first_step(t: Tables) -> FirstRecorded:
    """What the first recorded step is: the workload's first call (a cold start), or a step after
    the workload already ran (the schedule's unrecorded steps, the lesson's warm-up calls)."""
    knobs = t.knobs
    calls = None if knobs is None else (knobs.warmup_calls if knobs.warmup else 0)
    return first_recorded(t.model.steps[0].number if t.model.steps else None, calls)


def wide_first_step(t: Tables):
    """The first recorded step against the others, when it is wider beyond the others' noise (None
    otherwise), whatever made it wide: a cold start or the profiler's first recorded step."""
    if not is_real_steps(t):
        return None
    cmp = first_vs_rest([s.dur for s in t.model.steps])
    return cmp if cmp is not None and cmp.beyond_noise else None


def cold_step(t: Tables):
    """The first step against the others, when it is wider beyond the others' noise and is the
    workload's first call: no warm-up, no unrecorded schedule step before it (None otherwise)."""
    return wide_first_step(t) if first_step(t).kind == COLD else None


def steady_work(t: Tables):
    """The CPU work split of a CPU-only trace over its steady steps (without a wide first step: a
    cold start or the profiler's first recorded step)."""
    work = t.cpu_work
    if t.has_gpu or work is None or not is_real_steps(t):
        return None
    return work.without_first() if wide_first_step(t) is not None else work


def step_times(t: Tables) -> tuple[str, list]:
    """What steadiness is judged on: on a GPU run the device time each step launched (the host's step
    times carry the profiler's first step and the launch overhead), on a CPU run the step wall times."""
    if t.has_gpu:
        return "device time", [r.device_us for r in t.step_rows]
    return "wall time", [s.dur for s in t.model.steps]


MATMUL_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm")  # the ops whose own time is the matmul's


def matmul_gflops(t: Tables) -> float | None:
    """The rate of the workload's matmul arithmetic: its FLOPs per step (the lesson's knobs say) over
    the matmul ops' own time in a typical step (the median over the steady steps, so a cold first
    call or one stalled step is not read as the machine's speed), when the trace has those ops."""
    knobs, work = t.knobs, steady_work(t)
    if knobs is None or not knobs.matmul_flops_per_step or work is None:
        return None
    own_us = work.median_step_sum(lambda name: name in MATMUL_OPS) if work.by_step else 0.0
    if own_us <= 0:
        return None
    return knobs.matmul_flops_per_step / own_us / 1e3


def plausible_floor(t: Tables) -> float:
    """The slowest matmul rate a CPU of this century plausibly runs, in GFLOP/s: MIN_PLAUSIBLE_GFLOPS,
    divided by the slowdown the lesson measured at its start when the run's dtype is emulated there
    (a bf16 matmul on a CPU without bf16 instructions runs 20-100x slower, and that is no noise)."""
    cpu = t.knobs.cpu if t.knobs is not None and isinstance(t.knobs.cpu, dict) else {}
    slowdown = cpu.get("slowdown")
    if isinstance(slowdown, (int, float)) and slowdown > 1 and cpu.get("slow_dtype") == t.knobs.dtype:
        return MIN_PLAUSIBLE_GFLOPS / slowdown
    return MIN_PLAUSIBLE_GFLOPS


def implausibly_slow(t: Tables) -> bool:
    rate = matmul_gflops(t)
    return rate is not None and rate < plausible_floor(t)
