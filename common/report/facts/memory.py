"""Memory, from the trace's own ``[memory]`` events (``profile_memory=True``, ``--profile-memory``).

Each event is one allocation (Bytes > 0) or one free (Bytes < 0) on one device, at one time, on the
thread that made it. :func:`memory_of` turns them into a :class:`Memory`: per device, per annotation,
and the per-operator table of :mod:`.memory_ops` (TensorBoard's definitions). None when the trace holds
no memory events (the run did not record them). The figures, per device (``CPU``, ``GPU<id>``):

- **allocated**: the allocator's ``Total Allocated`` after each event, where the trace records it
  (PyTorch 1.10 and later; on the CPU only what was allocated while the profiler recorded). Older traces
  carry only ``Bytes``: then allocated is their running sum from 0 at the first event (``totals`` is
  ``"reconstructed"``): the change since the profiler started, not the level, which the trace cannot show.
- **peak allocated**: the largest allocated over the whole trace (the plugin's "Peak Memory Usage"), and
  when; **peak reserved**: the largest ``Total Reserved`` (the caching allocator's blocks), where recorded.
- **allocations** and **frees in the window** (the ProfilerStep span): how many, and their bytes.
- **allocated at the window's end**: after the last event up to it. **Live at the window's end**: the
  window's own allocations whose address was not freed by then (None where the trace has no ``Addr``).
- **the curve**: (time, allocated) after each event, at most :data:`CURVE_POINTS` points (a long trace
  keeps the lowest and the highest point of each stretch, so the peaks stay).

Per annotation name (``attn_fwd``, ``prefill``, ``decode``) and device, over its calls in the window: the
events on the call's thread inside its span: allocations per call (count, bytes), the net bytes (allocated
less freed) per call, the largest allocation sizes and how many of each a call makes, the bytes each op
directly under the annotation allocates per call (``aten::masked_fill``: its copy), and per call, in order,
its allocated bytes and the allocated level at its end (how a KV cache grows, token after token).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.facts.memory_blocks import ALLOCATION_HELPERS, size_uses
from common.report.model.memory_devices import device_codes
from common.report.facts.memory_ops import OpMemoryRow, op_memory_table, present
from common.report.model.build import ANNOTATION, OP, STEP_RE, Model, innermost_ancestor

CURVE_POINTS = 2000
TOP_OPS = 6  # ops under an annotation, by bytes
LARGEST_SIZES = 5


@dataclass(frozen=True)
class DeviceMemory:
    device: str  # "CPU", "GPU0"...
    totals: str  # "recorded" (Total Allocated) | "reconstructed" (the running sum of Bytes)
    events: int
    peak_allocated_bytes: int
    peak_at_us: float  # when (relative to the window's start)
    peak_reserved_bytes: Optional[int]  # None where not recorded
    allocations_in_window: int
    allocated_bytes_in_window: int
    frees_in_window: int
    freed_bytes_in_window: int
    allocated_at_window_end_bytes: Optional[int]  # None: no event by then
    live_at_window_end: Optional[int]  # the window's allocations not freed by its end (None: no addresses)
    live_at_window_end_bytes: Optional[int]
    curve: tuple  # ((µs from the window's start, allocated bytes), ...), at most CURVE_POINTS


@dataclass(frozen=True)
class OpAllocation:
    """What one op directly under an annotation allocated, per call of the annotation."""

    name: str
    allocations_per_call: float
    bytes_per_call: float
    largest_bytes: int


@dataclass(frozen=True)
class AnnotationMemory:
    name: str
    device: str
    calls: int
    allocations_per_call: float
    allocated_bytes_per_call: float
    net_bytes_per_call: float  # allocated less freed inside a call
    largest_allocation_bytes: int
    largest_sizes: tuple  # ((bytes, allocations of that size per call), ...): the LARGEST_SIZES largest sizes
    ops: tuple  # OpAllocation, by bytes per call
    allocated_bytes_of_calls: tuple  # per call, in time order
    allocated_at_call_end_bytes: tuple  # per call: the device's allocated level at its end
    step_of_calls: tuple  # per call: the index of its step (-1: none)
    sizes: tuple = ()  # memory_blocks.SizeUse of each of largest_sizes: its ops, how many live at once


@dataclass(frozen=True)
class Memory:
    devices: tuple  # DeviceMemory, GPUs first
    annotations: tuple  # AnnotationMemory, in order of first call
    ops: tuple  # memory_ops.OpMemoryRow, per device by self allocation size

    def device(self, name: str) -> Optional[DeviceMemory]:
        return next((d for d in self.devices if d.device == name), None)

    def annotation(self, name: str, device: Optional[str] = None) -> Optional[AnnotationMemory]:
        """The annotation's row on ``device``, else on the device where its calls allocate the most."""
        rows = [a for a in self.annotations if a.name == name and (device is None or a.device == device)]
        return max(rows, key=lambda a: a.allocated_bytes_per_call, default=None)


