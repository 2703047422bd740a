"""The typed rows of the report's tables: one frozen dataclass per table, a field per JSON key.

:mod:`.tables` fills them once; rules and renderers read their attributes (``k.total_us``), never a
string key. A row's JSON (``--json``) is ``dataclasses.asdict`` of it, in field order (a kernel row
adds its detail's keys only where it has one: the top 200 kernels).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional

from common.report.findings import Span  # noqa: F401 (a row field's type; defined beside Finding)


@dataclass(frozen=True)
class StepBreakdown:
    """TensorBoard's step breakdown: each instant counted once, in the first category active then."""

    kernel: float
    memcpy: float
    memset: float
    runtime: float
    dataloader: float
    cpu_exec: float
    other: float


@dataclass(frozen=True)
class Breakdown(StepBreakdown):
    """The breakdown summed over the kept steps; ``total`` is their device-aligned time."""

    total: float


@dataclass(frozen=True)
class StepRow:
    """One host step: wall time, ops, kernels and device time it launched, GPU busy inside it, its first
    annotation's gap, and TensorBoard's window and breakdown of it (None for a step TensorBoard drops)."""

    name: str
    number: Optional[int]
    start_us: float
    wall_us: float
    ops: int
    kernels: int
    device_us: float
    gpu_busy_us: Optional[float]
    gpu_busy_pct: Optional[float]
    annotation: Optional[str]
    annotation_gap_us: Optional[float]
    first_op: Optional[str]
    device_aligned_start_us: Optional[float]
    device_aligned_wall_us: Optional[float]
    breakdown: Optional[StepBreakdown]


@dataclass(frozen=True)
class CategoryRow:
    """GPU time of one kernel category (every device event)."""

    category: str
    label: str
    time_us: float
    count: int
    pct: float


@dataclass(frozen=True)
class KernelDetail:
    """Registers, shared memory, time and calls per step, and the decoded name of one kernel's calls."""

    registers_per_thread: Optional[float]
    shared_memory_bytes: Optional[float]
    per_step_us: tuple  # float per step
    per_step_calls: tuple  # int per step
    decoded: Optional[dict]  # the GEMM or fused-kernel name decoded (names.decode_gemm / decode_fused), with kind and text


@dataclass(frozen=True)
class KernelRow:
    """One kernel name, TensorBoard's Kernel view: calls, times, share and launch estimates."""

    name: str
    category: str
    calls: int
    total_us: float
    mean_us: float
    min_us: float
    median_us: float
    max_us: float
    share_pct: float
    est_sm_efficiency_pct: Optional[float]
    mean_blocks_per_sm: Optional[float]
    est_achieved_occupancy_pct: Optional[float]
    tensor_cores: bool
    detail: Optional[KernelDetail] = None  # the top KERNEL_DETAIL_ROWS kernels only
    footprint_occupancy_pct: Optional[float] = None  # theoretical occupancy from its footprint (:mod:`.occupancy`)
    footprint_limit: Optional[str] = None  # the resource that limits it: registers | shared memory | threads
    kineto_shared_limit: bool = False  # Kineto's estimate reads 0 here: its block is over sharedMemPerBlock

    def to_json(self) -> dict:
        out = asdict(self)
        detail = out.pop("detail")
        return {**out, **detail} if detail is not None else out


@dataclass(frozen=True)
class OpRow:
    """One op (or annotation) name: the profiler table's and TensorBoard's Operator view's numbers."""

    name: str
    kind: str  # "op" | "annotation"
    calls: int
    cpu_total_us: float
    self_cpu_us: float
    self_device_us: float
    device_total_us: float
    kernels: int  # the kernels it launched itself (not its memcpys and memsets)
    calls_with_device_work: int
    memcpys: int = 0  # the memcpys it launched itself
    memsets: int = 0  # the memsets it launched itself
