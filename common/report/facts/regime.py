"""What bounds a GPU run, in two questions that "GPU busy" alone does not answer.

1. **Who sets the pace: the host or the device.** Per step, the device time of the work the step
   launched against the host's wall time of the step (medians over the steps). At or above
   :data:`DEVICE_BOUND_FROM` the GPU's work fills the step: **device-bound** (the host launches as fast
   as the GPU runs, or faster). Under :data:`OVERHEAD_BELOW` the GPU idles most of each step while the
   host dispatches: **overhead-bound**. In between, neither alone.
2. **What bounds the kernels: the compute roof or the memory roof.** The device time of the steps in
   three classes: *matrix* work (GEMM and attention kernels), judged by the roofline's intensity
   against the ridge point of the dtype their kernels ran (:mod:`.roofline`); *memory* work (memcpys,
   memsets, elementwise, reduction, softmax and norm kernels: a few FLOPs per byte, under the ridge of
   every GPU); and the *other* kernels, which the trace cannot judge. The class with most of the time
   (and, for matrix work, its roof) is the verdict; where the matrix work's bytes are unknown, or no
   class holds most of it, cannot tell.

Numbers only (:mod:`~common.report.rules.regime` words them). Computed once per trace by :func:`regime_of`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.model import names as trace_names
from common.report.facts.knob_work import ATTENTION
from common.report.model.build import KERNEL, Model
from common.report.facts.roofline import Judged, Roofline, Row, judge_row
from common.report.model.peaks import Peak

DEVICE_BOUND_FROM = 0.8  # device time per step / host wall per step, medians: at or above, device-bound
OVERHEAD_BELOW = 0.5  # under this, the GPU idles most of each step: overhead-bound
MOST = 0.5  # a class holding more than this share of the device time decides what bounds the kernels
MATRIX_CATEGORIES = ("gemm", "attention", "cudnn")
MEMORY_CATEGORIES = ("aten", "normalization", "triton_pointwise", "triton_reduction", "triton_persistent")
_MEMORY_NAME = re.compile(r"softmax|layer_?norm|rms_?norm|group_?norm|batch_?norm|elementwise|reduce|"
                          r"copy|fill|gather|scatter|index|cat_|transpose|where", re.I)


@dataclass(frozen=True)
class Regime:
    """One GPU trace's pace (host or device) and what bounds its kernels."""

    device_us: float  # median over the steps: device time of the work a step launched
    wall_us: float  # median over the steps: the step's host wall time
    pace: Optional[str]  # "device" | "overhead" | None (in between)
    matrix_us: float  # device time in the steps, by class
    memory_us: float
    other_us: float
    matrix: Optional[Judged]  # the roofline row that judges the matrix work (None: none counted)
    bound: Optional[str]  # "compute" | "memory" | None (cannot tell)
    why_not: str = ""  # why no bound, where none
    profiler_steps: bool = True  # the steps are ProfilerSteps (else one window of all events)
    matrix_part: str = ""  # "": ``matrix`` is all the counted matrix work; else which part of it (op and shape)

    @property
    def device_share(self) -> float:
        return self.device_us / self.wall_us if self.wall_us > 0 else 0.0

    @property
    def total_us(self) -> float:
        return self.matrix_us + self.memory_us + self.other_us

    def pct(self, us: float) -> float:
        return 100.0 * us / self.total_us if self.total_us > 0 else 0.0


def memory_class(name: str, kind: int) -> bool:
    """Whether a device event is memory work: a memcpy or memset, or a kernel whose category or name says
    elementwise, reduction, softmax, norm, copy or fill (a few FLOPs per byte moved)."""
    if kind != KERNEL:
        return True
    category = trace_names.kernel_category(name)
    return category in MEMORY_CATEGORIES or (category == "other" and bool(_MEMORY_NAME.search(name)))


def regime_of(m: Model, roofline: Optional[Roofline]) -> Optional[Regime]:
    """The regime of a GPU trace with steps that launched device work; None otherwise."""
    dev = m.dev
    in_step = dev.step >= 0
    if not m.has_gpu or not m.steps or not in_step.any():
        return None
    per_step = np.bincount(dev.step[in_step], weights=dev.dur[in_step], minlength=len(m.steps))
    launched = per_step > 0
    if not launched.any():
        return None
    device_us = float(np.median(per_step[launched]))
    wall_us = float(np.median(np.array([s.dur for s in m.steps])[launched]))
    share = device_us / wall_us if wall_us > 0 else 0.0
    pace = "device" if share >= DEVICE_BOUND_FROM else "overhead" if share < OVERHEAD_BELOW else None
    classes = _class_times(m, in_step)
    matrix, part = _matrix_row(roofline)
    bound, why_not = _bound(*classes, matrix)
    return Regime(device_us, wall_us, pace, *classes, matrix, bound, why_not, m.window_source == "ProfilerStep", part)


