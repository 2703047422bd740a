"""What ran inside an op: the ops, kernels and launches under every call of one op, by name.

Part 3 reads attention through what its ops call: ``aten::masked_fill`` calls ``aten::clone`` (the
out-of-place copy), SDPA's math backend calls ``aten::_to_copy`` (the fp32 upcast), ``aten::tril``
(the causal mask, rebuilt) and ``aten::_safe_softmax``, a fused backend one kernel. A
:class:`Subtree` holds those names with their counts and times, summed over the op's calls in the
window; the attention theme reads them (:mod:`.attention`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from common.report.model.build import KERNEL, OP, RUNTIME, Model
from common.report.facts.phases import calls_in_window, subtree_ends
from common.report.findings import Span

@dataclass(frozen=True)
class Subtree:
    op: str
    calls: int  # calls of ``op`` in the window
    wall_us: float  # their wall time, together
    ops: dict  # {op name: calls} of every op nested in them (any depth)
    paths: dict  # {"child" or "child > grandchild": calls}: the ops one and two levels down
    ops_us: dict  # {op name: wall time} of those (a nested op's time also counts in its ancestors')
    kernels: dict  # {device event name: count} launched from inside them (GPU)
    kernels_us: dict  # {device event name: device time}
    launches: dict  # {runtime call name: count} that launched the kernels among those (not memcpys, memsets)
    self_us: dict = None  # {op name: own time} of the calls themselves (under ``op``) and every op nested in them
    # where they ran (Span, µs from the window's start), for a finding to point at:
    call_spans: tuple = ()  # the calls of ``op``
    op_spans: dict = field(default_factory=dict)  # {nested op name: its calls, at any depth}
    path_spans: dict = field(default_factory=dict)  # {``paths`` key: its calls}
    device_spans: dict = field(default_factory=dict)  # {device event name: its events}
    kernel_launches: dict = field(default_factory=dict)  # {kernel name: {runtime call name: count}}: each one's launchers

    def per_call(self, name: str) -> float:
        return self.ops.get(name, 0) / self.calls if self.calls else 0.0

    def to_json(self) -> dict:
        return dict(op=self.op, calls=self.calls, wall_us=self.wall_us, ops=self.ops, paths=self.paths,
                    kernels=self.kernels,
                    launches=self.launches)


def subtree(m: Model, op: str) -> Subtree | None:
    """The ops, kernels and launches under every call of ``op`` in the window (None when it has none)."""
    cpu, dev = m.cpu, m.dev
    calls = calls_in_window(m, op, OP)
    if not calls.size:
        return None
    ends = subtree_ends(m, calls)
    inside = np.zeros(cpu.n + 1, dtype=np.int64)  # +1 at a call's first descendant, -1 past its last
    np.add.at(inside, calls + 1, 1)
    np.add.at(inside, ends, -1)
    under = np.cumsum(inside[:-1]) > 0
    nested = np.flatnonzero(under & (cpu.kind == OP))
    ops, ops_us = _by_name(m, cpu.name[nested], cpu.dur[nested])
    launched = np.flatnonzero(dev.launch >= 0)
    launched = launched[under[dev.launch[launched]]]
    is_call = np.zeros(cpu.n, dtype=bool)
    is_call[calls] = True
    paths, path_spans = _paths(m, nested, is_call)
    kernels, kernels_us = _by_name(m, dev.name[launched], dev.dur[launched])
    kernel_rows = launched[dev.kind[launched] == KERNEL]  # a memset's cudaMemsetAsync launches no kernel
    kernel_rows = kernel_rows[cpu.kind[dev.launch[kernel_rows]] == RUNTIME]
    launches = Counter(m.names[i] for i in cpu.name[dev.launch[kernel_rows]].tolist())
    outer = calls[~_nested_in_same(calls, ends)]
    mine = np.concatenate((outer, nested))
    return Subtree(op, int(calls.size), float(cpu.dur[outer].sum()), ops, paths, ops_us, kernels, kernels_us,
                   dict(launches), _by_name(m, cpu.name[mine], cpu.self_us[mine])[1], _spans(cpu, calls),
                   _spans_by_name(m, cpu, nested), path_spans, _spans_by_name(m, dev, launched),
                   _launchers_by_kernel(m, kernel_rows))


def _launchers_by_kernel(m: Model, kernel_rows: np.ndarray) -> dict:
    """{kernel name: {runtime call name: count}} of the device events ``kernel_rows`` (each tied to its launch)."""
    out = defaultdict(Counter)
    launch_names = m.cpu.name[m.dev.launch[kernel_rows]].tolist()
    for kernel, launcher in zip(m.dev.name[kernel_rows].tolist(), launch_names):
        out[m.names[kernel]][m.names[launcher]] += 1
    return {kernel: dict(c.most_common()) for kernel, c in out.items()}


def _spans(lane, rows: np.ndarray) -> tuple:
    return tuple(Span(float(lane.ts[i]), float(lane.dur[i])) for i in rows.tolist())


def _spans_by_name(m: Model, lane, rows: np.ndarray) -> dict:
    """{name: (Span, ...)} of the lane's events ``rows``, in time order."""
    out = defaultdict(list)
    for i in rows[np.argsort(lane.ts[rows], kind="stable")].tolist():
        out[m.names[lane.name[i]]].append(Span(float(lane.ts[i]), float(lane.dur[i])))
    return {name: tuple(spans) for name, spans in out.items()}


def _paths(m: Model, nested: np.ndarray, is_call: np.ndarray) -> tuple[dict, dict]:
    """{"child": n, "child > grandchild": n} over the nested ops one or two levels below a call, and
    their spans by the same keys."""
    cpu, names = m.cpu, m.names
    up = cpu.parent[nested]
    child = nested[(up >= 0) & is_call[np.maximum(up, 0)]]
    up2 = np.where(up >= 0, cpu.parent[np.maximum(up, 0)], -1)
    grand = (up2 >= 0) & is_call[np.maximum(up2, 0)] & (cpu.kind[np.maximum(up, 0)] == OP)
    keys = [names[cpu.name[i]] for i in child.tolist()]
    deeper = [(f"{names[cpu.name[cpu.parent[i]]]} > {names[cpu.name[i]]}", i) for i in nested[grand].tolist()]
    spans = defaultdict(list)
    for key, i in list(zip(keys, child.tolist())) + deeper:
        spans[key].append(Span(float(cpu.ts[i]), float(cpu.dur[i])))
    keys += [key for key, _ in deeper]
    return dict(Counter(keys).most_common()), {key: tuple(s) for key, s in spans.items()}


def _nested_in_same(calls: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Which calls sit inside an earlier call of the same op (their time is already counted)."""
    reach = np.maximum.accumulate(ends)
    return np.concatenate(([False], calls[1:] < reach[:-1]))


def _by_name(m: Model, name_ids: np.ndarray, dur: np.ndarray) -> tuple[dict, dict]:
    counts = Counter(name_ids.tolist())
    totals = np.bincount(name_ids, weights=dur, minlength=len(m.names)) if name_ids.size else np.zeros(0)
    return ({m.names[i]: int(c) for i, c in counts.most_common()},
            {m.names[i]: float(totals[i]) for i, _ in counts.most_common()})
