"""What the CPU was doing while the GPU sat idle between two pieces of device work.

The device event after the gap was launched by a runtime call (its correlation id). When that launch
began after the gap opened, the GPU waited for the CPU: the op the launch sits in, and the CPU events
that ran on the launching thread during the gap (the deepest ones, longest first), say what held it.
When the launch came before the gap opened, the work was queued and the GPU idled on its own side (a
profiler buffer request, a dependency on another stream): the trace names what overlaps, if anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.model.build import KERNEL, MEMCPY, MEMSET, Model
from common.amounts import fmt_bytes_decimal

SHOWN = 3  # CPU events named, longest overlap first


@dataclass(frozen=True)
class GapCause:
    """The launch of the device event after a gap, and the CPU events during the gap on its thread."""

    next_event: str  # the device event the gap ends with
    launch: Optional[str]  # its runtime call (None: no launch in the trace)
    launch_start_us: Optional[float]
    launch_us: Optional[float]  # how long the launch call itself took
    op: Optional[str]  # the op (else annotation) the launch sits in
    op_start_us: Optional[float]
    op_us: Optional[float]
    late_us: float  # how far into the gap the launch began (0: launched before the gap opened)
    busy: tuple[tuple[str, float], ...]  # (name, µs inside the gap) of the deepest CPU events on the thread
    launch_in_gap_us: float = 0.0  # how long the launch call, begun before the gap opened, ran on inside it
    next_work: str = "a kernel"  # what the device event after the gap is: "a kernel", "a memset (4 B)", "a memcpy (...)"
    prev_work: Optional[str] = None  # the same for the device event the gap opens after (None: none ends there)

    @property
    def neighbours(self) -> str:
        """``two kernels``, or the work on either side of the gap as what it is: ``a memset (4 B) and a kernel``."""
        if self.prev_work is None:
            return f"device work and {self.next_work}"
        return "two kernels" if self.prev_work == self.next_work == "a kernel" else f"{self.prev_work} and {self.next_work}"

    @property
    def slow_launch(self) -> bool:
        """The launch began before the gap opened and was still running when it did: the work could not start
        before its launch call handed it over, so the slow call, not the device side, set the gap."""
        return self.launch is not None and self.late_us == 0 and self.launch_in_gap_us > 0

    @property
    def cpu_late(self) -> bool:
        """The GPU waited for the CPU: the launch began inside the gap."""
        return self.launch is not None and self.late_us > 0


class GapIndex:
    """The device events by start and a thread's CPU events by start, sorted once per model (on first
    use), so each gap's look-ups are binary searches, not scans of the trace (a long trace has a gap per step)."""

    def __init__(self, m: Model) -> None:
        self.m, self.dev_order, self.dev_ts, self.threads = m, None, None, {}
        self.end_order, self.dev_end = None, None

    def first_starting_at(self, end: float) -> Optional[int]:
        """The first device event (in trace order) whose start is ``np.isclose`` to ``end`` (atol 1 ns)."""
        ts = self.m.dev.ts
        if self.dev_order is None:
            self.dev_order = np.argsort(ts, kind="stable")
            self.dev_ts = ts[self.dev_order]
        tol = 2 * (1e-3 + 1e-5 * abs(end))  # twice isclose's tolerance: the exact test below decides
        lo, hi = np.searchsorted(self.dev_ts, [end - tol, end + tol], side="left")
        near = self.dev_order[lo:hi + 1]
        near = near[np.isclose(ts[near], end, atol=1e-3)]
        return int(near.min()) if near.size else None

    def last_ending_at(self, start: float) -> Optional[int]:
        """A device event whose end is ``np.isclose`` to ``start`` (atol 1 ns): the work a gap opens after."""
        end = self.m.dev.end
        if self.end_order is None:
            self.end_order = np.argsort(end, kind="stable")
            self.dev_end = end[self.end_order]
        tol = 2 * (1e-3 + 1e-5 * abs(start))
        lo, hi = np.searchsorted(self.dev_end, [start - tol, start + tol], side="left")
        near = self.end_order[lo:hi + 1]
        near = near[np.isclose(end[near], start, atol=1e-3)]
        return int(near.max()) if near.size else None

    def overlapping(self, thread: int, start: float, end: float) -> np.ndarray:
        """The CPU events on ``thread`` with ts < end and end > start, in trace order."""
        cpu = self.m.cpu
        if thread not in self.threads:
            rows = np.flatnonzero(cpu.thread == thread)
            order = rows[np.argsort(cpu.ts[rows], kind="stable")]
            ends = cpu.end[order]
            self.threads[thread] = order, cpu.ts[order], np.maximum.accumulate(np.where(np.isnan(ends), -np.inf, ends))
        order, ts, max_end = self.threads[thread]
        began = int(np.searchsorted(ts, end, side="left"))  # ts < end
        first = int(np.searchsorted(max_end[:began], start, side="right"))  # before it, every event ended by start
        rows = order[first:began]
        return np.sort(rows[cpu.end[rows] > start])


