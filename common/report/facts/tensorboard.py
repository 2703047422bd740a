"""TensorBoard's figures, on the definitions of the PyTorch TensorBoard profiler plugin.

A reader compares our report with TensorBoard (or a colleague's screenshot of it), so the figures
that carry its name follow its definitions, written here from what the plugin documents and shows
(``tests/data/traces/kineto/v100_resnet50_train.tensorboard.json`` holds its figures and
definitions for one trace):

- **Steps, moved onto the device side.** A runtime call (``cudaLaunchKernel``...) lying wholly
  inside a host ProfilerStep belongs to that step. A step starts at its host start, or at the
  previous step's end if that is later; it ends at its host end, or when the last GPU work its
  runtime calls launched ends, if that is later. The first step starts no earlier than the end
  of GPU work launched outside every step that ends before the first step's own GPU work. The
  trailing steps that launched no GPU work are dropped, and so is the last step that did when it
  launched under 80% of the previous step's GPU work (the profiler stopped before it was all
  captured). A trace whose steps launch no GPU work keeps its host steps.
- **GPU utilization**: the union of the kernels inside the steps' span (first step's start to the
  last step's end) over that span, per device.
- **Est. SM efficiency**: at each instant, the sum of the running kernels' blocks per SM, capped
  at 1, integrated over the steps' span and divided by its length: a kernel too small to fill
  the GPU counts for the share of SMs it can use. Never above GPU utilization.
- **Est. achieved occupancy**: the kernels' ``est. achieved occupancy %`` weighted by their
  duration inside the steps' span.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.model.intervals import Intervals
from common.report.model.build import BREAKDOWN_KEYS, KERNEL, MEMCPY, MEMSET, OP, RUNTIME, STEP_RE, Model

DATALOADER_PREFIX, DATALOADER_SUFFIX = "enumerate(DataLoader)#", ".__next__"  # TensorBoard's DataLoader rows
TAIL_KEEP_SHARE = 0.8  # the last step is kept when it launched at least this share of the previous step's work


@dataclass(frozen=True)
class AlignedSteps:
    """The steps as TensorBoard sees them: one start and end per kept step (µs, relative to the window)."""

    starts: np.ndarray
    ends: np.ndarray
    moved: bool  # the steps launched GPU work, so they were moved onto the device side
    dropped: tuple[str, ...] = ()  # the trailing steps TensorBoard leaves out

    @property
    def kept(self) -> int:
        return int(self.starts.size)

    @property
    def span(self) -> tuple[float, float]:
        return (float(self.starts[0]), float(self.ends[-1])) if self.kept else (0.0, 0.0)

    @property
    def durations(self) -> np.ndarray:
        return self.ends - self.starts


@dataclass(frozen=True)
class DeviceFigures:
    """TensorBoard's Overview figures for one device (percentages; None without the data)."""

    device: int
    gpu_utilization_pct: Optional[float]
    est_sm_efficiency_pct: Optional[float]
    est_achieved_occupancy_pct: Optional[float]


def align_steps(m: Model) -> AlignedSteps:
    """The host steps moved onto the device side, trailing steps not wholly captured dropped."""
    host_starts = np.array([s.start for s in m.steps], dtype=np.float64)
    host_ends = np.array([s.end for s in m.steps], dtype=np.float64)
    first_work, last_work, launched, in_step = _work_per_step(m, host_starts, host_ends)
    if not launched.any():
        return AlignedSteps(host_starts, host_ends, moved=False)
    starts, ends = np.empty_like(host_starts), np.empty_like(host_ends)
    previous_end = _first_step_floor(m, host_starts[0], first_work[0], in_step)
    for i in range(host_starts.size):
        starts[i] = max(previous_end, host_starts[i])
        ends[i] = max(host_ends[i], last_work[i] if launched[i] else starts[i], starts[i])
        previous_end = ends[i]
    keep = _steps_kept(launched)
    dropped = tuple(s.name for s in m.steps[keep:])
    return AlignedSteps(starts[:keep], ends[:keep], moved=True, dropped=dropped)


def _work_per_step(m: Model, host_starts: np.ndarray, host_ends: np.ndarray):
    """Per step: first start and last end of the GPU work its runtime calls launched, how many
    pieces of GPU work that was; and per device event, the step whose runtime call launched it (-1)."""
    cpu, dev = m.cpu, m.dev
    steps = host_starts.size
    runtime = np.flatnonzero(cpu.kind == RUNTIME)
    step_of_call = np.full(cpu.n, -1, dtype=np.int64)
    if runtime.size and steps:
        i = np.searchsorted(host_starts, cpu.ts[runtime], side="right") - 1
        inside = (i >= 0) & (cpu.end[runtime] <= host_ends[np.maximum(i, 0)])
        step_of_call[runtime[inside]] = i[inside]
    in_step = np.full(dev.n, -1, dtype=np.int64)
    linked = dev.launch >= 0
    in_step[linked] = step_of_call[dev.launch[linked]]
    matched = in_step >= 0
    launched = np.bincount(in_step[matched], minlength=steps)
    first_work = np.full(steps, np.inf)
    last_work = np.full(steps, -np.inf)
    np.minimum.at(first_work, in_step[matched], dev.ts[matched])
    np.maximum.at(last_work, in_step[matched], dev.end[matched])
    return first_work, last_work, launched, in_step