def memory_of(m: Model) -> Optional[Memory]:
    """The memory figures of the model; None without [memory] events on a CPU or GPU. Each figure is a few numpy
    passes over the events (and over the annotation calls): its cost grows with the trace, not events x calls."""
    mem = m.mem
    if not mem.n:
        return None
    codes, names = device_codes(mem.device_type, mem.device_id)
    if not names:
        return None
    devices, levels = [], {}
    for code in sorted(range(len(names)), key=lambda c: (names[c] == "CPU", names[c])):
        rows = np.flatnonzero(codes == code)
        level, totals = _allocated(mem.total_allocated[rows], mem.bytes[rows])
        levels[names[code]] = (rows, level)
        devices.append(_device_memory(m, names[code], rows, level, totals))
    annotations = _annotations(m, levels)
    ops: tuple[OpMemoryRow, ...] = op_memory_table(m, (codes, names))
    return Memory(tuple(devices), annotations, ops)


def _allocated(total: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray, str]:
    if total.size and np.isfinite(total).all():
        return total, "recorded"
    return np.cumsum(np.nan_to_num(nbytes)), "reconstructed"


def _device_memory(m: Model, device: str, rows: np.ndarray, level: np.ndarray, totals: str) -> DeviceMemory:
    mem = m.mem
    ts, nbytes = mem.ts[rows], np.nan_to_num(mem.bytes[rows])
    w0, w1 = m.window
    inside = (ts >= w0) & (ts <= w1)
    alloc, free = inside & (nbytes > 0), inside & (nbytes < 0)
    peak = int(np.argmax(level))
    reserved = mem.total_reserved[rows]
    by_end = np.flatnonzero(ts <= w1)
    live = _live_at_end(mem.addr[rows], nbytes, inside, ts <= w1)
    return DeviceMemory(
        device=device, totals=totals, events=int(rows.size), peak_allocated_bytes=int(level[peak]),
        peak_at_us=float(ts[peak]),
        peak_reserved_bytes=int(np.nanmax(reserved)) if np.isfinite(reserved).any() else None,
        allocations_in_window=int(alloc.sum()), allocated_bytes_in_window=int(nbytes[alloc].sum()),
        frees_in_window=int(free.sum()), freed_bytes_in_window=int(-nbytes[free].sum()),
        allocated_at_window_end_bytes=int(level[by_end[-1]]) if by_end.size else None,
        live_at_window_end=None if live is None else live[0], live_at_window_end_bytes=None if live is None else live[1],
        curve=_curve(ts, level))


def _live_at_end(addr: np.ndarray, nbytes: np.ndarray, inside: np.ndarray, by_end: np.ndarray):
    """(count, bytes) of the window's allocations whose address no free released by the window's end: per
    address, its last allocation or free by then decides."""
    if not np.isfinite(addr[inside]).all():
        return None
    events = np.flatnonzero(by_end & (nbytes != 0) & np.isfinite(addr))[::-1]  # latest first
    _, latest = np.unique(addr[events], return_index=True)
    last = events[latest]
    live = last[(nbytes[last] > 0) & inside[last]]
    return int(live.size), int(nbytes[live].sum())


