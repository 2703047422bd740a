"""Phases: one row per user annotation name (``record_function``), computed once from the model.

A phase is every call of one annotation (``prefill``, ``decode``, ``forward``, ``optimizer``...)
inside the profiled window: ProfilerStep#N and torch.compile's own frames are not phases. Per
phase: how many calls, their mean wall time (host side, start to end of the annotation), the
ops and kernels each call dispatches (everything nested in it on its thread, and the device work
those nested runtime calls launched, matched by correlation id), the device time of that work (in
all, per call on average, and the median, fastest and slowest call's), and how busy the GPU was while
the calls ran (the union of kernel/memcpy/memset intervals inside the calls' spans, over their
total span). A phase whose calls dispatch as many ops as another's but do far less work per call
is overhead-bound: the rules compare phases with these numbers.

The phases theme (:mod:`common.report.rules.phases`) reads one record besides the rows,
:class:`PhasesFacts` (``t.per_phase``): the span of every call of each phase, and the op chains the
lessons set side by side: per call of each phase, how many times a few named ops ran inside it.
The LLM lesson's variants differ in exactly these ops: its KV cache is written by ``aten::cat``
(a dynamic cache: every token, each layer's keys and values are copied into a new, longer tensor)
or by ``aten::index_copy_`` (a static cache: written in place into the preallocated tensor), and
its attention runs as one ``aten::scaled_dot_product_attention`` per layer (Part 3's 04_c) or as
``aten::bmm`` + ``aten::softmax`` (``--attn eager``: Part 3's 04_a chain). Counting them per call
is what the rules read; which op means what is the rules' business.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from common.report.findings import Span
from common.report.model.intervals import Intervals
from common.report.model.build import ANNOTATION, KERNEL, OP, RUNTIME, STEP_RE, Model

# What torch.compile records itself: its frames (annotations in some torch versions) and, while it
# compiles, its timers' ``..._data: compile_id=0/1`` annotations. Not the user's phases.
COMPILE_FRAME = re.compile(r"^(## Call CompiledFxGraph |Torch-Compiled Region: |TorchDynamo Cache Lookup$|"
                           r"AOTDispatcher Runtime Wrapper Prologue$|CompiledFunction$|Pregraph bytecode$)"
                           r"|compile_id=\d+/\d+")
GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
CHAIN_OPS = ("aten::cat", "aten::index_copy_", "aten::scaled_dot_product_attention", "aten::softmax", "aten::bmm",
             "aten::matmul")


@dataclass(frozen=True)
class Phase:
    name: str
    calls: int
    first_us: float  # start of the first call, relative to the window
    wall_us: float  # all calls together
    mean_us: float  # per call
    ops_per_call: float  # CPU ops nested in a call (aten:: and the rest of the cpu_op category)
    kernels_per_call: float  # kernels launched from inside a call
    launches_per_call: float  # runtime calls nested in a call that launched device work
    graph_launches_per_call: float  # cudaGraphLaunch (and HIP/driver equivalents) per call
    device_us: Optional[float]  # device time of the work launched from inside the calls; None on CPU-only traces
    device_us_per_call: Optional[float]
    gpu_busy_pct: Optional[float]  # GPU busy while the calls ran, % of their wall time; None on CPU-only traces
    # per call, the device time of the work it launched (by correlation id): median, fastest, slowest call
    device_median_us: Optional[float] = None
    device_low_us: Optional[float] = None
    device_high_us: Optional[float] = None

    def to_json(self) -> dict:
        return asdict(self)


def _is_phase_name(name: str) -> bool:
    return not STEP_RE.match(name) and not COMPILE_FRAME.search(name)


def subtree_ends(m: Model, idx: np.ndarray) -> np.ndarray:
    """For each CPU event in ``idx``: one past its last descendant (events are sorted by thread, then
    time, so the descendants follow it: every later event of its thread that starts before it ends)."""
    cpu = m.cpu
    out = np.empty(idx.size, dtype=np.int64)
    thread = cpu.thread
    bounds = np.flatnonzero(np.diff(thread)) + 1
    seg_start = np.concatenate(([0], bounds))
    seg_stop = np.concatenate((bounds, [cpu.n]))
    seg_of = np.searchsorted(seg_stop, idx, side="right")
    for s in np.unique(seg_of).tolist():
        sel = seg_of == s
        a, b = int(seg_start[s]), int(seg_stop[s])
        out[sel] = a + np.searchsorted(cpu.ts[a:b], cpu.end[idx[sel]], side="left")
    return np.maximum(out, idx + 1)


def calls_in_window(m: Model, name: str, kind: int) -> np.ndarray:
    """The CPU events of kind ``kind`` named ``name`` inside the window (every one, when the window is
    not made of ProfilerSteps), in lane order."""
    cpu = m.cpu
    if name not in m.names:
        return np.zeros(0, dtype=np.int64)
    sel = (cpu.kind == kind) & (cpu.name == m.names.index(name))
    if m.window_source == "ProfilerStep":
        sel &= cpu.step >= 0
    return np.flatnonzero(sel)


def _prefix(values: np.ndarray) -> np.ndarray:
    return np.concatenate(([0.0], np.cumsum(values, dtype=np.float64)))


def phase_table(m: Model, gpu_busy: Intervals) -> list[Phase]:
    """Every phase of the window, in the order of their first call (``gpu_busy``: the union of the device work)."""
    cpu, dev = m.cpu, m.dev
    keep = m.name_mask(_is_phase_name)
    sel = (cpu.kind == ANNOTATION) & keep[cpu.name]
    if m.window_source == "ProfilerStep":
        sel &= cpu.step >= 0
    idx = np.flatnonzero(sel)
    if not idx.size:
        return []
    hi = subtree_ends(m, idx)
    n = cpu.n
    ops = _prefix(cpu.kind == OP)
    launched = dev.launch >= 0
    kernels = _prefix(np.bincount(dev.launch[launched & (dev.kind == KERNEL)], minlength=n))
    device = _prefix(np.bincount(dev.launch[launched], weights=dev.dur[launched], minlength=n))
    launching = np.zeros(n, dtype=bool)
    launching[dev.launch[launched]] = True
    launches = _prefix(launching & (cpu.kind == RUNTIME))
    graph = _prefix(m.name_mask(lambda s: s in GRAPH_LAUNCHES)[cpu.name] & (cpu.kind == RUNTIME))
    busy = np.asarray(gpu_busy.covered(cpu.ts[idx], cpu.end[idx]), dtype=np.float64) \
        if m.has_gpu else np.zeros(idx.size)

    def inside(prefix: np.ndarray) -> np.ndarray:  # per call: the sum over its descendants
        return prefix[hi] - prefix[idx + 1]

    per_call = dict(ops=inside(ops), kernels=inside(kernels), device=inside(device), launches=inside(launches),
                    graph=inside(graph))
    names = cpu.name[idx]
    rows = []
    for nid in np.unique(names).tolist():
        mine = names == nid
        calls = int(mine.sum())
        wall = float(cpu.dur[idx[mine]].sum())
        dev_us = float(per_call["device"][mine].sum()) if m.has_gpu else None
        each = per_call["device"][mine]
        rows.append(Phase(
            name=m.names[nid], calls=calls, first_us=float(cpu.ts[idx[mine]].min()), wall_us=wall,
            mean_us=wall / calls, ops_per_call=float(per_call["ops"][mine].mean()),
            kernels_per_call=float(per_call["kernels"][mine].mean()),
            launches_per_call=float(per_call["launches"][mine].mean()),
            graph_launches_per_call=float(per_call["graph"][mine].mean()),
            device_us=dev_us, device_us_per_call=dev_us / calls if dev_us is not None else None,
            gpu_busy_pct=(100.0 * float(busy[mine].sum()) / wall if wall > 0 else 0.0) if m.has_gpu else None,
            **(dict(device_median_us=float(np.median(each)), device_low_us=float(each.min()),
                    device_high_us=float(each.max())) if m.has_gpu else {}),
        ))
    rows.sort(key=lambda r: r.first_us)
    return rows


@dataclass(frozen=True)
class PhasesFacts:
    """What the phases rules read besides the phase rows."""

    spans: dict  # {phase name: (Span of each call)}
    chains: dict  # {phase: {op: calls per call}} for the ops of CHAIN_OPS


def phases_facts(m: Model, phase_names) -> PhasesFacts:
    """The phases theme's record of one model, for the phases of the phase table."""
    return PhasesFacts(spans=annotation_calls(m, phase_names), chains=phase_chains(m, phase_names))


