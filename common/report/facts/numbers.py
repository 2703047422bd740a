"""The report's headline numbers (``m.numbers.gpu.busy_us``), one section per JSON object.

:mod:`.tables` fills them (frozen: set where they are made); :func:`common.report.render.json.to_json` writes each section with
``dataclasses.asdict``, so a field's name is its JSON key and the field order is the key order.
Times are microseconds; a figure a trace cannot give (no GPU, no kernel) is None (JSON null).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

GPU_TIME_FIELDS = ("busy_us", "span_us", "idle_us", "idle_pct", "busy_pct", "compute_us", "communication_us",
                   "busy_in_window_us", "busy_pct_of_window")  # None on a CPU-only trace


@dataclass(frozen=True)
class GpuNumbers:
    """GPU busy/idle on HolisticTraceAnalysis's definition (over the GPU span), busy in the window, counts."""

    busy_us: Optional[float]
    span_us: Optional[float]
    idle_us: Optional[float]
    idle_pct: Optional[float]
    busy_pct: Optional[float]
    compute_us: Optional[float]
    communication_us: Optional[float]
    busy_in_window_us: Optional[float]
    busy_pct_of_window: Optional[float]
    kernels: int
    memcpys: int
    memsets: int
    launches_correlated: int
    streams: int
    comm_comp_overlap_pct: Optional[float] = None  # HolisticTraceAnalysis's (:mod:`.overlap`); None without NCCL kernels
    busy_exact_us: Optional[float] = None  # busy_us's events without HTA's rounding to whole µs
    span_exact_us: Optional[float] = None  # span_us's events without HTA's rounding to whole µs
    # HTA's rounding gave an impossible figure (a lone sub-µs event counts negative: busy below 0 or above the
    # span): busy, span, idle and compute are then the unrounded figures, not HTA's
    hta_impossible: bool = False


@dataclass(frozen=True)
class CpuNumbers:
    """The profiler table's Self CPU time total (the window's CPU events), and counts."""

    self_cpu_total_us: float
    events: int
    ops: int
    runtime_calls: int
    threads: int


@dataclass(frozen=True)
class DeviceNumbers:
    """The profiler table's Self CUDA time total; every field None on a CPU-only trace."""

    self_device_total_us: Optional[float] = None
    self_device_in_steps_us: Optional[float] = None
    kernel_total_us: Optional[float] = None
    device_to_cpu_ratio: Optional[float] = None


@dataclass(frozen=True)
class WindowNumbers:
    start_us: float
    end_us: float
    wall_us: float
    source: str  # "ProfilerStep" | "all events"


@dataclass(frozen=True)
class TensorBoardNumbers:
    """The steps TensorBoard reads and its figures per device."""

    steps: str  # "device-aligned" | "host"
    start_us: float
    end_us: float
    wall_us: float
    steps_kept: int
    steps_dropped: list  # names of the steps left out
    devices: list  # asdict(tensorboard.DeviceFigures) per device


@dataclass(frozen=True)
class EfficiencyNumbers:
    """TensorBoard's GPU utilization, Est. SM efficiency and occupancy, and kernel-time-weighted figures."""

    gpu_utilization_pct: Optional[float] = None
    est_sm_efficiency_pct: Optional[float] = None
    est_achieved_occupancy_pct: Optional[float] = None
    kernel_weighted_sm_efficiency_pct: Optional[float] = None
    mean_blocks_per_sm: Optional[float] = None
    tensor_core_pct: Optional[float] = None
    kernels_with_launch_args: int = 0


@dataclass(frozen=True)
class Numbers:
    gpu: GpuNumbers
    cpu: CpuNumbers
    device: DeviceNumbers
    window: WindowNumbers
    tensorboard: TensorBoardNumbers
    efficiency: EfficiencyNumbers
