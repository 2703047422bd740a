"""Memory-bound kernels by bytes per second: the least their work must move, over the time it took.

A copy, a fill, an elementwise, softmax or norm kernel does a few FLOPs per byte (:func:`.regime.memory_class`):
its rate is in bytes per second, against the card's memory bandwidth (:mod:`~common.report.model.peaks`). The
bytes are a floor (:class:`MemoryRate`), from what the trace or the workload says:

- a device-to-device ``Memcpy``: its own ``bytes``, read and then written: twice them (Kineto's ``memory
  bandwidth (GB/s)`` argument counts them once); a ``Memset``: its bytes, written once;
- a kernel: the least bytes of the op it serves, each input read once and each output written once, by the
  op's own recorded shapes (``record_shapes``: :mod:`.op_bytes`, one row per op and bytes a call), else by the
  workload's own count (:mod:`common.work`, per annotation and op) or, for a lesson's trace written before the
  count, the rows :func:`.knob_work.legacy_memory_ops` says it would hold. The op is the innermost op around
  the kernel's launch whose bytes are known; an in-place ``aten::X_`` run inside its out-of-place ``aten::X``
  (``masked_fill`` copies, then fills in place) takes ``aten::X``'s bytes: it reads and writes tensors of the
  same sizes. The op's calls in the steps must be the count's (one call of ``step()`` a step), each must have
  launched memory work, and an op call's device work must all be memory kernels (no GEMM, no copy of its own
  bytes): else the bytes cannot be laid on its kernels, and the op is left out.

A kernel that reads more than once (a broadcast mask, a reduction's two passes) moves more than the floor,
so the rate and its share of the bandwidth are lower bounds. A rate above the bandwidth (data the L2 cache
served) says nothing about the device memory: that row is left out. Numbers only (:mod:`~common.report.rules.bandwidth`
words them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.facts import workload
from common.report.facts.header import gpu_of_trace
from common.report.facts.knob_work import legacy_memory_ops
from common.report.facts.regime import memory_class
from common.report.facts.op_bytes import memory_bytes
from common.report.load.shapes import ATTENTION_OPS, GEMM_OPS, MEMORY_OPS
from common.report.model.build import ANNOTATION, KERNEL, MEMCPY, OP, Model
from common.report.model.peaks import peak_of


@dataclass(frozen=True)
class MemoryRate:
    """One row: the memory kernels of one op (or one kind of copy), their floor of bytes and their time."""

    kernel: str  # the device event's name (the most common one where the op ran several)
    kernels: int  # how many distinct names the row holds
    op: str  # the op the bytes are of; a copy's: the op that launched it
    annotation: Optional[str]  # the count's annotation the op ran in (None: per step, or not said)
    source: str  # "record_shapes", "count" (the workload's), "knobs" (a trace before the count), "copy" (its own)
    events: int  # device events
    bytes: int  # their floor of bytes, all events
    time_us: float  # their device time, all events
    pct_of_bandwidth: Optional[float]  # the rate over the card's memory bandwidth, %

    @property
    def gbs(self) -> float:
        return self.bytes / self.time_us / 1e3


@dataclass(frozen=True)
class BandwidthFacts:
    """The memory-bound kernels' rates (:class:`MemoryRate`, by time), and the card they are held to."""

    rows: tuple = ()
    bandwidth_gbs: Optional[float] = None  # the card's memory bandwidth (datasheet), GB/s
    card: Optional[str] = None  # the datasheet row (``H100 SXM``)
    memory_us: float = 0.0  # device time of all memory work in the steps
    device_us: float = 0.0  # all device time in the steps


def bandwidth_facts(m: Model) -> BandwidthFacts:
    """The memory kernels' rates of a GPU trace; an empty record elsewhere."""
    if not m.has_gpu or not m.steps:
        return BandwidthFacts()
    dev = m.dev
    in_step = dev.step >= 0
    memory = in_step & _memory_events(m)
    peak = peak_of(gpu_of_trace(m).name)
    bandwidth = peak.memory_gbs if peak is not None else None
    rows = [r for r in _kernel_rows(m, memory, bandwidth) + _copy_rows(m, memory, bandwidth)
            if r.time_us > 0 and r.bytes > 0 and (bandwidth is None or r.gbs <= bandwidth)]
    rows.sort(key=lambda r: -r.time_us)
    return BandwidthFacts(tuple(rows), bandwidth, peak.device if peak is not None else None,
                          float(dev.dur[memory].sum()), float(dev.dur[in_step].sum()))


