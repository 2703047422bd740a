"""Model: steps, the CPU call tree, the device lanes, kernel <-> launch correlation.

:func:`build` makes it from the loaded columns in named steps: impossible values out
(:mod:`.impossible`), the host steps and the window, the CPU lane with its call tree, the device
lane with each event's launch, op and category. Then :mod:`~common.report.facts.tables` computes, once, every number
the rules and renderers read (:func:`common.report.tables_of` runs load, model and tables). The
model holds numpy columns (``m.cpu.ts``, ``m.dev.name``: :mod:`.lanes`), so no Python loop runs per event.

Times are microseconds relative to the window's start (``t0``) unless a name says otherwise.
"""

from __future__ import annotations

import os
import re
from functools import cached_property
from dataclasses import dataclass
from typing import Optional
import time

import numpy as np

from common.errors import fail
from common.knobs import RunKnobs
from common.printable import printable
from common.report.model import names as trace_names
from common.report.load.columns import Columns, Group
from common.report.load.inputs import shorten
from common.report.model.lanes import CpuLane, DeviceLane, MemoryLane
from common.report.model.lane_order import lane_order
from common.report.load.reader import Loaded
from common.report.model.impossible import (drop_impossible, drop_impossible_memory, drop_impossible_shapes,
                                            sane_device_properties)


# CPU event kinds (``m.cpu.kind``)
OP, ANNOTATION, RUNTIME, PYTHON = 0, 1, 2, 3
# device event kinds (``m.dev.kind``)
KERNEL, MEMCPY, MEMSET = 0, 1, 2

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
SYNC_NAMES = frozenset({"cudaDeviceSynchronize", "hipDeviceSynchronize"})
BREAKDOWN_KEYS = ("kernel", "memcpy", "memset", "runtime", "dataloader", "cpu_exec", "other")
CATEGORY_CODES = {c: i for i, c in enumerate(trace_names.CATEGORIES)}  # ``m.dev.category`` holds these
CATEGORY_KEYS = tuple(CATEGORY_CODES)  # code -> category


@dataclass(frozen=True)
class Step:
    name: str
    number: Optional[int]
    start: float  # relative to t0
    dur: float
    tid: object = None

    @property
    def end(self) -> float:
        return self.start + self.dur


@dataclass(frozen=True, eq=False)
class Model:
    """The trace as lanes and steps, every field filled where :func:`build` makes it; nothing writes
    into it afterwards (:mod:`~common.report.facts.tables` computes the numbers into a :class:`~common.report.facts.tables.Tables`)."""

    path: str
    size_bytes: int
    file_bytes: int
    n_events: int
    meta: dict
    knobs: Optional[RunKnobs]  # what the lesson that wrote this trace did (warm-up, compile, schedule); None for other traces
    notes: tuple  # str
    t0: float  # absolute µs of the window's start
    window: tuple  # (start, end) relative
    window_source: str  # "ProfilerStep" | "all events"
    steps: tuple  # tuple[Step]: the host-side steps (the CPU lane's ProfilerStep#N)
    names: tuple  # name id -> str
    cpu: CpuLane  # CPU events (sorted by thread, then time) with their call tree
    dev: DeviceLane  # device events (kernel/memcpy/memset) with their launch, op and category
    mem: MemoryLane  # the [memory] events (allocations and frees), by time
    gpu_annotations: tuple  # (name, start, dur)
    overheads: tuple  # (name, start, dur, pid, tid)
    devices: dict  # device id -> deviceProperties entry
    generated: tuple = ()  # the compiled modules copied beside the trace (common.inductor_source.CompiledModule)

    @property
    def has_gpu(self) -> bool:
        return self.dev.n > 0

    @property
    def window_us(self) -> float:
        return self.window[1] - self.window[0]

    @cached_property  # read by every rule that points somewhere: one pass over the device lane, once
    def spans_window(self) -> tuple:
        """Where a finding may point: the window, to the end of the device work its steps launched (on a
        device-bound run the GPU runs on after the host's last step: its copies and kernels are the steps' own)."""
        dev = self.dev
        mine = dev.step >= 0
        end = float((dev.ts[mine] + dev.dur[mine]).max()) if mine.any() else self.window[1]
        return self.window[0], max(self.window[1], end)

    def ids_where(self, pred) -> np.ndarray:
        """Name ids whose name satisfies ``pred`` (called once per distinct name)."""
        return np.fromiter((i for i, n in enumerate(self.names) if pred(n)), dtype=np.int64)

    def name_mask(self, pred) -> np.ndarray:
        m = np.zeros(len(self.names), dtype=bool)
        m[self.ids_where(pred)] = True
        return m

    def step_of(self, t) -> np.ndarray:
        """Index of the step holding each time ``t`` (relative), -1 outside every step."""
        return step_index(self.steps, t)

    def step_label(self, i: int) -> str:
        s = self.steps[i]
        return f"#{s.number}" if s.number is not None else s.name

    def enclosing(self, idx: np.ndarray, want=(OP,)) -> np.ndarray:
        """The innermost ancestor of each CPU event ``idx`` whose kind is in ``want`` (-1 where none)."""
        return innermost_ancestor(self.cpu.parent, self.cpu.kind, self.cpu.max_depth, idx, want)


