"""HolisticTraceAnalysis's communication/computation overlap, on its definitions (``get_comm_comp_overlap``).

Kernels are typed by name as HTA does (communication ``nccl...Kernel``; memory ``Memcpy``/``Memset``/
``dma``; neither computation nor communication when the name holds ``Memcpy`` or ``Sync``); only
kernels launched (by a correlated runtime call) before the last profiled step starts count, because
HTA leaves the last step out; with one step or none, every device event counts. The one-trace report
gives the overlap as ``gpu.comm_comp_overlap_pct`` (:mod:`.tables`), the job report per rank
(:mod:`.ranks`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from common.report.intervals import Intervals
from common.report.model import Model


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


def hta_selection(m: Model) -> np.ndarray:
    """The device events HTA keeps: launched by a correlated runtime call before the last step starts
    (every device event when the trace has one step or none)."""
    dev = m.dev
    if m.window_source != "ProfilerStep" or len(m.steps) < 2:
        return np.ones(dev.n, dtype=bool)
    launch = dev.launch
    when = m.cpu.ts[np.maximum(launch, 0)]
    return (launch >= 0) & (when < m.steps[-1].start)


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