def _class_times(m: Model, in_step: np.ndarray) -> tuple[float, float, float]:
    """Device time in the steps: matrix, memory, other (each (name, kind) pair classed once)."""
    dev = m.dev
    key = dev.name[in_step].astype(np.int64) * 256 + dev.kind[in_step].astype(np.int64)
    pairs, at = np.unique(key, return_inverse=True)
    pair_class = np.array([_class_of(m.names[p // 256], p % 256) for p in pairs.tolist()], dtype=np.int8)
    sums = np.bincount(pair_class[at], weights=dev.dur[in_step], minlength=3)
    return float(sums[0]), float(sums[1]), float(sums[2])


def _class_of(name: str, kind: int) -> int:
    """0 for a matrix kernel, 1 for memory work (:func:`memory_class`), 2 for the rest."""
    if kind == KERNEL and trace_names.kernel_category(name) in MATRIX_CATEGORIES:
        return 0
    return 1 if memory_class(name, kind) else 2


def _matrix_row(roofline: Optional[Roofline]) -> tuple[Optional[Judged], str]:
    """The roofline row that judges the kernels' matrix work, and "" where it is all of it (else which part):
    the op rows (the GEMMs or attention kernels themselves) together, where they share one dtype's peak
    (:func:`combined`: a run with record_shapes has a row per shape, and "the matrix work" is all of
    them); the one with most time where they do not; the attention forward's row only where it is the sole one
    (a fused kernel, whose row it is)."""
    if roofline is None or not roofline.rows:
        return None, ""
    ops = [j for j in roofline.rows if j.row.op != ATTENTION]
    if not ops:
        return roofline.rows[0], ""
    if any(j.impossible for j in ops) or len({(j.peak_unit, j.row.dtype) for j in ops}) > 1:
        return ops[0], f"{ops[0].row.op} {ops[0].row.shape}" if len(ops) > 1 else ""
    return combined(ops, roofline.peak), ""


def combined(rows: list, peak: Optional[Peak]) -> Judged:
    """Judged rows of one dtype as one row: every call's FLOPs and ideal bytes summed, over their summed time
    (what they achieved together: the step's GEMMs, not its largest one), held to the peaks as one row."""
    if len(rows) == 1:
        return rows[0]
    first = rows[0]
    nbytes = None if any(j.row.bytes is None for j in rows) else sum(j.row.bytes * j.row.calls for j in rows)
    row = Row("together: " + ", ".join(dict.fromkeys(j.row.op for j in rows)), "; ".join(j.row.shape for j in rows),
              first.row.dtype, 1, sum(j.row.flops * j.row.calls for j in rows), nbytes,
              sum(j.row.time_us for j in rows), None, any(j.row.tf32 for j in rows))
    if peak is None or first.peak_tflops is None:
        return Judged(row, None, first.peak_unit, None, None, None, None)
    return judge_row(row, peak)


def matrix_bound(matrix: Optional[Judged]) -> tuple[Optional[str], str]:
    """The roof that holds the matrix work: its row's bound where it reaches ``.roofline.NEAR_ROOF_PCT`` of
    its roof; else None, and why."""
    if matrix is None:
        return None, "no GEMM or attention op was counted"
    if matrix.roof_tflops is None:
        return None, "its bytes (or the device's bandwidth) are unknown, so its intensity cannot be set " \
                     "against the ridge point"
    if matrix.bound is None:
        return None, neither_roof_text(matrix)
    return matrix.bound, ""


def neither_roof_text(j: Judged, peak_said: bool = False) -> str:
    """Why a row is bound by neither roof, in the same words wherever it is said (the roofline finding and
    device_bound): its share of each (``peak_said``: its share of the compute peak is said just before)."""
    compute = "" if peak_said else f"it reaches {j.pct_of_peak:.1f}% of the {j.peak_unit} compute peak and "
    return (f"{compute}moves its operation's bytes at {j.pct_of_bandwidth:.1f}% of the bandwidth "
            f"({j.row.intensity:,.0f} FLOP/byte, ridge {j.ridge:,.0f}): neither roof is near; the kernels' own "
            "limits (occupancy, scheduling, launch size) hold them, or they move more than the operation needs")


def _bound(matrix_us: float, memory_us: float, other_us: float, matrix: Optional[Judged]) -> tuple:
    total = matrix_us + memory_us + other_us
    if total <= 0:
        return None, "no device time in the steps"
    if memory_us > MOST * total:
        return "memory", ""
    bound, why = matrix_bound(matrix)
    if matrix_us > MOST * total:
        return bound, why
    if bound == "memory" and matrix_us + memory_us > MOST * total:
        return "memory", ""
    return None, "no class of work holds most of the device time"