def build(loaded: Loaded) -> Model:
    """The model of a loaded trace: steps, lanes, tree and correlation (the numbers come after, from
    :func:`common.report.facts.tables.build_tables`)."""
    _tick("model")
    columns, notes = drop_impossible(loaded.columns)
    columns, shape_notes = drop_impossible_shapes(columns)
    steps, t0, t1, source, step_notes = _host_steps(columns, loaded.path)
    cpu, tree_notes = _cpu_lane(columns, t0, steps)
    devices, device_notes = _devices(loaded.meta)
    dev = _device_lane(columns, t0, cpu, steps, devices)
    mem, memory_notes = drop_impossible_memory(_memory_lane(columns.memory, columns.memory_tids, t0, cpu),
                                                devices, t0)
    names = tuple(columns.names)
    gpu_annotations = tuple((n, ts - t0, dur) for n, ts, dur in columns.gpu_annotations)
    overheads = tuple((n, ts - t0, dur, pid, tid) for n, ts, dur, pid, tid in columns.overheads)
    del columns  # the per-event columns: the lanes hold what is read from here on
    drawn = _findings_track_events(loaded.meta)
    drawn_notes = [f"this copy of the trace holds the report's Findings track ({drawn} events): left out of every "
                   "figure"] if drawn else []
    model = Model(
        path=printable(loaded.path), size_bytes=loaded.size_bytes, file_bytes=loaded.file_bytes,
        n_events=loaded.n_events - drawn, meta=loaded.meta, knobs=loaded.knobs,
        notes=tuple(loaded.notes) + tuple(notes + shape_notes + step_notes + tree_notes + device_notes + drawn_notes)
        + tuple(memory_notes), t0=t0,
        window=(0.0, t1 - t0), window_source=source, steps=steps, names=names, cpu=cpu, dev=dev, mem=mem,
        gpu_annotations=gpu_annotations, overheads=overheads, devices=devices, generated=loaded.generated,
    )
    _tick("model built")
    return model


# ----------------------------------------------------------------------------- steps and the window


def _findings_track_events(meta: dict) -> int:
    """How many events the report's own Findings track added to an annotated copy (0 for other traces).
    Its slices have the category "finding", which no figure reads."""
    drawn = meta.get("report_findings")
    if isinstance(drawn, dict) and isinstance(drawn.get("events"), int) and drawn["events"] >= 0:
        return drawn["events"]
    return 0


