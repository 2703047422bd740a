"""The memory view computed the plain way, as the oracle that tests/test_memory_speed.py checks the vectorised
:mod:`common.report.facts.memory` and :mod:`common.report.facts.memory_ops` against.

It shares no code with what it checks: it reads the model's lanes (the CPU lane's call tree, the memory lane)
and writes the view's own dataclasses, and computes everything between in plain Python, event by event:
each annotation call scans every memory event (as the view was first written, commit ebc7a91), and the
plugin's op table is built from its definitions (the docstring of :mod:`common.report.facts.memory_ops`)
with a stack walk of each thread's nodes in time order, where the view climbs numpy arrays of parents. What
it takes from the code is the model's encoding (:data:`~common.report.model.build.OP`, ``ANNOTATION``) and
the view's sizes (how many curve points, sizes and ops it keeps). Slow on purpose: only the tests run it.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Optional

import numpy as np

from common.report.facts.memory import (CURVE_POINTS, LARGEST_SIZES, TOP_OPS, AnnotationMemory, DeviceMemory, Memory,
                                        OpAllocation)
from common.report.facts.memory_ops import OpMemoryRow
from common.report.model.build import ANNOTATION, OP, Model

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
# The plugin's definitions (torch_tb_profiler 0.4.3): annotations that are nodes of its op tree, and ops that keep
# no memory events.
COMMUNICATION_ANNOTATIONS = {f"{lib}:{op}" for lib in ("nccl", "gloo")
                             for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")}
NOT_OPERATORS = {"DataParallel.forward", "DistributedDataParallel.forward"}


def memory_of(m: Model) -> Optional[Memory]:
    """The memory figures of the model; None without [memory] events."""
    mem = m.mem
    if not mem.n:
        return None
    names = np.array([d or "" for d in devices_of(mem)])
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
    ops = [i for i in range(cpu.n) if cpu.kind[i] == OP]
    innermost = _innermost(cpu, ops, events.tolist(), mem.thread, mem.ts)
    out = {}
    for e, op in innermost.items():
        while True:  # up to the outermost op below an annotation (or the thread's root)
            above = cpu.parent[op]
            while above >= 0 and cpu.kind[above] not in (OP, ANNOTATION):
                above = cpu.parent[above]
            if above < 0 or cpu.kind[above] != OP:
                break
            op = above
        out[e] = m.names[cpu.name[op]]
    return out


def _innermost(cpu, nodes: list, events: list, thread: np.ndarray, ts: np.ndarray) -> dict:
    """{event: the innermost of ``nodes`` on the event's thread with start <= ts < end}, events in none left
    out: per thread, the nodes in time order (outer first) and the events in time order, walked together with
    a stack of the nodes open at that time."""
    start, end, depth, node_thread = cpu.ts.tolist(), cpu.end.tolist(), cpu.depth.tolist(), cpu.thread.tolist()
    thread, ts = thread.tolist(), ts.tolist()
    out = {}
    for t in sorted({thread[e] for e in events}):
        mine = sorted((n for n in nodes if node_thread[n] == t), key=lambda n: (start[n], -end[n], depth[n]))
        stack, i = [], 0
        for e in sorted((e for e in events if thread[e] == t), key=lambda e: (ts[e], e)):
            while i < len(mine) and start[mine[i]] <= ts[e]:
                while stack and end[stack[-1]] <= start[mine[i]]:
                    stack.pop()
                stack.append(mine[i])
                i += 1
            while stack and end[stack[-1]] <= ts[e]:
                stack.pop()
            if stack:
                out[e] = stack[-1]
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


def devices_of(mem) -> list:
    """Each memory event's device name (None: another device type)."""
    pairs = list(zip(mem.device_type.tolist(), mem.device_id.tolist()))
    named = {pair: device_name(*pair) for pair in set(pairs)}
    return [named[pair] for pair in pairs]


def op_memory_table(m: Model) -> tuple[OpMemoryRow, ...]:
    """The plugin's per-operator memory rows, every device, by self allocation size (then name), from its
    definitions (facts/memory_ops.py's docstring says them)."""
    mem, cpu = m.mem, m.cpu
    if not mem.n or not cpu.n:
        return ()
    name_of = [m.names[k] for k in cpu.name.tolist()]
    kind, cpu_parent, depth = cpu.kind.tolist(), cpu.parent.tolist(), cpu.depth.tolist()
    nodes = [i for i in range(cpu.n) if kind[i] == OP or (kind[i] == ANNOTATION and (
        name_of[i].startswith("ProfilerStep#") or name_of[i] in COMMUNICATION_ANNOTATIONS))]
    is_node = set(nodes)
    operator_type = {i for i in nodes if kind[i] == OP and not name_of[i].startswith("ProfilerStep#")}
    operator = {i for i in operator_type if not _not_an_operator(name_of[i])}
    parent = {}  # node -> its innermost enclosing node (-1: the thread's root)
    for i in nodes:
        up = cpu_parent[i]
        while up >= 0 and up not in is_node:
            up = cpu_parent[up]
        parent[i] = up
    children: dict = {}
    for i in nodes:
        children.setdefault(parent[i], []).append(i)
    one_with = {}  # node -> the node it is one with (an only child of its own name, both operators: its parent's)
    for i in sorted(nodes, key=lambda n: depth[n]):
        p = parent[i]
        alone = p >= 0 and len(children[p]) == 1 and name_of[p] == name_of[i] and {i, p} <= operator_type
        one_with[i] = one_with[p] if alone else i
    events = [e for e in range(mem.n) if mem.thread[e] >= 0]
    innermost = _innermost(cpu, nodes, events, mem.thread, mem.ts)
    holds_event = set()  # the nodes that contain a memory event (their own or below)
    for node in innermost.values():
        while node >= 0 and node not in holds_event:
            holds_event.add(node)
            node = parent[node]
    standing = [i for i in nodes if one_with[i] == i]
    up = {i: one_with[parent[i]] if parent[i] >= 0 else -1 for i in standing}
    walked = [i for i in standing if i in operator and (up[i] < 0 or up[i] in holds_event)]
    calls = Counter(name_of[i] for i in walked)
    device_of = devices_of(mem)
    nbytes = np.nan_to_num(mem.bytes).astype(np.int64).tolist()
    rows = []
    for device in sorted(set(device_of) - {None}):
        own: dict = {}  # node -> self size increase, allocation count, allocation size
        total: dict = {}  # node -> the same over it and every node below it
        for e, node in innermost.items():
            if node in operator and device_of[e] == device:
                b = nbytes[e]
                node = one_with[node]
                mine = own.setdefault(node, [0, 0, 0])
                mine[0], mine[1], mine[2] = mine[0] + b, mine[1] + (b > 0), mine[2] + max(b, 0)
                while node >= 0:  # the event counts in every node above its own
                    mine = total.setdefault(node, [0, 0, 0])
                    mine[0], mine[1], mine[2] = mine[0] + b, mine[1] + (b > 0), mine[2] + max(b, 0)
                    node = up[node]
        by_name: dict = {}
        for i in total:
            if i in operator:
                sums = by_name.get(name_of[i], [0] * 6)
                by_name[name_of[i]] = [a + b for a, b in zip(sums, [*own.get(i, (0, 0, 0)), *total[i]])]
        rows += [OpMemoryRow(device, name, calls[name], inc_all, inc, count_all, count, size_all, size)
                 for name, (inc, count, size, inc_all, count_all, size_all) in by_name.items()
                 if any((inc, count, size, inc_all, count_all, size_all))]
    return tuple(sorted(rows, key=lambda r: (r.device, -r.self_allocation_bytes, r.name)))


def _not_an_operator(name: str) -> bool:
    """Frames the plugin's op table keeps no events for (its definitions)."""
    return name in NOT_OPERATORS or name.startswith(("Optimizer.", "enumerate(DataPipe)#")) or (
        name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__"))
