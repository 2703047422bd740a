"""The runtime calls directly under an op (aten::mm, aten::bmm): its kernel launches, and apart from
them the other calls (memsets, occupancy queries, allocations) and how many of its calls made any."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from common.report.model import names as trace_names
from common.report.model.build import OP, RUNTIME, Model


@dataclass(frozen=True)
class RuntimeUnder:
    """The runtime calls directly under one op name (its innermost enclosing op): kernel launches, and
    apart from them the others (memsets, queries, allocations), with how many of its calls made any."""

    calls: int  # calls of the op
    launches: int  # kernel launches (cudaLaunchKernel, cuLaunchKernelEx, ...)
    others: dict  # {any other runtime call: how many}, most first
    calls_with_others: int  # calls of the op that made at least one of the others


def runtime_calls_under(m: Model, op_names) -> dict:
    """{op name: RuntimeUnder} for the op names in the trace; empty when it has no runtime call at all."""
    cpu = m.cpu
    rt = np.flatnonzero(cpu.kind == RUNTIME)
    if not rt.size:
        return {}
    inner = m.enclosing(rt, (OP,))
    inner_name = np.where(inner >= 0, cpu.name[np.maximum(inner, 0)], -1)
    launch = m.name_mask(trace_names.is_launch)[cpu.name[rt]]
    out = {}
    for op in op_names:
        if op in m.names:
            nid = m.names.index(op)
            mine, other = inner_name == nid, (inner_name == nid) & ~launch
            ids, counts = np.unique(cpu.name[rt[other]], return_counts=True)
            others = sorted(((m.names[i], int(c)) for i, c in zip(ids.tolist(), counts.tolist())), key=lambda p: -p[1])
            out[op] = RuntimeUnder(calls=int(((cpu.name == nid) & (cpu.kind == OP)).sum()),
                                   launches=int((mine & launch).sum()), others=dict(others),
                                   calls_with_others=int(np.unique(inner[other]).size))
    return out
