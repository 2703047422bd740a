"""Where the Triton kernels came from: the call that launched each (the runtime or driver API) and
the op or annotation around that launch.

Inductor wraps each of its kernel launches in a record of the kernel's own name; that record is
passed over for the one around it (the compiled graph, ``## Call CompiledFxGraph <hash> ##``). Only
the kernels :func:`~common.report.model.names.jit_category` calls Triton (Inductor's, and those written by
hand and launched by Triton's launcher) are read, once per name.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from common.report.facts.compile import FXGRAPH
from common.report.model.build import ANNOTATION, CATEGORY_CODES, CATEGORY_KEYS, KERNEL, OP, Model

TRITON_CATEGORIES = ("triton_pointwise", "triton_reduction", "triton_persistent", "triton_other")


@dataclass(frozen=True)
class KernelSource:
    """One kernel name's launches: by which call, from inside which op, most first."""

    name: str
    launchers: tuple  # (runtime/driver call name, launches), most first
    callers: tuple  # (op or annotation around the launch, launches), most first; "" where none is
    # the other kernels the same compiled graph calls launched (``## Call CompiledFxGraph``, their CUDA graph
    # replays included), where the kernel came from one: what still runs beside it
    beside: tuple = ()  # (kernel category, kernels), most first
    ops_beside: tuple = ()  # (op inside those calls that launched kernels of its own, kernels), most first

    @property
    def launched_from(self) -> str:
        """``LigerGELUMulFunction``, ``the compiled graph (CompiledFxGraph fwv23rla6unu…)``, or several."""
        named = [_short_caller(c) + (f" {n}x" if len(self.callers) > 1 else "") for c, n in self.callers[:3]]
        return ", ".join(named) + (f" (+{len(self.callers) - 3} more)" if len(self.callers) > 3 else "")


def _short_caller(name: str) -> str:
    graph = FXGRAPH.match(name)
    if graph:
        return f"the compiled graph (CompiledFxGraph {graph.group(1)[:12]}…)"
    return name or "no op (a launch outside every op)"


def kernel_sources(m: Model) -> dict:
    """{kernel name: KernelSource} for the Triton kernels the trace launched (not before the window)."""
    dev, cpu = m.dev, m.cpu
    if not m.has_gpu:
        return {}
    codes = [CATEGORY_CODES[c] for c in TRITON_CATEGORIES]
    rows = np.flatnonzero((dev.kind == KERNEL) & ~dev.outside & np.isin(dev.category, codes) & (dev.launch >= 0))
    graph_call = _compiled_graph_calls(m)
    out = {}
    for name_id in np.unique(dev.name[rows]).tolist():
        mine = rows[dev.name[rows] == name_id]
        callers = dev.op[mine].copy()
        own = (callers >= 0) & (cpu.name[np.maximum(callers, 0)] == name_id)  # Inductor's record of this launch
        if own.any():
            callers[own] = m.enclosing(callers[own], (OP, ANNOTATION))
        name = m.names[name_id]
        out[name] = KernelSource(
            name=name,
            launchers=tuple(Counter(m.names[i] for i in cpu.name[dev.launch[mine]].tolist()).most_common()),
            callers=tuple(Counter(m.names[cpu.name[i]] if i >= 0 else "" for i in callers.tolist()).most_common()),
            **_beside(m, graph_call, mine))
    return out


def _compiled_graph_calls(m: Model) -> np.ndarray:
    """Per device event, the compiled graph call (``## Call CompiledFxGraph <hash> ##``, a CPU row) its launch
    sits in, at any depth (a graph launch's replays: the call that launched the graph), or -1."""
    cpu, dev = m.cpu, m.dev
    is_graph = m.name_mask(lambda s: bool(FXGRAPH.match(s)))
    out = np.full(dev.n, -1, dtype=np.int64)
    cur = dev.op.copy()
    for _ in range(cpu.max_depth + 1):
        live = cur >= 0
        if not live.any():
            break
        hit = live & (out < 0) & is_graph[cpu.name[np.maximum(cur, 0)]]
        out[hit] = cur[hit]
        cur = np.where(live & (out < 0), cpu.parent[np.maximum(cur, 0)], -1)
    return out


def _beside(m: Model, graph_call: np.ndarray, mine: np.ndarray) -> dict:
    """``beside`` and ``ops_beside`` of a kernel whose launches are ``mine``: the other kernels of its
    compiled graph calls, by category, and the ops in those calls (not Inductor's records of its own
    launches, nor the call itself) that launched them."""
    calls = np.unique(graph_call[mine])
    calls = calls[calls >= 0]
    if not calls.size:
        return {}
    dev, cpu = m.dev, m.cpu
    others = np.flatnonzero(np.isin(graph_call, calls) & (dev.kind == KERNEL) & (dev.name != dev.name[mine[0]]))
    ops = dev.op[others]
    by_op = ops[(ops >= 0) & ~np.isin(ops, calls)]
    by_op = by_op[cpu.name[by_op] != dev.name[others][(ops >= 0) & ~np.isin(ops, calls)]]  # Inductor's own record
    return dict(beside=tuple(Counter(CATEGORY_KEYS[c] for c in dev.category[others].tolist()).most_common()),
                ops_beside=tuple(Counter(m.names[cpu.name[i]] for i in by_op.tolist()).most_common()))


GEMM_OPS = frozenset({"mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "_scaled_mm", "_int_mm"})
KIND_OF_KERNEL = {"gemm": "GEMM", "attention": "fused attention"}  # the kernel category an op's own kernel has


def _op_kernel_category(op: str) -> str | None:
    """The category of ``op``'s own kernel where no pointwise or reduction kernel does its work: a GEMM's,
    an attention's (``_scaled_dot_product_cudnn_attention``); None for the others."""
    return "gemm" if op in GEMM_OPS else "attention" if "attention" in op else None


def split_listed(d: dict, source) -> dict:
    """The decoded name ``d`` with the ops whose own kind of kernel still runs beside it moved from ``ops`` to
    ``listed_not_fused`` ({op: the evidence}): Inductor names a kernel after the ops its nodes came from, and a
    pointwise (or reduction) kernel that lists ``bmm`` or ``_scaled_dot_product_cudnn_attention`` moves their
    inputs or outputs; their own GEMM or attention kernel still runs in the same compiled graph calls (an op of
    that name launched kernels there, or kernels of that category ran there). A template (``tem``) kernel
    does compute its GEMM: left as it is."""
    if source is None or d["kind"] not in ("pointwise", "reduction", "persistent reduction"):
        return {**d, "listed_not_fused": {}}
    ops_beside, beside = dict(source.ops_beside), dict(source.beside)
    listed = {}
    for op in d["ops"]:
        category = _op_kernel_category(op)
        if ops_beside.get(f"aten::{op}"):
            listed[op] = f"aten::{op} launched {ops_beside[f'aten::{op}']:,} kernels of its own"
        elif category and beside.get(category):
            listed[op] = f"{beside[category]:,} {KIND_OF_KERNEL[category]} kernels ran"
    return {**d, "ops": [op for op in d["ops"] if op not in listed], "listed_not_fused": listed}
