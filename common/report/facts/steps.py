"""What a comparison reads of a run: the model, one row per host step, and the header (the GPUs, versions and
job the trace names). :class:`RunSteps` is that much of :class:`~.tables.Tables` (which extends it with every
other number), made on its own by :func:`run_steps` for ``--compare``, which reads no other number: a
comparison neither computes nor imports the themes' facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.knobs import RunKnobs
from common.report.facts.header import Header, header_of
from common.report.facts.rows import StepBreakdown, StepRow
from common.report.facts.tensorboard import AlignedSteps, align_steps, step_breakdown
from common.report.model.build import ANNOTATION, BREAKDOWN_KEYS, KERNEL, OP, STEP_RE, Model
from common.report.model.intervals import Intervals


@dataclass(frozen=True, eq=False)
class RunSteps:
    """One run's steps: its model (the steps, names, knobs and metadata), a :class:`~.rows.StepRow` per host
    step, and its header."""

    model: Model
    step_rows: tuple  # StepRow per host step
    header: Header  # the GPUs, versions and job the trace names

    @property
    def knobs(self) -> Optional[RunKnobs]:
        """What the lesson that wrote the trace did (warm-up, compile, schedule); None for other traces."""
        return self.model.knobs

    @property
    def has_gpu(self) -> bool:
        return self.model.has_gpu

    @property
    def window_us(self) -> float:
        return self.model.window_us

    def step_label(self, i: int) -> str:
        return self.model.step_label(i)


def run_steps(m: Model) -> RunSteps:
    """The step rows and the header of a model, and nothing else."""
    aligned = align_steps(m)
    busy = gpu_union(m)
    return RunSteps(model=m, step_rows=step_rows(m, step_breakdown(m, aligned), busy, aligned), header=header_of(m))


def gpu_union(m: Model) -> Intervals:
    """The union of every kernel, memcpy and memset (all devices and streams)."""
    return Intervals(m.dev.ts, m.dev.end) if m.has_gpu else Intervals.empty()


def step_rows(m: Model, per_step: dict, gpu_union: Intervals, aligned: AlignedSteps) -> tuple[StepRow, ...]:
    """One row per host step: wall time, ops, kernels and device time it launched, GPU busy inside it,
    its first annotation's gap, and TensorBoard's window and breakdown of it (None for a step
    TensorBoard drops)."""
    cpu, dev = m.cpu, m.dev
    nsteps = len(m.steps)
    starts = np.array([s.start for s in m.steps])
    ends = np.array([s.end for s in m.steps])
    busy = np.asarray(gpu_union.covered(starts, ends), dtype=np.float64) if len(gpu_union) else np.zeros(nsteps)
    kernel_step = dev.step[(dev.kind == KERNEL) & (dev.step >= 0)]
    kernels = np.bincount(kernel_step, minlength=nsteps)
    in_step = dev.step >= 0
    device_time = np.bincount(dev.step[in_step], weights=dev.dur[in_step], minlength=nsteps)
    op_step = cpu.step[(cpu.kind == OP) & (cpu.step >= 0)]
    ops = np.bincount(op_step, minlength=nsteps)
    gaps = annotation_gaps(m)
    rows = []
    for i, s in enumerate(m.steps):
        kept = i < aligned.kept
        rows.append(StepRow(
            name=s.name, number=s.number, start_us=s.start, wall_us=s.dur,
            ops=int(ops[i]), kernels=int(kernels[i]), device_us=float(device_time[i]),
            gpu_busy_us=float(busy[i]) if m.has_gpu else None,
            gpu_busy_pct=(100.0 * float(busy[i]) / s.dur if s.dur > 0 else 0.0) if m.has_gpu else None,
            annotation=gaps[i][0], annotation_gap_us=gaps[i][1], first_op=gaps[i][2],
            device_aligned_start_us=float(aligned.starts[i]) if kept else None,
            device_aligned_wall_us=float(aligned.ends[i] - aligned.starts[i]) if kept else None,
            breakdown=StepBreakdown(**{k: float(per_step[k][i]) for k in BREAKDOWN_KEYS}) if kept else None,
        ))
    return tuple(rows)


def annotation_gaps(m: Model) -> list:
    """Per step: (first user annotation, gap to its first aten::* descendant, that op's name)."""
    cpu = m.cpu
    out = [(None, None, None)] * len(m.steps)
    annotations = np.flatnonzero((cpu.kind == ANNOTATION) & (cpu.step >= 0))
    if not annotations.size:
        return out
    skip = m.name_mask(lambda s: bool(STEP_RE.match(s)) or s.startswith(("nccl:", "gloo:", "## ", "Optimizer.")))
    annotations = annotations[~skip[cpu.name[annotations]]]
    is_aten = m.name_mask(lambda s: s.startswith("aten::"))
    done = set()
    for i in annotations.tolist():  # sorted by thread, then time
        step = int(cpu.step[i])
        if step in done:
            continue
        j = i + 1
        hi = np.searchsorted(cpu.ts[j:j + 4096], cpu.end[i], side="right") + j
        candidates = np.flatnonzero(is_aten[cpu.name[j:hi]] & (cpu.thread[j:hi] == cpu.thread[i]))
        if not candidates.size:
            continue
        k = j + int(candidates[0])
        done.add(step)
        out[step] = (m.names[cpu.name[i]], float(cpu.ts[k] - cpu.ts[i]), m.names[cpu.name[k]])
    return out
