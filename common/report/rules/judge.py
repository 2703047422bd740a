"""Judgements several themes share: are these real steps, was the run warmed up, is the first step
cold, the CPU work of the steady steps, the matmul rate a lesson's knobs give."""

from __future__ import annotations

from common.knobs import RunKnobs
from common.report.facts.steadiness import COLD, FirstRecorded, first_recorded, first_vs_rest
from common.report.facts.knob_work import GEMMS
from common.report.facts.roofline import KNOBS_OP
from common.report.facts.impossible import cpu_rate_possible
from common.report.facts.tables import Tables


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
MATMUL_ROWS = MATMUL_OPS + (GEMMS, KNOBS_OP)  # the roofline's rows of matmul arithmetic


def matmul_gflops(t: Tables) -> float | None:
    """The rate of the workload's matmul arithmetic, the roofline's own (one rate per op): the GEMM rows'
    FLOPs (record_shapes, else the lesson's knobs) over their ops' CPU time in the steps, when the
    trace has those ops."""
    r = t.roofline
    if steady_work(t) is None or r is None or r.timed_on != "cpu":
        return None
    rows = [j.row for j in r.rows if j.row.op in MATMUL_ROWS]
    time_us = sum(row.time_us for row in rows)
    if time_us <= 0:
        return None
    rate = sum(row.flops * row.calls for row in rows) / time_us / 1e3
    return rate if cpu_rate_possible(rate) else None  # beyond any CPU: the roofline flags it, no verdict reads it


def plausible_floor(t: Tables) -> float:
    """The slowest matmul rate a CPU of this century plausibly runs, in GFLOP/s: MIN_PLAUSIBLE_GFLOPS,
    divided by the slowdown the lesson measured at its start when the run's dtype is emulated there
    (a bf16 matmul on a CPU without bf16 instructions runs 20-100x slower, and that is no noise)."""
    cpu = t.knobs.cpu if t.knobs is not None and isinstance(t.knobs.cpu, dict) else {}
    slowdown = cpu.get("slowdown")
    if isinstance(slowdown, (int, float)) and slowdown > 1 and cpu.get("slow_dtype") == t.knobs.dtype:
        return MIN_PLAUSIBLE_GFLOPS / slowdown
    return MIN_PLAUSIBLE_GFLOPS


def typical_matmul_gflops(t: Tables) -> float | None:
    """The matmul arithmetic's rate in the typical step of those the verdicts read (:func:`steady_work`: a wide
    first step left out; the median step's own matmul time): :func:`matmul_gflops` is over every step, so one
    stalled call (or the profiler's first recorded step, 4 ms for a 21 µs mm) would make a run look busy."""
    rate, every = matmul_gflops(t), t.cpu_work
    if rate is None:
        return None
    total = sum(sum(us) for name, us in every.by_step if name in MATMUL_OPS)
    typical = steady_work(t).median_step_sum(lambda name: name in MATMUL_OPS)
    if total <= 0 or typical <= 0 or not every.steps:
        return rate
    median_step = rate * total / (len(every.steps) * typical)
    return median_step if cpu_rate_possible(median_step) else rate


def implausibly_slow(t: Tables) -> bool:
    """The typical step's matmul far slower than any CPU (:func:`typical_matmul_gflops`): a busy machine."""
    rate = typical_matmul_gflops(t)
    return rate is not None and rate < plausible_floor(t)
