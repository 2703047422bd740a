"""The timeline theme's numbers (:mod:`common.report.rules.timeline`): the last device synchronize, the
profiler's Activity Buffer Requests, each step's largest gap between device work (and what the CPU did
meanwhile) and where the first step's first annotation starts. One record, :class:`TimelineFacts`
(``t.timeline``); times are µs relative to the window's start, like the model's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.facts.gap_cause import GapCause, GapIndex, gap_cause
from common.report.facts.tensorboard import AlignedSteps
from common.report.model.build import ANNOTATION, RUNTIME, SYNC_NAMES, Model
from common.report.model.intervals import Intervals


@dataclass(frozen=True)
class TimelineFacts:
    """What the timeline rules read."""

    final_sync: Optional[FinalSync]  # the last device synchronize
    buffer_requests: BufferRequests  # the profiler's Activity Buffer Requests
    kernel_gaps: tuple  # per step, its largest gap between device work (KernelGap or None)
    first_annotation_start_us: Optional[float]  # where the first step's first annotation starts


def timeline_facts(m: Model, gpu_busy: Intervals, aligned: AlignedSteps, first_annotation: Optional[str]) -> TimelineFacts:
    """The timeline theme's record: ``gpu_busy`` is the union of the device work, ``aligned`` the steps as
    TensorBoard moves them, ``first_annotation`` the first step's first user annotation (None: none)."""
    return TimelineFacts(final_sync=final_sync(m, gpu_busy), buffer_requests=buffer_requests(m),
                         kernel_gaps=kernel_gaps(m, gpu_busy, aligned),
                         first_annotation_start_us=annotation_start(m, first_annotation))


@dataclass(frozen=True)
class FinalSync:
    """The last device synchronize on the CPU lane and how busy the GPU was during it."""

    name: str
    start_us: float
    dur_us: float
    gpu_busy_us: float


def final_sync(m: Model, gpu_busy: Intervals) -> Optional[FinalSync]:
    cpu = m.cpu
    sync_ids = m.name_mask(lambda s: s in SYNC_NAMES)
    idx = np.flatnonzero(sync_ids[cpu.name] & (cpu.kind == RUNTIME))
    if not idx.size:
        return None
    i = int(idx[np.argmax(cpu.ts[idx])])
    a, d = float(cpu.ts[i]), float(cpu.dur[i])
    return FinalSync(m.names[cpu.name[i]], a, d, float(gpu_busy.covered(a, a + d)) if len(gpu_busy) else 0.0)


@dataclass(frozen=True)
class BufferRequest:
    name: str
    start_us: float
    dur_us: float
    step: int  # index of the step holding its start (-1: none)


@dataclass(frozen=True)
class BufferRequests:
    """The profiler's Activity Buffer Requests (overhead events and GPU-lane annotations), by start."""

    requests: tuple  # BufferRequest
    total_us: float


def buffer_requests(m: Model) -> BufferRequests:
    reqs = [(o[0], o[1], o[2]) for o in m.overheads if "Buffer Request" in o[0]]
    reqs += [(a[0], a[1], a[2]) for a in m.gpu_annotations if "Buffer Request" in a[0]]
    reqs.sort(key=lambda r: r[1])
    steps = m.step_of(np.array([r[1] for r in reqs])).tolist() if reqs else []
    return BufferRequests(tuple(BufferRequest(n, s, d, int(i)) for (n, s, d), i in zip(reqs, steps)),
                          sum(r[2] for r in reqs))


@dataclass(frozen=True)
class KernelGap:
    """The largest idle gap between device work inside one step."""

    gap_us: float
    start_us: float
    end_us: float
    overlapping: tuple  # the profiler overhead events that overlap the gap, by name
    cause: Optional[GapCause] = None  # the launch after the gap and what the CPU did meanwhile (:mod:`.gap_cause`)


def _device_window(m: Model, aligned: AlignedSteps, i: int) -> tuple[float, float]:
    """Step ``i`` as TensorBoard moves it onto the device side (its host span when TensorBoard drops it)."""
    if i < aligned.kept:
        return float(aligned.starts[i]), float(aligned.ends[i])
    return m.steps[i].start, m.steps[i].end


def kernel_gaps(m: Model, gpu_busy: Intervals, aligned: AlignedSteps) -> tuple:
    """Per step, its largest gap (None for a step with fewer than two device events); empty without a
    device lane or with fewer than two ProfilerSteps."""
    if not m.has_gpu or m.window_source != "ProfilerStep" or len(m.steps) < 2:
        return ()
    dev = m.dev
    out, index = [], GapIndex(m)
    for i in range(len(m.steps)):
        sel = dev.step == i
        if sel.sum() < 2:
            out.append(None)
            continue
        start, end = _device_window(m, aligned, i)  # a kernel that claims to start before its step is cut there
        a, b = max(float(dev.ts[sel].min()), start), min(float(dev.end[sel].max()), end)
        if b <= a:
            out.append(None)
            continue
        gs, ge = gpu_busy.gaps_inside(a, b)
        if not gs.size:
            out.append(KernelGap(0.0, a, a, ()))
            continue
        k = int(np.argmax(ge - gs))
        g0, g1 = float(gs[k]), float(ge[k])
        out.append(KernelGap(float(ge[k] - gs[k]), g0, g1,
                             tuple(o[0] for o in m.overheads if o[1] < g1 and o[1] + o[2] > g0), gap_cause(m, g0, g1, index)))
    return tuple(out)


def annotation_start(m: Model, name: Optional[str]) -> Optional[float]:
    """The earliest start of annotation ``name`` inside the first step (None: not there)."""
    if name is None or name not in m.names or not m.steps:
        return None
    cpu, first = m.cpu, m.steps[0]
    hits = np.flatnonzero((cpu.name == m.names.index(name)) & (cpu.kind == ANNOTATION) & (cpu.ts >= first.start)
                          & (cpu.ts <= first.end))
    return float(cpu.ts[hits].min()) if hits.size else None
