"""The gemm theme's numbers (:mod:`common.report.rules.gemm`): how matrix multiplies are dispatched
(aten::matmul's and aten::linear's child ops, the runtime calls under aten::mm/bmm, mm followed by add)
and which kernel launches follow an occupancy query. One record, :class:`GemmFacts` (``t.gemm``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.facts.runtime_calls import runtime_calls_under
from common.report.model import names as trace_names
from common.report.model.build import CATEGORY_CODES, KERNEL, OP, RUNTIME, Model

DISPATCH_PARENTS = ("aten::matmul", "aten::linear", "aten::addmm")  # ops whose child ops the rules read
MATMUL_OPS = ("aten::mm", "aten::bmm")  # aten::matmul's two paths


@dataclass(frozen=True)
class GemmFacts:
    """What the gemm rules read."""

    occupancy: Optional[OccupancyQueries]  # launches with and without a preceding occupancy query
    op_children: dict  # {parent op: {child op: calls}} for DISPATCH_PARENTS
    matmul_runtime_calls: dict  # {aten::mm/bmm: runtime_calls.RuntimeUnder (launches, other runtime calls)}
    mm_add_pairs: int  # aten::mm/matmul/bmm followed by an aten::add under the same parent


def gemm_facts(m: Model) -> GemmFacts:
    """The gemm theme's record of one model."""
    return GemmFacts(occupancy=occupancy_queries(m), op_children={name: op_children(m, name) for name in DISPATCH_PARENTS},
                     matmul_runtime_calls=runtime_calls_under(m, MATMUL_OPS), mm_add_pairs=mm_add_pairs(m))


def op_children(m: Model, parent_name: str) -> dict:
    """Child ops of every ``parent_name`` op call, by name: how many."""
    cpu = m.cpu
    if parent_name not in m.names:
        return {}
    nid = m.names.index(parent_name)
    par = np.flatnonzero((cpu.name == nid) & (cpu.kind == OP))
    if not par.size:
        return {}
    kids = np.flatnonzero(np.isin(cpu.parent, par) & (cpu.kind == OP))
    ids, cnt = np.unique(cpu.name[kids], return_counts=True)
    return {m.names[i]: int(c) for i, c in zip(ids.tolist(), cnt.tolist())}


def mm_add_pairs(m: Model) -> int:
    """aten::mm/matmul/bmm calls whose next op under the same parent, views and metadata aside (they move
    no data), is an aten::add: the add that can take the product, as Part 1's ``torch.add(torch.matmul(x,
    w), b)`` does. An add further on is not paired: a trace holds no tensor identities, and with other work
    between (the LLM's rotary matmul, then RMSNorm's ``+ eps`` eleven ops later) the dependency is a guess."""
    cpu = m.cpu
    if "aten::add" not in m.names:
        return 0
    mmish = m.name_mask(lambda s: s in ("aten::mm", "aten::matmul", "aten::bmm"))
    aside = m.name_mask(lambda s: s in trace_names.METADATA_OPS)
    add_id = m.names.index("aten::add")
    ops = np.flatnonzero((cpu.kind == OP) & ~aside[cpu.name])
    if ops.size < 2:
        return 0
    c = ops[np.lexsort((ops, cpu.parent[ops]))]  # each parent's children in order
    same = cpu.parent[c[1:]] == cpu.parent[c[:-1]]
    return int((same & (cpu.name[c[1:]] == add_id) & mmish[cpu.name[c[:-1]]]).sum())


@dataclass(frozen=True)
class OccupancyQueries:
    """Kernel launches with and without an occupancy query on their thread since the previous launch."""

    gemm_launches: int
    gemm_launches_queried: int
    launch_calls: tuple  # the runtime calls that launched the GEMMs, by name
    queried: int
    plain: int
    queried_ops: dict  # the top 3 ops of the queried launches: {op: {launches, kernels (the top 2 names)}}
    plain_ops: dict  # ... of the plain ones
    queries: tuple  # the occupancy-query calls of the trace, by name


def _queried_kernels(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """(kernels with a correlated launch, whether an occupancy query came on that thread since its
    previous launch), both indexed like ``m.dev``."""
    dev, cpu = m.dev, m.cpu
    kj = np.flatnonzero((dev.launch >= 0) & (dev.kind == KERNEL))
    rt = np.flatnonzero(cpu.kind == RUNTIME)  # sorted by thread, then time
    if not rt.size or not kj.size:
        return kj, np.zeros(kj.size, dtype=bool)
    is_occ = m.name_mask(trace_names.is_occupancy_query)[cpu.name[rt]]
    launch_mask = np.zeros(cpu.n, dtype=bool)
    launch_mask[dev.launch[kj]] = True
    cq = np.cumsum(is_occ)
    pos = np.flatnonzero(launch_mask[rt])
    thread = cpu.thread[rt]
    prev = np.concatenate(([-1], pos[:-1]))  # previous launch position (any thread)
    same_thread = (prev >= 0) & (thread[np.maximum(prev, 0)] == thread[pos])
    before = np.where(same_thread, cq[np.maximum(prev, 0)], 0)
    # queries since the previous launch on this thread (or since the thread's first runtime call)
    first_of_thread = np.searchsorted(thread, thread[pos], side="left")
    base = np.where(same_thread, before, np.where(first_of_thread > 0, cq[np.maximum(first_of_thread - 1, 0)], 0))
    q_of_rt = np.zeros(rt.size, dtype=bool)
    q_of_rt[pos] = (cq[pos] - base) > 0
    return kj, q_of_rt[np.searchsorted(rt, dev.launch[kj])]


def occupancy_queries(m: Model) -> Optional[OccupancyQueries]:
    """None on a CPU-only trace."""
    if not m.has_gpu:
        return None
    dev, cpu = m.dev, m.cpu
    kj, kq = _queried_kernels(m)
    gemm = dev.category[kj] == CATEGORY_CODES["gemm"]
    kop = np.where(dev.op[kj] >= 0, cpu.name[np.maximum(dev.op[kj], 0)], -1)
    kname = dev.name[kj]

    def top(mask, k=3):
        ops, cnt = np.unique(kop[mask], return_counts=True)
        out = {}
        for i in np.argsort(-cnt)[:k].tolist():
            sel = mask & (kop == ops[i])
            kn, kc = np.unique(kname[sel], return_counts=True)
            names_ = [trace_names.short_name(m.names[kn[j]], 60) for j in np.argsort(-kc)[:2].tolist()]
            out[m.names[ops[i]] if ops[i] >= 0 else "(no op)"] = dict(launches=int(cnt[i]), kernels=names_)
        return out

    queries = _names_of(m, cpu.name[(cpu.kind == RUNTIME) & m.name_mask(trace_names.is_occupancy_query)[cpu.name]])
    return OccupancyQueries(
        gemm_launches=int(gemm.sum()), gemm_launches_queried=int((gemm & kq).sum()),
        launch_calls=tuple(_names_of(m, cpu.name[dev.launch[kj[gemm]]])), queried=int(kq.sum()),
        plain=int((~kq).sum()), queried_ops=top(kq), plain_ops=top(~kq), queries=tuple(queries))


def _names_of(m: Model, ids) -> list:
    """The names of these name ids, sorted, each once."""
    return sorted({m.names[i] for i in np.asarray(ids).tolist()})
