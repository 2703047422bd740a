"""HolisticTraceAnalysis's communication/computation overlap, on its definitions (``get_comm_comp_overlap``).

Kernels are typed by name as HTA does (communication ``nccl...Kernel``; memory ``Memcpy``/``Memset``/
``dma``; neither computation nor communication when the name holds ``Memcpy`` or ``Sync``); only
kernels launched (by a correlated runtime call) before the last profiled step starts count, because
HTA leaves the last step out; with one step or none, every device event counts. The one-trace report
gives the overlap as ``gpu.comm_comp_overlap_pct`` (:mod:`.tables`), the job report per rank
(:mod:`~common.report.job.ranks`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from common.report.model.intervals import Intervals
from common.report.model.build import Model


def hta_kernel_type(name: str) -> str:
    """HolisticTraceAnalysis's kernel types, by name: communication, memory, computation, other."""
    if name.startswith("nccl") and "Kernel" in name[4:]:
        return "communication"
    if name.startswith(("Memcpy", "Memset", "dma")):
        return "memory"
    if "Memcpy" in name or "Sync" in name:
        return "other"
    return "computation"


def kernel_types(m: Model) -> np.ndarray:
    """HTA's type of every device event, as a code (0 communication, 1 memory, 2 computation, 3 other)."""
    codes = {"communication": 0, "memory": 1, "computation": 2, "other": 3}
    by_name = np.full(len(m.names), 3, dtype=np.int8)
    for nid in np.unique(m.dev.name).tolist():
        by_name[nid] = codes[hta_kernel_type(m.names[nid])]
    return by_name[m.dev.name]


def hta_selection(m: Model, include_last_step: bool = False) -> np.ndarray:
    """The device events HTA keeps (``Trace._filter_irrelevant_gpu_kernels``): launched by a correlated
    runtime call in the trace before the last step starts (HTA's default), or before it ends
    (``include_last_profiler_step=True``); so work launched before the trace (the warm-up step's
    kernels still running) is left out. Every device event when the trace has one step or none."""
    dev = m.dev
    if m.window_source != "ProfilerStep" or len(m.steps) < 2:
        return np.ones(dev.n, dtype=bool)
    launch = dev.launch
    when = m.cpu.ts[np.maximum(launch, 0)]
    last = m.steps[-1]
    return (launch >= 0) & ((when <= last.end) if include_last_step else (when < last.start))


def exact_busy(m: Model, among: np.ndarray | None = None) -> float:
    """The busy time of the events :func:`hta_busy_span` keeps (and ``among`` where given), without HTA's
    rounding (µs)."""
    keep = hta_selection(m, include_last_step=True)
    if among is not None:
        keep = keep & among
    return Intervals(m.dev.ts[keep], m.dev.end[keep]).total if keep.any() else 0.0


def exact_span(m: Model) -> float:
    """The span of the events :func:`hta_busy_span` keeps, without HTA's rounding: first start to last end (µs)."""
    keep = hta_selection(m, include_last_step=True)
    return float(m.dev.end[keep].max() - m.dev.ts[keep].min()) if keep.any() else 0.0


def hta_busy_span(m: Model, among: np.ndarray | None = None) -> tuple[float, float]:
    """HTA's ``get_temporal_breakdown`` with ``include_last_profiler_step=True`` (the figures
    ``/work/shared/traces/ORACLE.md`` and ``tests/test_report.py`` check): the busy time of the device
    events it keeps (:func:`hta_selection`, and ``among`` where given) and the span of all it keeps,
    first start to last end (µs). As HTA's parser does (``round_down_time_stamps``), each event is
    first rounded inward to whole microseconds of the trace's clock (start up, end down; a sub-µs
    event can end before it starts), then merged as HTA's ``merge_kernel_intervals`` merges: on a
    trace with nanosecond times HTA's idle is a little above the exact one, and so is this."""
    keep = hta_selection(m, include_last_step=True)
    if not keep.any():
        return 0.0, 0.0
    start = np.ceil(m.t0 + m.dev.ts) - m.t0
    end = np.floor(m.t0 + m.dev.end) - m.t0
    span = float(end[keep].max() - start[keep].min())
    if among is not None:
        keep = keep & among
    return _hta_merged_length(start[keep], end[keep]), span


def _hta_merged_length(start: np.ndarray, end: np.ndarray) -> float:
    """HTA's ``merge_kernel_intervals``, then the sum of end - start: an interval joins the group before
    it when it starts no later than the latest end so far; each group runs from its least start to its
    greatest end (an inverted interval alone counts negative, as in HTA)."""
    if not start.size:
        return 0.0
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    new_group = np.concatenate(([True], start[1:] > np.maximum.accumulate(end)[:-1]))
    first = np.minimum.reduceat(start, np.flatnonzero(new_group))
    last = np.maximum.reduceat(end, np.flatnonzero(new_group))
    return float((last - first).sum())


def intersection(a: Intervals, b: Intervals) -> Intervals:
    """The times covered by both unions."""
    if not len(a) or not len(b):
        return Intervals.empty()
    points = np.concatenate((a.starts, a.ends, b.starts, b.ends))
    in_a = np.concatenate((np.ones(len(a)), -np.ones(len(a)), np.zeros(2 * len(b))))
    in_b = np.concatenate((np.zeros(2 * len(a)), np.ones(len(b)), -np.ones(len(b))))
    order = np.argsort(points, kind="stable")
    points, depth_a, depth_b = points[order], np.cumsum(in_a[order]), np.cumsum(in_b[order])
    both = (depth_a[:-1] > 0) & (depth_b[:-1] > 0) & (points[1:] > points[:-1])
    return Intervals(points[:-1][both], points[1:][both])


def overlap_pct(compute: Intervals, comm: Intervals) -> Optional[float]:
    """The share of communication time that runs while compute runs; None without communication."""
    if comm.total <= 0:
        return None
    return 100.0 * intersection(compute, comm).total / comm.total


def hta_overlap_pct(m: Model) -> Optional[float]:
    """HolisticTraceAnalysis's ``get_comm_comp_overlap`` for this trace (None without NCCL kernels)."""
    if not m.dev.n:
        return None
    types, keep = kernel_types(m), hta_selection(m)
    ts, end = m.dev.ts, m.dev.end
    comm, comp = keep & (types == 0), keep & (types == 2)
    return overlap_pct(Intervals(ts[comp], end[comp]), Intervals(ts[comm], end[comm]))