def annotation_calls(m: Model, names) -> dict:
    """Every call of each annotation name (phases: ``decode`` in an LLM request), as spans."""
    cpu = m.cpu
    out = {}
    for name in names:
        if name in m.names:
            hits = np.flatnonzero((cpu.name == m.names.index(name)) & (cpu.kind == ANNOTATION))
            out[name] = tuple(map(Span, cpu.ts[hits].tolist(), cpu.dur[hits].tolist()))
    return out


def phase_chains(m: Model, phase_names) -> dict[str, dict[str, float]]:
    """{phase: {op: calls per call of the phase}} for the ops of :data:`CHAIN_OPS` nested in the
    phase's calls on their thread (only the ops that ran; phases with none are left out)."""
    cpu = m.cpu
    ids = {m.names.index(op): op for op in CHAIN_OPS if op in m.names}
    if not ids:
        return {}
    is_op = cpu.kind == OP
    running = {op: np.concatenate(([0], np.cumsum(is_op & (cpu.name == nid)))) for nid, op in ids.items()}
    out = {}
    for phase in phase_names:
        idx = calls_in_window(m, phase, ANNOTATION)
        if not idx.size:
            continue
        ends = subtree_ends(m, idx)
        counts = {op: int((seen[ends] - seen[idx + 1]).sum()) for op, seen in running.items()}
        per_op = {op: n / idx.size for op, n in counts.items() if n}
        if per_op:
            out[phase] = per_op
    return out
