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