def gap_cause(m: Model, start: float, end: float, index: Optional[GapIndex] = None) -> Optional[GapCause]:
    """The cause of the gap [start, end] on the device lane (None: no device event starts at its end)."""
    dev, cpu = m.dev, m.cpu
    index = index or GapIndex(m)
    k = index.first_starting_at(end)
    if k is None:
        return None
    name = m.names[int(dev.name[k])]
    prev = index.last_ending_at(start)
    work = dict(next_work=work_of(m, k), prev_work=work_of(m, prev) if prev is not None else None)
    launch, op = int(dev.launch[k]), int(dev.op[k])
    if launch < 0:
        return GapCause(name, None, None, None, None, None, None, 0.0, (), **work)
    l0, ldur = float(cpu.ts[launch]), float(cpu.dur[launch])
    o = (m.names[int(cpu.name[op])], float(cpu.ts[op]), float(cpu.dur[op])) if op >= 0 else (None, None, None)
    in_gap = max(min(l0 + ldur, end) - start, 0.0) if l0 <= start else 0.0
    return GapCause(name, m.names[int(cpu.name[launch])], l0, ldur, *o, max(l0 - start, 0.0),
                    _busy(m, index.overlapping(int(cpu.thread[launch]), start, end), start, end), in_gap, **work)


def work_of(m: Model, k: int) -> str:
    """Device event ``k`` as what it is: ``a kernel``, ``a memset (4 B)``, ``a memcpy (Memcpy DtoD, 16.8 MB)``."""
    kind, nbytes = int(m.dev.kind[k]), float(m.dev.bytes[k])
    size = fmt_bytes_decimal(nbytes) if np.isfinite(nbytes) and nbytes > 0 else ""
    if kind == MEMSET:
        return f"a memset ({size})" if size else "a memset"
    if kind == MEMCPY:
        return f"a memcpy ({m.names[int(m.dev.name[k])].split(' (')[0]}{', ' + size if size else ''})"
    return "a kernel" if kind == KERNEL else "device work"


def _busy(m: Model, sel: np.ndarray, start: float, end: float) -> tuple:
    """The deepest of the CPU events ``sel`` (those on the launch's thread that overlap [start, end]), by their
    overlap, longest first (an event with a child overlapping the gap is left for the child, unless its own
    part is longer)."""
    cpu = m.cpu
    if not sel.size:
        return ()
    overlap = np.minimum(cpu.end[sel], end) - np.maximum(cpu.ts[sel], start)
    up = np.minimum(np.searchsorted(sel, cpu.parent[sel]), sel.size - 1)  # each event's parent's place in sel
    has_up = sel[up] == cpu.parent[sel]
    child_overlap = np.bincount(up[has_up], weights=overlap[has_up], minlength=sel.size)  # summed in sel's order
    own = overlap - child_overlap
    kept = own > 0.0
    ids, first, which = np.unique(cpu.name[sel][kept], return_index=True, return_inverse=True)
    us = np.bincount(which.reshape(-1), weights=own[kept], minlength=ids.size)
    named = [(m.names[int(ids[k])], float(us[k])) for k in np.argsort(first, kind="stable").tolist()]  # by first seen
    return tuple(sorted(named, key=lambda x: -x[1])[:SHOWN])
