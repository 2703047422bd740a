"""torch.compile's own frames and CUDA graph replays, as the trace shows them: the regions
(``Torch-Compiled Region: K/M``), the compiled graphs (``## Call CompiledFxGraph <hash> ##``), Dynamo's
and AOTAutograd's frames, and the graph launches with the kernels they replayed. Read by several rule
themes (compile, gemm, hand_written and the advice), so they are general tables (``t.compile``,
``t.graph_launches``), not one theme's record."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.facts.phases import GRAPH_LAUNCHES
from common.report.facts.rows import OpRow
from common.report.findings import Span
from common.report.model.build import ANNOTATION, KERNEL, RUNTIME, STEP_RE, Model

REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")
FXGRAPH = re.compile(r"^## Call CompiledFxGraph (\S+) ##$")
COMPILE_FRAMES = ("TorchDynamo Cache Lookup", "AOTDispatcher Runtime Wrapper Prologue", "CompiledFunction",
                  "Pregraph bytecode")


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


def graph_replays(m: Model) -> np.ndarray:
    """Per device event, the graph launch (a CPU row: ``cudaGraphLaunch`` or an equivalent, in the window)
    that replayed it, or -1. A replayed kernel carries its graph launch's correlation id; a kernel that
    carries no id at all counts as replayed by the last graph launch that started before it,
    while the next one has not started (a kernel launched on its own carries its launch's id, so inside a
    graph launch's time window an untied kernel is the graph's; a GPU that lags the host by more than a
    graph's run blurs which launch, not whether a graph replayed it). A kernel whose id no runtime call holds was
    launched before the window (the model's ``outside``): no graph launch of the window replayed it."""
    cpu, dev = m.cpu, m.dev
    out = np.full(dev.n, -1, dtype=np.int64)
    graph_ids = m.name_mask(lambda s: s in GRAPH_LAUNCHES)
    launches = np.flatnonzero(graph_ids[cpu.name] & (cpu.kind == RUNTIME)) if cpu.n else np.zeros(0, np.int64)
    if m.window_source == "ProfilerStep":
        launches = launches[cpu.step[launches] >= 0]
    if not launches.size:
        return out
    is_graph = np.zeros(cpu.n, dtype=bool)
    is_graph[launches] = True
    tied = dev.launch >= 0
    by_id = tied & is_graph[np.maximum(dev.launch, 0)]
    out[by_id] = dev.launch[by_id]
    launches = launches[np.argsort(cpu.ts[launches], kind="stable")]
    untied = np.flatnonzero(~tied & ~dev.outside & (dev.kind == KERNEL))
    at = np.searchsorted(cpu.ts[launches], dev.ts[untied], side="right") - 1
    hit = at >= 0
    out[untied[hit]] = launches[at[hit]]
    return out


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