def _host_steps(c: Columns, path: str) -> tuple[tuple[Step, ...], float, float, str, list[str]]:
    """(steps, t0, t1, window source, notes): the CPU lane's ProfilerStep#N events (each once, in time
    order, overlaps cut at the next step's start), else one window spanning every event."""
    cpu_rows = c.cpu_rows
    step_numbers = {i: int(m.group(1)) for i, n in enumerate(c.names) if (m := STEP_RE.match(n))}
    found = []
    if step_numbers:
        ops_or_annotations = cpu_rows[c.group[cpu_rows] <= Group.ANNOTATION]
        rows = ops_or_annotations[np.isin(c.name[ops_or_annotations], np.fromiter(step_numbers, np.int64))]
        seen = set()
        for i in rows[np.argsort(c.ts[rows], kind="stable")].tolist():
            key = (int(c.name[i]), float(c.ts[i]))
            if key not in seen:
                seen.add(key)
                thread = int(c.thread[np.searchsorted(cpu_rows, i)])
                found.append((c.names[c.name[i]], step_numbers[int(c.name[i])], float(c.ts[i]), float(c.dur[i]),
                              thread))
    if not found:
        bound = np.flatnonzero(c.group != Group.TRACE)  # everything but the profiler's own span bounds the window
        if not bound.size:
            fail(f"{shorten(path)}: the trace holds no complete events (ph \"X\"): nothing to analyse")
        t0, t1 = float(c.ts[bound].min()), float((c.ts[bound] + c.dur[bound]).max())
        return (Step("window", None, 0.0, t1 - t0),), t0, t1, "all events", []
    t0 = found[0][2]
    starts = [ts - t0 for _, _, ts, _, _ in found]
    durs = [dur for _, _, _, dur, _ in found]
    cut = 0
    for i in range(len(found) - 1):
        if starts[i] + durs[i] > starts[i + 1]:
            durs[i], cut = starts[i + 1] - starts[i], cut + 1
    steps = tuple(Step(name, number, start, dur, thread)
                  for (name, number, _, _, thread), start, dur in zip(found, starts, durs))
    notes = [f"{cut} ProfilerStep(s) overlapped the next one: each cut where the next starts"] if cut else []
    return steps, t0, max(s[2] + s[3] for s in found), "ProfilerStep", notes


def step_index(steps, t) -> np.ndarray:
    """Index of the step holding each time ``t`` (relative), -1 outside every step."""
    t = np.asarray(t, dtype=np.float64)
    if not steps:
        return np.full(t.shape, -1, dtype=np.int64)
    starts = np.array([s.start for s in steps])
    ends = np.array([s.end for s in steps])
    i = np.searchsorted(starts, t, side="right") - 1
    ok = (i >= 0) & (t <= ends[np.maximum(i, 0)])
    return np.where(ok, i, -1)


def _device_steps(steps, ts: np.ndarray, launch: np.ndarray, outside: np.ndarray, cpu: CpuLane) -> np.ndarray:
    """Each device event's step: its launch's (by the launch's start); none for work launched outside the
    trace (before the profiled window: a kernel the warm-up step launched that runs in the first step is
    not that step's); its own start's only where the trace ties no device event to a launch."""
    if not ts.size:
        return np.empty(0, np.int64)
    when = np.where(launch >= 0, cpu.ts[np.maximum(launch, 0)], ts) if cpu.n else ts
    return np.where(outside, -1, step_index(steps, when))


def _launched_outside(dev_corr: np.ndarray, launch: np.ndarray, cpu: CpuLane) -> np.ndarray:
    """Per device event: it has a correlation id, the trace ties device events to launches, and none of the
    trace's runtime calls has that id (the launch came before the window, or its thread was not traced)."""
    correlates = bool((launch >= 0).any())
    return (dev_corr >= 0) & (launch < 0) & correlates


# ----------------------------------------------------------------------------- the CPU lane