def _memory_events(m: Model) -> np.ndarray:
    """Per device event: memory work (:func:`.regime.memory_class`), each (name, kind) pair classed once."""
    dev = m.dev
    key = dev.name.astype(np.int64) * 256 + dev.kind.astype(np.int64)
    pairs, at = np.unique(key, return_inverse=True)
    classed = np.array([memory_class(m.names[p // 256], p % 256) for p in pairs.tolist()], dtype=bool)
    return classed[at]


def _pct(gbs: float, bandwidth: Optional[float]) -> Optional[float]:
    return 100.0 * gbs / bandwidth if bandwidth else None


# ----------------------------------------------------------------------------- copies: the event's own bytes


def _copy_rows(m: Model, memory: np.ndarray, bandwidth: Optional[float]) -> list:
    """A device-to-device memcpy's bytes read and written, a memset's written, per (name, launching op)."""
    dev = m.dev
    groups: dict = {}
    for i in np.flatnonzero(memory & (dev.kind != KERNEL) & (dev.bytes > 0)).tolist():
        name = m.names[dev.name[i]]
        if dev.kind[i] == MEMCPY and not _device_to_device(name):
            continue  # host <-> device: the link's bandwidth, not the device memory's
        times = 2 if dev.kind[i] == MEMCPY else 1
        op = m.names[m.cpu.name[dev.op[i]]] if dev.op[i] >= 0 else "?"
        events, nbytes, time = groups.get((name, op), (0, 0, 0.0))
        groups[(name, op)] = (events + 1, nbytes + times * int(dev.bytes[i]), time + float(dev.dur[i]))
    return [MemoryRate(name, 1, op, None, "copy", events, nbytes, time, _pct(nbytes / time / 1e3, bandwidth))
            for (name, op), (events, nbytes, time) in groups.items() if time > 0]


def _device_to_device(name: str) -> bool:
    return "DtoD" in name or "Device -> Device" in name


# ----------------------------------------------------------------------------- kernels: the op's bytes


def _op_table(m: Model) -> tuple[dict, str]:
    """{(annotation, op): (calls, bytes)} per step (one call of ``step()``), of the count's ops that move memory (no
    GEMM, no attention), and where they come from (``count`` or ``knobs``)."""
    knobs = m.knobs
    rows = [r for r in ((knobs.work or {}).get("ops") or () if knobs is not None else ()) if workload.valid_row(r)]
    source = "count"
    if not rows:
        rows, source = list(legacy_memory_ops(knobs)), "knobs"
    table: dict = {}
    for r in rows:
        if r["op"] in GEMM_OPS or r["op"] in ATTENTION_OPS or r.get("attention"):
            continue
        calls, nbytes = table.get((r["annotation"], r["op"]), (0, 0))
        n = int(r["calls"])
        table[(r["annotation"], r["op"])] = (calls + n, nbytes + (int(r["read"]) + int(r["written"])) * n)
    return table, source


def _in_place(table: dict) -> dict:
    """{(annotation, ``aten::X_``): its out-of-place ``aten::X``'s (calls, bytes)}, where the table lists
    ``aten::X`` alone: on a GPU ``aten::X`` may run as a copy and then ``aten::X_`` (out-of-place
    ``masked_fill``), whose kernel reads and writes tensors of the same sizes."""
    return {(a, op + "_"): v for (a, op), v in table.items() if not op.endswith("_") and (a, op + "_") not in table}


def _annotations(m: Model, names: set) -> np.ndarray:
    """Per CPU event: the name id of the innermost annotation around it (itself included) whose name is in
    ``names``, -1 where none."""
    cpu = m.cpu
    ids = m.name_mask(lambda s: s in names)
    out = np.where((cpu.kind == ANNOTATION) & ids[cpu.name], cpu.name, -1).astype(np.int64)
    for level in range(1, int(cpu.max_depth) + 1):  # parents before children
        rows = np.flatnonzero((cpu.depth == level) & (cpu.parent >= 0) & (out < 0))
        out[rows] = out[cpu.parent[rows]]
    return out


def _served_ops(m: Model, table: dict, in_place: dict) -> np.ndarray:
    """Per CPU event: the index of the table's key whose bytes are its own, where it is an op in the steps the
    table holds (an in-place ``aten::X_`` inside ``aten::X``: ``aten::X``'s), else -1."""
    cpu = m.cpu
    keys = list(table)
    per_step = all(a is None for a, _ in keys)
    ann = np.full(cpu.n, -1, np.int64) if per_step else _annotations(m, {a for a, _ in keys if a is not None})
    index = {k: i for i, k in enumerate(keys)}
    out = np.full(cpu.n, -1, np.int64)
    names = {op for _, op in keys}
    wanted = m.name_mask(lambda s: s in names)
    for i in np.flatnonzero((cpu.kind == OP) & wanted[cpu.name] & (cpu.step >= 0)).tolist():
        key = (None if ann[i] < 0 else m.names[ann[i]], m.names[cpu.name[i]])
        if key in index and (key not in in_place or _inside_named(m, i, key[1][:-1])):
            out[i] = index[key]
    return out


def _inside_named(m: Model, i: int, name: str) -> bool:
    """Whether CPU event ``i`` sits inside an op called ``name``."""
    cpu, p = m.cpu, m.cpu.parent[i]
    while p >= 0:
        if cpu.kind[p] == OP and m.names[cpu.name[p]] == name:
            return True
        p = cpu.parent[p]
    return False


def _owner(m: Model, served: np.ndarray) -> np.ndarray:
    """Per device event: the innermost CPU event around its launch that ``served`` marks, else -1."""
    cpu = m.cpu
    owner = m.dev.op.copy()
    for _ in range(int(cpu.max_depth) + 1):  # climb to the served op around each launch
        climb = (owner >= 0) & (served[np.maximum(owner, 0)] < 0)
        if not climb.any():
            break
        owner[climb] = cpu.parent[owner[climb]]
    return owner


@dataclass(frozen=True)
class _Unit:
    """The op calls whose bytes one row says: the op, its annotation, where its bytes come from, their floor in
    all, and how many calls the trace must hold for that floor to be theirs (None: each call's own)."""

    op: str
    annotation: Optional[str]
    source: str
    bytes: int
    calls: Optional[int]


def _count_units(m: Model) -> tuple[np.ndarray, list]:
    """Per CPU event, its unit (index, -1: none), and the units: the count's ops (or the knobs'), one per
    annotation and op, their calls a step times the steps."""
    table, source = _op_table(m)
    if not table or m.window_source != "ProfilerStep":  # the count is one call of step(): one ProfilerStep
        return np.full(m.cpu.n, -1, np.int64), []
    in_place = _in_place(table)
    table = {**table, **in_place}
    steps = len(m.steps)
    units = [_Unit(op, a, source, nbytes * steps, calls * steps) for (a, op), (calls, nbytes) in table.items()]
    return _served_ops(m, table, in_place), units


def _shape_units(m: Model) -> tuple[np.ndarray, list]:
    """Per CPU event, its unit, and the units: the memory ops in the steps whose record_shapes give their bytes,
    one per op and bytes a call."""
    cpu = m.cpu
    served = np.full(cpu.n, -1, np.int64)
    index: dict = {}
    memory_op = m.name_mask(MEMORY_OPS.__contains__)[cpu.name]
    for i in np.flatnonzero((cpu.kind == OP) & (cpu.step >= 0) & memory_op).tolist():
        nbytes = memory_bytes(m.names[cpu.name[i]], cpu.shapes[i])
        if nbytes:
            key = (m.names[cpu.name[i]], nbytes)
            served[i] = index.setdefault(key, len(index))
    units = [None] * len(index)
    for (op, nbytes), k in index.items():
        units[k] = _Unit(op, None, "record_shapes", nbytes * int((served == k).sum()), None)
    return served, units


def _kernel_rows(m: Model, memory: np.ndarray, bandwidth: Optional[float]) -> list:
    """One row per unit (:func:`_shape_units`, else :func:`_count_units`) whose calls are all there and launched
    memory kernels alone."""
    served, units = _shape_units(m)
    if not units:
        served, units = _count_units(m)
    owner = _owner(m, served)
    dev = m.dev
    mine = (owner >= 0) & (dev.step >= 0)
    clean_kernel = memory & (dev.kind == KERNEL)
    spoiled = set(owner[mine & ~clean_kernel].tolist())  # a call that also ran a GEMM, or a copy of its own bytes
    out = []
    for k, unit in enumerate(units):
        calls = np.flatnonzero(served == k)
        events = np.flatnonzero(mine & np.isin(owner, calls))
        launched = set(owner[events].tolist())
        if (not calls.size or (unit.calls is not None and calls.size != unit.calls)
                or spoiled & set(calls.tolist()) or launched != set(calls.tolist())):
            continue
        names = Counter(dev.name[events].tolist())
        time = float(dev.dur[events].sum())
        out.append(MemoryRate(m.names[names.most_common(1)[0][0]], len(names), unit.op, unit.annotation, unit.source,
                              int(events.size), unit.bytes, time, _pct(unit.bytes / time / 1e3, bandwidth)))
    return out
