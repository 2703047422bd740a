"""The memory view as it was first written (commit ebc7a91): a plain per-call, per-event scan, kept as the
oracle that tests/test_memory_speed.py checks the vectorised :mod:`common.report.facts.memory` against.

It is slow on purpose (every memory event scanned once per annotation call, ``device_name`` called per
event): only the tests run it, on small traces. Only the renaming of its imports differs from the original.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from common.report.facts.memory import (CURVE_POINTS, LARGEST_SIZES, TOP_OPS, AnnotationMemory, DeviceMemory, Memory,
                                  OpAllocation)
from common.report.facts.memory_ops import (ANNOTATION, COMMUNICATION_ANNOTATIONS, NOT_OPERATORS, OP, OpMemoryRow,
                                      _innermost_nodes, _merged, _node_parents, _with_ancestors)
from common.report.model.build import STEP_RE, Model, innermost_ancestor


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


def device_name(device_type: float, device_id: float) -> str | None:
    """The plugin's name of a device: CPU, GPU<id>; None for another device type."""
    if device_type == 0:
        return "CPU"
    if device_type == 1 and np.isfinite(device_id):
        return f"GPU{int(device_id)}"
    return None


def op_memory_table(m: Model) -> tuple[OpMemoryRow, ...]:
    """The plugin's per-operator memory rows, every device, by self allocation size (then name)."""
    mem, cpu = m.mem, m.cpu
    if not mem.n or not cpu.n:
        return ()
    names = m.names
    is_step = m.name_mask(lambda s: s.startswith("ProfilerStep#"))[cpu.name]
    is_comm = m.name_mask(lambda s: s in COMMUNICATION_ANNOTATIONS)[cpu.name]
    node = (cpu.kind == OP) | ((cpu.kind == ANNOTATION) & (is_step | is_comm))
    operator_type = (cpu.kind == OP) & ~is_step
    not_operator = m.name_mask(lambda s: s in NOT_OPERATORS or s.startswith("Optimizer.")
                               or (s.startswith("enumerate(DataLoader)#") and s.endswith(".__next__"))
                               or s.startswith("enumerate(DataPipe)#"))[cpu.name]
    operator = operator_type & ~not_operator
    parent = _node_parents(cpu.parent, node, cpu.max_depth)
    rep = _merged(parent, node, operator_type, cpu.name, cpu.depth)
    innermost = _innermost_nodes(m, node, parent)
    processed = _with_ancestors(innermost[innermost >= 0], parent, cpu.n)
    owner = np.where((innermost >= 0) & operator[np.maximum(innermost, 0)], rep[np.maximum(innermost, 0)], -1)
    rows = []
    for device in sorted({d for d in map(device_name, mem.device_type.tolist(), mem.device_id.tolist()) if d}):
        on_device = np.array([device_name(t, i) == device for t, i in zip(mem.device_type.tolist(),
                                                                          mem.device_id.tolist())])
        rows += _device_rows(device, owner[on_device], mem.bytes[on_device], parent, rep, node, operator,
                             processed, cpu.name, cpu.depth, names)
    return tuple(sorted(rows, key=lambda r: (r.device, -r.self_allocation_bytes, r.name)))


def _device_rows(device: str, owner: np.ndarray, nbytes: np.ndarray, parent: np.ndarray, rep: np.ndarray,
                 node: np.ndarray, operator: np.ndarray, processed: np.ndarray, name: np.ndarray, depth: np.ndarray,
                 names: tuple) -> list[OpMemoryRow]:
    n = parent.size
    kept = owner >= 0
    alloc = kept & (nbytes > 0)
    own = np.stack([np.bincount(owner[kept], weights=nbytes[kept], minlength=n),
                    np.bincount(owner[alloc], minlength=n).astype(np.float64),
                    np.bincount(owner[alloc], weights=nbytes[alloc], minlength=n)])
    total = own.copy()
    standing = node & (rep == np.arange(n))  # the nodes left once the only children of their name are merged
    merged_parent = np.where(parent >= 0, rep[np.maximum(parent, 0)], -1)
    for level in sorted(np.unique(depth[standing & (merged_parent >= 0)]).tolist(), reverse=True):
        c = np.flatnonzero(standing & (merged_parent >= 0) & (depth == level))  # children after their parents
        np.add.at(total, (slice(None), merged_parent[c]), total[:, c])
    walked = standing & operator & ((merged_parent < 0) | processed[np.maximum(merged_parent, 0)])
    calls = np.bincount(name[walked], minlength=len(names))
    by_name = {}
    for i in np.flatnonzero(standing & operator).tolist():
        sums = by_name.setdefault(int(name[i]), np.zeros(6))
        sums[:3] += own[:, i]
        sums[3:] += total[:, i]
    rows = []
    for k, (inc, count, size, inc_all, count_all, size_all) in by_name.items():
        if inc or count or size or inc_all or count_all or size_all:
            rows.append(OpMemoryRow(device, names[k], int(calls[k]), int(inc_all), int(inc), int(count_all), int(count),
                                    int(size_all), int(size)))
    return rows
