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

from common.report.memory_ops import OpMemoryRow, device_name, op_memory_table
from common.report.model import ANNOTATION, OP, STEP_RE, Model, innermost_ancestor

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
    """The memory figures of the model; None without [memory] events."""
    mem = m.mem
    if not mem.n:
        return None
    names = np.array([device_name(t, i) or "" for t, i in zip(mem.device_type.tolist(), mem.device_id.tolist())])
    devices, levels = [], {}
    for device in sorted(set(names.tolist()) - {""}, key=lambda d: (d == "CPU", d)):
        rows = np.flatnonzero(names == device)
        level, totals = _allocated(mem.total_allocated[rows], mem.bytes[rows])
        levels[device] = (rows, level)
        devices.append(_device_memory(m, device, rows, level, totals))
    annotations = _annotations(m, names, levels)
    ops: tuple[OpMemoryRow, ...] = op_memory_table(m)
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
    """(count, bytes) of the window's allocations whose address no free released by the window's end."""
    if not np.isfinite(addr[inside]).all():
        return None
    live: dict = {}
    for a, b, counted in zip(addr[by_end].tolist(), nbytes[by_end].tolist(), inside[by_end].tolist()):
        if b > 0:
            live[a] = b if counted else None
        elif b < 0:
            live.pop(a, None)
    sizes = [b for b in live.values() if b is not None]
    return len(sizes), int(sum(sizes))


def _curve(ts: np.ndarray, level: np.ndarray) -> tuple:
    """(time, level) after each event; a long one as the lowest and highest point of each stretch."""
    if ts.size > CURVE_POINTS:
        stretches = np.array_split(np.arange(ts.size), CURVE_POINTS // 2)
        keep = sorted({int(s[np.argmin(level[s])]) for s in stretches} | {int(s[np.argmax(level[s])]) for s in stretches})
        ts, level = ts[keep], level[keep]
    return tuple(zip(np.round(ts, 3).tolist(), level.astype(np.int64).tolist()))


def _annotations(m: Model, device_names: np.ndarray, levels: dict) -> tuple:
    """Per annotation name and device: the memory events inside its calls (see the module's docstring)."""
    cpu, mem = m.cpu, m.mem
    w0, w1 = m.window
    phase = m.name_mask(lambda s: not STEP_RE.match(s))[cpu.name]
    calls = np.flatnonzero((cpu.kind == ANNOTATION) & phase & (cpu.ts >= w0) & (cpu.ts <= w1))
    if not calls.size:
        return ()
    events = np.flatnonzero(mem.thread >= 0)
    top_op = _top_ops(m, events)
    out = []
    for name_id in dict.fromkeys(cpu.name[calls].tolist()):
        mine = calls[cpu.name[calls] == name_id]
        mine = mine[np.argsort(cpu.ts[mine], kind="stable")]
        for device, (rows, level) in levels.items():
            row = _annotation_memory(m, m.names[name_id], device, mine, rows, level, top_op)
            if row is not None:
                out.append(row)
    return tuple(out)


def _top_ops(m: Model, events: np.ndarray) -> dict:
    """Per memory event (index), the op directly under an annotation that encloses it, by the event's
    innermost op on its thread: {event: op name}; events outside every op are left out."""
    cpu, mem = m.cpu, m.mem
    ops = np.flatnonzero(cpu.kind == OP)
    out = {}
    for thread in np.unique(mem.thread[events]).tolist():
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
        # then up to the outermost op below an annotation (or the thread's root)
        for _ in range(cpu.max_depth + 2):
            above = innermost_ancestor(cpu.parent, cpu.kind, cpu.max_depth, np.maximum(current, 0), (OP, ANNOTATION))
            todo = (current >= 0) & (above >= 0) & (cpu.kind[np.maximum(above, 0)] == OP)
            if not todo.any():
                break
            current[todo] = above[todo]
        for e, op in zip(rec.tolist(), current.tolist()):
            if op >= 0:
                out[e] = m.names[cpu.name[op]]
    return out


def _annotation_memory(m: Model, name: str, device: str, calls: np.ndarray, rows: np.ndarray, level: np.ndarray,
                       top_op: dict) -> Optional[AnnotationMemory]:
    cpu, mem = m.cpu, m.mem
    ts, thread, nbytes = mem.ts[rows], mem.thread[rows], np.nan_to_num(mem.bytes[rows])
    per_call, ends, sizes, by_op = [], [], [], {}
    for c in calls.tolist():
        inside = np.flatnonzero((thread == cpu.thread[c]) & (ts >= cpu.ts[c]) & (ts < cpu.end[c]))
        b = nbytes[inside]
        per_call.append((int((b > 0).sum()), int(b[b > 0].sum()), int(b.sum())))
        sizes.append(b[b > 0])
        before_end = np.searchsorted(ts, cpu.end[c], side="left") - 1
        ends.append(int(level[before_end]) if before_end >= 0 else 0)
        for i in inside[b > 0].tolist():
            op = top_op.get(int(rows[i]), "(no op)")
            count, total, largest = by_op.get(op, (0, 0, 0))
            by_op[op] = (count + 1, total + int(nbytes[i]), max(largest, int(nbytes[i])))
    n = len(per_call)
    allocations = np.array([p[0] for p in per_call])
    if not allocations.sum():
        return None
    every = np.concatenate(sizes)
    sizes_seen, counts = np.unique(every, return_counts=True)
    largest_sizes = tuple((int(b), float(c) / n) for b, c in zip(sizes_seen[::-1][:LARGEST_SIZES].tolist(),
                                                                 counts[::-1][:LARGEST_SIZES].tolist()))
    ops = tuple(OpAllocation(op, count / n, total / n, big)
                for op, (count, total, big) in sorted(by_op.items(), key=lambda kv: -kv[1][1])[:TOP_OPS])
    return AnnotationMemory(
        name=name, device=device, calls=n, allocations_per_call=float(allocations.mean()),
        allocated_bytes_per_call=float(np.mean([p[1] for p in per_call])),
        net_bytes_per_call=float(np.mean([p[2] for p in per_call])), largest_allocation_bytes=largest_sizes[0][0],
        largest_sizes=largest_sizes, ops=ops, allocated_bytes_of_calls=tuple(p[1] for p in per_call),
        allocated_at_call_end_bytes=tuple(ends), step_of_calls=tuple(cpu.step[calls].tolist()))
