"""Judgements several themes share: are these real steps, was the run warmed up, is the first step
cold, the CPU work of the steady steps, the matmul rate a lesson's knobs give."""

from __future__ import annotations

import dataclasses

from common.knobs import RunKnobs
from common.report.plausible_rates import cpu_rate_possible
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


MATMUL_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm")  # the ops whose own time is the matmul's


def matmul_gflops(t: Tables) -> float | None:
    """The rate of the workload's matmul arithmetic: its FLOPs per step (the lesson's knobs say) over
    the matmul ops' own time per step (their self time over the window's steps), when the trace
    has those ops."""
    knobs, work = t.knobs, steady_work(t)
    if knobs is None or not knobs.matmul_flops_per_step or work is None:
        return None
    own_us = sum(o.self_us for o in t.cpu_work.compute_ops if o.name in MATMUL_OPS)
    if own_us <= 0:
        return None
    rate = knobs.matmul_flops_per_step * len(t.cpu_work.steps) / own_us / 1e3
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


def implausibly_slow(t: Tables) -> bool:
    rate = matmul_gflops(t)
    return rate is not None and rate < plausible_floor(t)
