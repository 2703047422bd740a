"""The numbers particular rules read, computed once over the model's lanes with the other tables.

A rule reads these records (``t.occupancy.queried``, ``t.kernel_gaps[i]``) and judges; it never
walks the lanes itself. Each record also holds the time spans a finding about it points at (the
copies before a GEMM, the final synchronize), so the rule can hand them on with its evidence.
Times are µs relative to the window's start, like the model's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.load.columns import factorize
from common.report.model.gpus import Gpu, gpu_of
from common.report.model.build import ANNOTATION, CATEGORY_CODES, KERNEL, MEMCPY, MEMSET, RUNTIME, STEP_RE, Model
from common.report.facts.phases import GRAPH_LAUNCHES
from common.report.facts.rows import OpRow
from common.report.findings import Span

REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")
FXGRAPH = re.compile(r"^## Call CompiledFxGraph (\S+) ##$")
COMPILE_FRAMES = ("TorchDynamo Cache Lookup", "AOTDispatcher Runtime Wrapper Prologue", "CompiledFunction",
                  "Pregraph bytecode")


def names_of(m: Model, ids) -> list:
    return sorted({m.names[i] for i in np.asarray(ids).tolist()})


# ----------------------------------------------------------------------------- the op tree


@dataclass(frozen=True)
class TopOpChildren:
    """The op at the top of the op table (by CPU total) and its heaviest child (None: it has none)."""

    op: str
    heaviest: Optional[str]
    heaviest_us: float


def top_op_children(m: Model, ops: tuple) -> Optional[TopOpChildren]:
    """For the first op row (not ProfilerStep#N, CPU total > 0): the child name whose calls (under any
    event of that name) take the most time."""
    top = next((o for o in ops if o.kind == "op" and not STEP_RE.match(o.name) and o.cpu_total_us > 0), None)
    if top is None:
        return None
    cpu = m.cpu
    par = np.flatnonzero(cpu.name == m.names.index(top.name))
    kids = np.flatnonzero(np.isin(cpu.parent, par))
    if not kids.size:
        return TopOpChildren(top.name, None, 0.0)
    tot = np.bincount(cpu.name[kids], weights=cpu.dur[kids])
    c = int(np.argmax(tot))
    return TopOpChildren(top.name, m.names[c], float(tot[c]))


# ----------------------------------------------------------------------------- launches


@dataclass(frozen=True)
class GraphLaunches:
    """cudaGraphLaunch (or an equivalent) calls and the kernels they replayed."""

    launches: int
    name: str  # the first launch call's name
    kernels_replayed: int


def graph_launches(m: Model) -> Optional[GraphLaunches]:
    cpu, dev = m.cpu, m.dev
    graph_ids = m.name_mask(lambda s: s in GRAPH_LAUNCHES)
    launches = np.flatnonzero(graph_ids[cpu.name] & (cpu.kind == RUNTIME))
    if not launches.size:
        return None
    is_graph = np.zeros(cpu.n, dtype=bool)
    is_graph[launches] = True
    linked = dev.launch >= 0
    replayed = int((linked & (dev.kind == KERNEL) & is_graph[np.maximum(dev.launch, 0)]).sum())
    return GraphLaunches(int(launches.size), m.names[cpu.name[launches[0]]], replayed)


def annotation_calls(m: Model, names) -> dict:
    """Every call of each annotation name (phases: ``decode`` in an LLM request), as spans."""
    cpu = m.cpu
    out = {}
    for name in names:
        if name in m.names:
            hits = np.flatnonzero((cpu.name == m.names.index(name)) & (cpu.kind == ANNOTATION))
            out[name] = tuple(Span(float(cpu.ts[i]), float(cpu.dur[i])) for i in hits.tolist())
    return out


# ----------------------------------------------------------------------------- copies


TINY_SHARE, TINY_SKIPPED = 0.1, 3  # at most 3 memsets or non-GEMM events under 10% of the copy between it and its GEMM


@dataclass(frozen=True)
class DtodBeforeGemm:
    """Memcpy DtoD events followed on their stream by a GEMM kernel (with at most a few memsets or tiny
    events between them: cuBLAS's 4-byte memset before a Hopper GEMM)."""

    copies: tuple  # Span of each copy
    median_bytes: Optional[float]
    median_us: float
    gemm: str  # the first copy's GEMM
    issued_by: tuple  # the first copy's launch and up to 4 of its ancestors, innermost first
    between: tuple = ()  # (name, memset?, bytes) of the events between the first copy and its GEMM


def dtod_before_gemm(m: Model) -> Optional[DtodBeforeGemm]:
    """None without such a pair (or without a device lane)."""
    if not m.has_gpu:
        return None
    dev, cpu = m.dev, m.cpu
    dtod = m.name_mask(lambda s: "DtoD" in s or "Device -> Device" in s)
    cand = np.flatnonzero((dev.kind == MEMCPY) & dtod[dev.name])
    if not cand.size:
        return None
    sid, _ = factorize(list(zip(dev.device.tolist(), dev.stream)))
    order = np.lexsort((dev.ts, sid))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    pairs = [(c, g, between) for c in cand.tolist()
             for g, between in [_gemm_after(m, order, sid, int(rank[c]), c)] if g is not None]
    if not pairs:
        return None
    c, g, between = pairs[0]
    chain = []
    if dev.launch[c] >= 0:
        p = int(dev.launch[c])
        chain.append(m.names[cpu.name[p]])
        p = int(cpu.parent[p])
        while p >= 0 and len(chain) < 5:
            chain.append(m.names[cpu.name[p]])
            p = int(cpu.parent[p])
    copies = [p[0] for p in pairs]
    byt = dev.bytes[copies]
    return DtodBeforeGemm(tuple(Span(float(dev.ts[i]), float(dev.dur[i])) for i in copies),
                          float(np.nanmedian(byt)) if np.isfinite(byt).any() else None,
                          float(np.median(dev.dur[copies])), m.names[dev.name[g]], tuple(chain),
                          tuple((m.names[dev.name[j]], bool(dev.kind[j] == MEMSET), float(dev.bytes[j]))
                                for j in between))


def _gemm_after(m: Model, order: np.ndarray, sid: np.ndarray, at: int, copy: int) -> tuple:
    """(the GEMM kernel that next runs on the copy's stream, the memsets and tiny events before it), or (None, ())."""
    dev, skipped = m.dev, []
    for j in order[at + 1:at + 2 + TINY_SKIPPED].tolist():
        if sid[j] != sid[copy]:
            break
        if dev.kind[j] == KERNEL and dev.category[j] == CATEGORY_CODES["gemm"]:
            return j, tuple(skipped)
        if dev.kind[j] != MEMSET and dev.dur[j] >= TINY_SHARE * dev.dur[copy]:
            break
        skipped.append(j)
    return None, ()


@dataclass(frozen=True)
class AddmmGemms:
    """GEMM kernels launched from inside an aten::addmm."""
    count: int
    names: tuple  # their kernel names, sorted
    spans: tuple = ()  # Span of each kernel


def addmm_gemms(m: Model) -> AddmmGemms:
    dev, cpu = m.dev, m.cpu
    if "aten::addmm" not in m.names:
        return AddmmGemms(0, ())
    addmm = m.names.index("aten::addmm")
    has_op = dev.op >= 0
    by_addmm = has_op & (cpu.name[np.where(has_op, dev.op, 0)] == addmm)
    gemms = np.flatnonzero(by_addmm & (dev.kind == KERNEL) & (dev.category == CATEGORY_CODES["gemm"]))
    return AddmmGemms(int(gemms.size), tuple(names_of(m, dev.name[gemms])), tuple(map(Span, dev.ts[gemms], dev.dur[gemms])))


# ----------------------------------------------------------------------------- torch.compile


@dataclass(frozen=True)
class CompileFrames:
    """torch.compile's own rows of the op table, by name: calls of each."""

    regions: dict  # "Torch-Compiled Region: K/M" -> calls
    hashes: dict  # CompiledFxGraph hash -> calls
    frames: dict  # TorchDynamo Cache Lookup, ... -> calls
    region_phase: dict  # region name -> the annotation (not ProfilerStep#N) its calls sit in most often, or None
    recompiled_calls: tuple  # Span of every call of a region K/M with M > 0
    self_us: float = 0.0  # the frames' own CPU time (regions, CompiledFxGraph, Dynamo's and AOT's), in the window


def compile_frames(m: Model, ops: tuple) -> Optional[CompileFrames]:
    """None when the trace holds no torch.compile frame."""
    by_name: dict[str, OpRow] = {o.name: o for o in ops}
    regions = {n: o.calls for n, o in by_name.items() if REGION.match(n)}
    hashes = {FXGRAPH.match(n).group(1): o.calls for n, o in by_name.items() if FXGRAPH.match(n)}
    frames = {n: o.calls for n, o in by_name.items() if n in COMPILE_FRAMES}
    self_us = sum(o.self_cpu_us for n, o in by_name.items() if REGION.match(n) or FXGRAPH.match(n) or n in COMPILE_FRAMES)
    if not (regions or hashes or frames):
        return None
    cpu = m.cpu
    region_phase = {}
    for name in regions:
        outer = m.enclosing(np.flatnonzero(cpu.name == m.names.index(name)), (ANNOTATION,))
        named = [m.names[cpu.name[i]] for i in outer.tolist() if i >= 0]
        named = [n for n in named if not STEP_RE.match(n)]
        region_phase[name] = max(set(named), key=named.count) if named else None
    ids = [i for i, n in enumerate(m.names) if n.startswith("Torch-Compiled Region: ") and not n.endswith("/0")]
    hits = np.flatnonzero(np.isin(cpu.name, ids))
    return CompileFrames(regions, hashes, frames, region_phase,
                         tuple(Span(float(cpu.ts[i]), float(cpu.dur[i])) for i in hits.tolist()), float(self_us))


def gpu_of_trace(m: Model) -> Gpu:
    """The GPU the trace's kernels ran on (its deviceProperties entry; the first when none ran)."""
    first = int(m.dev.device[0]) if m.dev.n else None
    return gpu_of(list(m.devices.values()), first)