def _first_step_floor(m: Model, host_start: float, first_work: float, in_step: np.ndarray) -> float:
    """Where the first step may start: its host start, or the end of GPU work launched outside every
    step that ends before the first step's own GPU work starts, if later."""
    if not np.isfinite(first_work):
        return host_start
    dev = m.dev
    earlier = (in_step < 0) & (dev.end < first_work)
    return max(host_start, float(dev.end[earlier].max())) if earlier.any() else host_start


def _steps_kept(launched: np.ndarray) -> int:
    """How many leading steps TensorBoard keeps: up to the last that launched GPU work, less that one
    too when it launched under TAIL_KEEP_SHARE of the previous step's work."""
    if launched.size < 2:
        return int(launched.size)
    last = int(np.flatnonzero(launched)[-1])
    if last > 0 and launched[last - 1] * TAIL_KEEP_SHARE > launched[last]:
        return last
    return last + 1


def device_figures(m: Model, steps: AlignedSteps) -> list[DeviceFigures]:
    """TensorBoard's GPU utilization, Est. SM efficiency and occupancy per device, the device with the
    most kernel time first; empty without kernels or steps."""
    dev = m.dev
    start, end = steps.span
    if not steps.kept or end <= start or not dev.n:
        return []
    kernels = dev.kind == KERNEL
    devices = np.unique(dev.device[kernels])
    busy = {int(d): float(dev.dur[kernels & (dev.device == d)].sum()) for d in devices.tolist()}
    out = []
    for device in sorted(busy, key=lambda d: (-busy[d], d)):
        sel = np.flatnonzero(kernels & (dev.device == device))
        ts, ends = dev.ts[sel], dev.end[sel]
        out.append(DeviceFigures(
            device=device,
            gpu_utilization_pct=100.0 * Intervals(ts, ends).covered(start, end) / (end - start),
            est_sm_efficiency_pct=_sm_efficiency(ts, ends, m.dev.blocks_per_sm[sel], start, end),
            est_achieved_occupancy_pct=_occupancy(ts, ends, dev.occ[sel], start, end),
        ))
    return out


def _sm_efficiency(ts: np.ndarray, ends: np.ndarray, blocks_per_sm: np.ndarray, start: float,
                   end: float) -> Optional[float]:
    """At each instant min(1, sum of the running kernels' blocks per SM), integrated over [start, end]."""
    known = np.isfinite(blocks_per_sm) & (blocks_per_sm > 0)
    if not known.any():
        return None
    times = np.concatenate((ts[known], ends[known]))
    change = np.concatenate((blocks_per_sm[known], -blocks_per_sm[known]))
    order = np.argsort(times, kind="stable")
    times, level = times[order], np.cumsum(change[order])
    efficiency = np.clip(level[:-1], 0.0, 1.0)  # between times[k] and times[k + 1]
    covered = np.clip(times[1:], start, end) - np.clip(times[:-1], start, end)
    return 100.0 * float((efficiency * covered).sum()) / (end - start)


def _occupancy(ts: np.ndarray, ends: np.ndarray, occupancy: np.ndarray, start: float, end: float) -> Optional[float]:
    known = np.isfinite(occupancy) & (occupancy >= 0)
    inside = np.clip(ends[known], start, end) - np.clip(ts[known], start, end)
    if not known.any() or inside.sum() <= 0:
        return None
    return float((occupancy[known] * inside).sum() / inside.sum())


def step_breakdown(m: Model, steps: AlignedSteps) -> dict:
    """Per kept step, TensorBoard's breakdown: each instant counts once, in the first category active
    then (kernel > memcpy > memset > runtime > dataloader > CPU exec), the rest is other."""
    cpu, dev = m.cpu, m.dev
    step_name = m.name_mask(lambda s: bool(STEP_RE.match(s)))
    dataloader = m.name_mask(lambda s: s.startswith(DATALOADER_PREFIX) and s.endswith(DATALOADER_SUFFIX))
    is_op = (cpu.kind == OP) & ~step_name[cpu.name]
    loading = is_op & dataloader[cpu.name]
    runtime = cpu.kind == RUNTIME
    layers = [Intervals(dev.ts[dev.kind == k], dev.end[dev.kind == k]) for k in (KERNEL, MEMCPY, MEMSET)]
    layers += [Intervals(cpu.ts[sel], cpu.end[sel]) for sel in (runtime, loading, is_op & ~loading)]
    covered_before = np.zeros(steps.kept)
    union = Intervals.empty()
    out = {}
    for key, layer in zip(BREAKDOWN_KEYS, layers):
        union = union.union(layer) if len(layer) else union
        covered = np.asarray(union.covered(steps.starts, steps.ends), dtype=np.float64)
        out[key] = covered - covered_before
        covered_before = covered
    out["other"] = np.maximum(steps.durations - covered_before, 0.0)
    return out