def _cpu_lane(c: Columns, t0: float, steps) -> tuple[CpuLane, list[str]]:
    """The CPU events sorted by (thread, start, longest first), with their call tree, self times and steps."""
    rows = c.cpu_rows
    kind = np.array([OP, ANNOTATION, RUNTIME, PYTHON], dtype=np.int8)[c.group[rows]]
    ts, dur, name, thread, corr = c.ts[rows] - t0, c.dur[rows], c.name[rows], c.thread, c.corr
    order = lane_order(ts, dur, thread)  # np.lexsort((-dur, ts, thread)), faster
    kind, ts, dur, name, thread, corr, shapes = (a[order] for a in (kind, ts, dur, name, thread, corr, c.op_shapes))
    end, parent, depth, cut = _nested_tree(ts, ts + dur, thread, kind == PYTHON)
    dur = end - ts
    has_parent = parent >= 0
    children = np.bincount(parent[has_parent], weights=dur[has_parent], minlength=rows.size)
    notes = [f"{cut:,} CPU event(s) overlapped an event without nesting in it (a clock glitch, or the Python "
             "tracer's call that opens a record_function range, with_stack): each pair cut where it loses "
             "less time, so that no thread holds more time than it ran"] if cut else []
    return CpuLane(n=rows.size, kind=kind, ts=ts, dur=dur, end=end, name=name, thread=thread, corr=corr,
                   parent=parent, depth=depth, self_us=np.maximum(dur - children, 0.0), threads=tuple(c.threads),
                   step=step_index(steps, ts), max_depth=int(depth.max(initial=0)), shapes=shapes), notes


def _nested_tree(ts: np.ndarray, end: np.ndarray, thread: np.ndarray, python: np.ndarray):
    """(ends, parent, depth, how many events were cut): the call tree, once every event that starts inside
    another and ends after it is made to nest. Two writers do that: a clock glitch (the child overhangs its
    parent's end by a little), and torch's Python tracer (``with_stack``), whose call that opens a
    ``record_function`` range (``_record_function_enter_new``, and the Python frames around it) returns a
    few µs after the range began (and the call that closes it begins inside it). Where a Python event
    (``python``: a mask) overhangs an op or a range, the Python event is cut, at the other's start or end
    (else a 150 µs annotation would shrink to the 2 µs of the call that opened it); between two of a kind,
    the end that loses less time: the child at its parent's end (a glitch), or the parent at the child's start."""
    parent, depth = call_tree(ts, end, thread)
    cut = np.zeros(ts.size, dtype=bool)
    for _ in range(64):  # each pass settles at least one more level; most traces need none
        up = np.maximum(parent, 0)
        if not ((parent >= 0) & (ts < end[up]) & (end > end[up])).any():
            break
        end = end.copy()
        for level in range(1, int(depth.max(initial=0)) + 1):  # parents first, so cuts carry down
            at = np.flatnonzero((depth == level) & (parent >= 0))
            up = parent[at]
            parent_end = end[up]
            over = (ts[at] < parent_end) & (end[at] > parent_end)  # starts inside its parent, ends after it
            child_loses = end[at] - parent_end
            parent_loses = parent_end - ts[at]
            by_kind = python[up] != python[at]  # a Python event against an op or range: the Python event is cut
            cut_child = over & np.where(by_kind, python[at], child_loses <= parent_loses)
            cut_parent = over & ~cut_child
            cut[at[cut_child]] = True
            end[at[cut_child]] = parent_end[cut_child]
            cut[up[cut_parent]] = True
            np.minimum.at(end, up[cut_parent], ts[at[cut_parent]])  # a parent overhung by several children
        parent, depth = call_tree(ts, end, thread)
    return end, parent, depth, int(cut.sum())