def _curve(ts: np.ndarray, level: np.ndarray) -> tuple:
    """(time, level) after each event; a long one as the lowest and highest point of each stretch."""
    if ts.size > CURVE_POINTS:
        stretches = np.array_split(np.arange(ts.size), CURVE_POINTS // 2)
        keep = sorted({int(s[np.argmin(level[s])]) for s in stretches} | {int(s[np.argmax(level[s])]) for s in stretches})
        ts, level = ts[keep], level[keep]
    return tuple(zip(np.round(ts, 3).tolist(), level.astype(np.int64).tolist()))


def _annotations(m: Model, levels: dict) -> tuple:
    """Per annotation name and device: the memory events inside its calls (see the module's docstring)."""
    cpu = m.cpu
    w0, w1 = m.window
    phase = m.name_mask(lambda s: not STEP_RE.match(s))[cpu.name]
    calls = np.flatnonzero((cpu.kind == ANNOTATION) & phase & (cpu.ts >= w0) & (cpu.ts <= w1))
    if not calls.size:
        return ()
    _, first = np.unique(cpu.name[calls], return_index=True)
    name_order = np.argsort(np.argsort(first))  # each distinct name by its first call
    group = name_order[np.unique(cpu.name[calls], return_inverse=True)[1].reshape(-1)]
    order = np.lexsort((cpu.ts[calls], group))  # by name, then start (ties: trace order)
    calls, group = calls[order], group[order]
    bounds = np.searchsorted(group, np.arange(group.max() + 2))
    event_ops = _event_ops(m)
    spans = {device: _call_spans(m, calls, rows, level) for device, (rows, level) in levels.items()}
    out = []
    for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        for device, span in spans.items():
            row = _annotation_memory(m, device, span, event_ops, start, stop)
            if row is not None:
                out.append(row)
    return tuple(out)


@dataclass(frozen=True)
class _CallSpans:
    """One device's memory events inside each annotation call: call i's are ``events[lo[i]:hi[i]]``."""

    calls: np.ndarray  # CPU-lane indices of the calls
    events: np.ndarray  # the device's events (memory-lane indices), by thread, then time
    nbytes: np.ndarray  # int64, per entry of ``events``
    lo: np.ndarray
    hi: np.ndarray
    allocations: np.ndarray  # per call: how many allocations
    allocated: np.ndarray  # per call: their bytes
    net: np.ndarray  # per call: allocated less freed
    at_end: np.ndarray  # per call: the device's allocated level after its last event before the call's end


def _call_spans(m: Model, calls: np.ndarray, rows: np.ndarray, level: np.ndarray) -> _CallSpans:
    """Each call's events on its own thread with start <= ts < end, found by binary search per thread."""
    cpu, mem = m.cpu, m.mem
    by_thread = np.argsort(mem.thread[rows], kind="stable")  # rows are by time: by thread, then time
    events, thread, ts = rows[by_thread], mem.thread[rows][by_thread], mem.ts[rows][by_thread]
    lo, hi = np.zeros(calls.size, dtype=np.int64), np.zeros(calls.size, dtype=np.int64)
    for t in present(cpu.thread[calls]).tolist():
        first, last = np.searchsorted(thread, t, "left"), np.searchsorted(thread, t, "right")
        mine = cpu.thread[calls] == t
        lo[mine] = first + np.searchsorted(ts[first:last], cpu.ts[calls[mine]], "left")
        hi[mine] = first + np.searchsorted(ts[first:last], cpu.end[calls[mine]], "left")
    hi = np.maximum(hi, lo)
    nbytes = np.nan_to_num(mem.bytes[events]).astype(np.int64)
    before_end = np.searchsorted(mem.ts[rows], cpu.end[calls], "left") - 1  # rows by time, every thread
    at_end = np.where(before_end >= 0, level[np.maximum(before_end, 0)], 0).astype(np.int64)

    def per_call(values):  # prefix sums wrap around on overflow, and their differences stay exact
        prefix = np.concatenate(([0], np.cumsum(values, dtype=np.int64)))
        return prefix[hi] - prefix[lo]

    return _CallSpans(calls, events, nbytes, lo, hi, per_call((nbytes > 0).astype(np.int64)),
                      per_call(np.maximum(nbytes, 0)), per_call(nbytes), at_end)


def _annotation_memory(m: Model, device: str, span: _CallSpans, event_ops: tuple, start: int,
                       stop: int) -> Optional[AnnotationMemory]:
    """The row of the calls ``start:stop`` (one name, by start) on ``device``; None if they allocate nothing."""
    calls, n = span.calls[start:stop], stop - start
    allocations = span.allocations[start:stop]
    if not allocations.sum():
        return None
    lo, hi = span.lo[start:stop], span.hi[start:stop]
    lengths = hi - lo
    # every (call, event) pair, calls by start, each call's events by time
    every = np.arange(lengths.sum()) + np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
    at = every[span.nbytes[every] > 0]
    top_op, inner_op = event_ops
    sizes, ops = span.nbytes[at], top_op[span.events[at]]
    sizes_seen, counts = np.unique(sizes, return_counts=True)
    largest_sizes = tuple((int(b), float(c) / n) for b, c in zip(sizes_seen[::-1][:LARGEST_SIZES].tolist(),
                                                                 counts[::-1][:LARGEST_SIZES].tolist()))
    return AnnotationMemory(
        name=m.names[m.cpu.name[calls[0]]], device=device, calls=n, allocations_per_call=float(allocations.mean()),
        allocated_bytes_per_call=float(np.mean(span.allocated[start:stop])),
        net_bytes_per_call=float(np.mean(span.net[start:stop])), largest_allocation_bytes=largest_sizes[0][0],
        largest_sizes=largest_sizes, ops=_op_allocations(m, ops, sizes, n),
        allocated_bytes_of_calls=tuple(span.allocated[start:stop].tolist()),
        allocated_at_call_end_bytes=tuple(span.at_end[start:stop].tolist()),
        step_of_calls=tuple(m.cpu.step[calls].tolist()),
        sizes=size_uses(tuple(b for b, _ in largest_sizes), span.nbytes[every], np.repeat(np.arange(n), lengths), n,
                        top_op[span.events[every]], inner_op[span.events[every]], m.names))


def _op_allocations(m: Model, ops: np.ndarray, sizes: np.ndarray, n: int) -> tuple:
    """The TOP_OPS ops by bytes allocated (ties: the first to allocate), from each allocation's op (-1: none)."""
    found, first, which = np.unique(ops, return_index=True, return_inverse=True)
    which = which.reshape(-1)
    count = np.bincount(which, minlength=found.size)
    total = np.zeros(found.size, dtype=np.int64)
    np.add.at(total, which, sizes)
    largest = np.full(found.size, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(largest, which, sizes)
    top = np.lexsort((first, -total))[:TOP_OPS]
    return tuple(OpAllocation(m.names[found[k]] if found[k] >= 0 else "(no op)", int(count[k]) / n,
                              int(total[k]) / n, int(largest[k])) for k in top.tolist())


def _event_ops(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Per memory event, the names (ids) of two ops that enclose it: the op directly under an annotation, and
    the event's innermost op on its thread past the allocation helpers (``aten::empty``...: the op that asked
    for the block); -1: outside every op, or on a thread with no CPU event."""
    cpu, mem = m.cpu, m.mem
    events = np.flatnonzero(mem.thread >= 0)
    ops = np.flatnonzero(cpu.kind == OP)
    out = np.full(mem.n, -1, dtype=np.int64)
    inner_out = np.full(mem.n, -1, dtype=np.int64)
    helper = m.name_mask(lambda s: s in ALLOCATION_HELPERS)
    for thread in present(mem.thread[events]).tolist():
        mine = ops[cpu.thread[ops] == thread]
        rec = events[mem.thread[events] == thread]
        if not mine.size:
            continue
        at = np.searchsorted(cpu.ts[mine], mem.ts[rec], side="right") - 1
        current = np.where(at >= 0, mine[np.maximum(at, 0)], -1)
        for _ in range(cpu.max_depth + 2):  # up to the innermost op that holds ts
            todo = (current >= 0) & (cpu.end[np.maximum(current, 0)] <= mem.ts[rec])
            if not todo.any():
                break
            current[todo] = innermost_ancestor(cpu.parent, cpu.kind, cpu.max_depth, current[todo], (OP,))
        inner = current.copy()
        for _ in range(cpu.max_depth + 2):  # past the allocation helpers, to the op that asked
            above = innermost_ancestor(cpu.parent, cpu.kind, cpu.max_depth, np.maximum(inner, 0), (OP, ANNOTATION))
            todo = (inner >= 0) & helper[cpu.name[np.maximum(inner, 0)]] & (above >= 0) & \
                (cpu.kind[np.maximum(above, 0)] == OP)
            if not todo.any():
                break
            inner[todo] = above[todo]
        inner_out[rec] = np.where(inner >= 0, cpu.name[np.maximum(inner, 0)], -1)
        # then up to the outermost op below an annotation (or the thread's root)
        for _ in range(cpu.max_depth + 2):
            above = innermost_ancestor(cpu.parent, cpu.kind, cpu.max_depth, np.maximum(current, 0), (OP, ANNOTATION))
            todo = (current >= 0) & (above >= 0) & (cpu.kind[np.maximum(above, 0)] == OP)
            if not todo.any():
                break
            current[todo] = above[todo]
        out[rec] = np.where(current >= 0, cpu.name[np.maximum(current, 0)], -1)
    return out, inner_out
