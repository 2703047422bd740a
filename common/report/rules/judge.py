"""Judgements several themes share: are these real steps, was the run warmed up, is the first step
cold, the CPU work of the steady steps, the matmul rate a lesson's knobs give."""

from __future__ import annotations

import dataclasses

from common.knobs import RunKnobs
from common.report.steadiness import first_vs_rest
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


def cold_step(t: Tables):
    """The first step against the others, when it is wider beyond the others' noise in a run that did
    not warm up (None otherwise)."""
    if not is_real_steps(t) or warmed_up(t):
        return None
    cmp = first_vs_rest([s.dur for s in t.model.steps])
    return cmp if cmp is not None and cmp.beyond_noise else None


def steady_work(t: Tables):
    """The CPU work split of a CPU-only trace over its steady steps (without a cold first step)."""
    work = t.cpu_work
    if t.has_gpu or work is None or not is_real_steps(t):
        return None
    return dataclasses.replace(work, steps=work.steps[1:]) if cold_step(t) is not None else work


def matmul_gflops(t: Tables) -> float | None:
    """The rate of the workload's matmul arithmetic over the compute ops' median time per step, when the
    lesson that wrote the trace said how much arithmetic a step holds."""
    knobs, work = t.knobs, steady_work(t)
    if knobs is None or not knobs.matmul_flops_per_step or work is None or work.median_compute_us <= 0:
        return None
    return knobs.matmul_flops_per_step / work.median_compute_us / 1e3


def implausibly_slow(t: Tables) -> bool:
    rate = matmul_gflops(t)
    return rate is not None and rate < MIN_PLAUSIBLE_GFLOPS