def call_tree(ts: np.ndarray, end: np.ndarray, thread: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parent index and depth of every event; events sorted by (thread, ts, -dur).

    Within a thread, the events that started before event i and had not ended by its start
    are its ancestors, so depth_i = i - #(events ended by ts_i); the parent is the latest
    earlier event one level up.
    """
    n = ts.size
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    if not n:
        return parent, depth
    bounds = np.flatnonzero(np.diff(thread)) + 1
    for a, b in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [n]))):
        t = ts[a:b]
        e = np.maximum(end[a:b], t + 1e-6)  # zero-length events end after they start
        d = np.maximum(np.arange(b - a) - np.searchsorted(np.sort(e), t, side="right"), 0)
        depth[a:b] = d
        by_depth = np.argsort(d.astype(np.int16) if d.max() < 2**15 else d, kind="stable")  # each level's, ascending
        cuts = np.searchsorted(d[by_depth], np.arange(int(d.max()) + 2))
        by_level = [by_depth[cuts[level]:cuts[level + 1]] for level in range(int(d.max()) + 1)]
        for level in range(1, len(by_level)):
            up, here = by_level[level - 1], by_level[level]
            if not here.size:
                continue
            j = np.searchsorted(up, here) - 1
            ok = j >= 0
            parent[a + here[ok]] = a + up[j[ok]]
    return parent, depth


def innermost_ancestor(parent: np.ndarray, kind: np.ndarray, max_depth: int, idx: np.ndarray, want) -> np.ndarray:
    """The innermost ancestor of each event ``idx`` whose kind is in ``want`` (-1 where none)."""
    current = parent[idx].copy()
    wanted = np.zeros(4, dtype=bool)
    wanted[list(want)] = True
    for _ in range(max_depth + 1):
        todo = (current >= 0) & ~wanted[kind[np.maximum(current, 0)]]
        if not todo.any():
            break
        current[todo] = parent[current[todo]]
    return current


# ----------------------------------------------------------------------------- the device lane


def _device_lane(c: Columns, t0: float, cpu: CpuLane, steps, devices: dict) -> DeviceLane:
    """The device events with their launch (the runtime call with their correlation id), the op that
    launched them (or the annotation, when no op encloses the launch), their kernel category and step."""
    rows = c.device_rows
    kind = (c.group[rows] - Group.KERNEL).astype(np.int8)
    ts, dur, name = c.ts[rows] - t0, c.dur[rows], c.name[rows]
    launch = _launches(c.dev_corr, cpu)
    outside = _launched_outside(c.dev_corr, launch, cpu)
    return DeviceLane(n=rows.size, kind=kind, ts=ts, dur=dur, end=ts + dur, name=name, corr=c.dev_corr,
                      device=c.dev_device, stream=tuple(c.dev_stream), blocks=c.dev_blocks, bps=c.dev_blocks_per_sm,
                      threads=c.dev_threads,
                      occ=c.dev_occupancy, regs=c.dev_registers, smem=c.dev_shared_memory, bytes=c.dev_bytes,
                      launch=launch, op=_launching_ops(launch, cpu), category=_categories(kind, name, c.names, launch, cpu),
                      step=_device_steps(steps, ts, launch, outside, cpu), outside=outside,
                      blocks_per_sm=_blocks_per_sm(c.dev_device, c.dev_blocks, c.dev_blocks_per_sm, devices))


def _memory_lane(table: np.ndarray, tids: list, t0: float, cpu: CpuLane) -> MemoryLane:
    """The [memory] events by time (stable), their times relative to t0 and their threads as CPU-lane indices."""
    if not tids:
        empty = np.empty(0)
        return MemoryLane(0, empty, np.empty(0, np.int64), *(empty,) * 6)
    order = np.argsort(table[:, 0], kind="stable")
    index = {str(tid): i for i, tid in enumerate(cpu.threads)}  # old traces write the ops' tid as text
    thread_of = {tid: index.get(str(tid), -1) for tid in dict.fromkeys(tids)}
    thread = np.fromiter(map(thread_of.__getitem__, tids), np.int64, len(tids))
    return MemoryLane(len(tids), table[order, 0] - t0, thread[order], *(table[order, j] for j in range(1, 7)))


def _blocks_per_sm(device: np.ndarray, blocks: np.ndarray, bps: np.ndarray, devices: dict) -> np.ndarray:
    """Per device event: grid blocks over the device's SM count, else the event's "blocks per SM"."""
    sms = np.full(device.size, np.nan)
    sm_of = {d: p["numSms"] for d, p in devices.items() if isinstance(p.get("numSms"), int)}
    if sm_of:
        fallback = next(iter(sm_of.values()))
        for d in np.unique(device).tolist():
            sms[device == d] = sm_of.get(d, fallback)
    return np.where(np.isfinite(blocks) & np.isfinite(sms), blocks / sms, bps)


def _launches(dev_corr: np.ndarray, cpu: CpuLane) -> np.ndarray:
    """Per device event, the CPU runtime call with the same correlation id (-1: none)."""
    launch = np.full(dev_corr.size, -1, dtype=np.int64)
    runtime = np.flatnonzero(cpu.kind == RUNTIME)
    if dev_corr.size and runtime.size:
        corr = cpu.corr[runtime]
        order = np.argsort(corr, kind="stable")
        sorted_corr = corr[order]
        pos = np.minimum(np.searchsorted(sorted_corr, dev_corr), sorted_corr.size - 1)
        hit = (dev_corr >= 0) & (sorted_corr[pos] == dev_corr)
        launch[hit] = runtime[order[pos[hit]]]
    return launch


def _launching_ops(launch: np.ndarray, cpu: CpuLane) -> np.ndarray:
    op = np.full(launch.size, -1, dtype=np.int64)
    linked = launch >= 0
    if linked.any():
        depth = cpu.max_depth
        op[linked] = innermost_ancestor(cpu.parent, cpu.kind, depth, launch[linked], (OP,))
        missing = linked & (op < 0)
        if missing.any():
            op[missing] = innermost_ancestor(cpu.parent, cpu.kind, depth, launch[missing], (ANNOTATION,))
    return op


def _categories(kind: np.ndarray, name: np.ndarray, names: list, launch: np.ndarray, cpu: CpuLane) -> np.ndarray:
    """Per device event, its code in CATEGORY_CODES (memcpy, memset, or the kernel's family: by its name,
    and for a name of no known family by how it was launched, :func:`~common.report.model.names.jit_category`)."""
    launch_name = np.where(launch >= 0, cpu.name[np.maximum(launch, 0)], -1) if cpu.n else np.full(name.size, -1)
    category = np.zeros(name.size, dtype=np.int64)
    kernels = kind == KERNEL
    if kernels.any():  # once per (name, launch call) pair
        width = len(names) + 1  # one key per pair: name, then launch name + 1 (-1: none)
        pairs, inverse = np.unique(name[kernels] * width + (launch_name[kernels] + 1), return_inverse=True)
        codes = np.array([CATEGORY_CODES[trace_names.jit_category(names[n // width], names[n % width - 1]
                                                                  if n % width else "")]
                          for n in pairs.tolist()], dtype=np.int64)
        category[kernels] = codes[inverse.reshape(-1)]
    return np.where(kind == MEMCPY, CATEGORY_CODES["memcpy"],
                    np.where(kind == MEMSET, CATEGORY_CODES["memset"], category))


def _devices(meta: dict) -> tuple[dict, list[str]]:
    """deviceProperties by device id, without values no device has (with a note)."""
    out, removed = {}, []
    props = meta.get("deviceProperties")
    if isinstance(props, list):
        for i, p in enumerate(props):
            if isinstance(p, dict):
                clean, bad = sane_device_properties(p)
                device = clean.get("id", i)
                out[device if isinstance(device, (int, str)) and not isinstance(device, bool) else i] = clean
                removed += bad
    notes = [f"ignored device properties no device has: {', '.join(removed[:4])}"
             + (f" and {len(removed) - 4} more" if len(removed) > 4 else "")] if removed else []
    return out, notes


_TIMING = bool(os.environ.get("REPORT_TIMING"))
_last_tick = [0.0]


def _tick(label: str) -> None:
    """With REPORT_TIMING=1 in the environment, print how long each stage of the model took."""
    if _TIMING:

        now = time.perf_counter()
        if _last_tick[0]:
            print(f"  [timing] {now - _last_tick[0]:.3f}s before {label}", flush=True)
        _last_tick[0] = now
