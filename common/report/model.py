"""Model: steps, the CPU call tree, the device lanes, kernel <-> launch correlation, intervals.

Every number the rules and renderers read is computed here, once, with numpy over columns
(no Python loop runs per event except to pull fields out of the decoded structs).

Times are microseconds relative to the window's start (``t0``) unless a name says otherwise.
"""

from __future__ import annotations

import gc
import re
from operator import attrgetter
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from msgspec.structs import astuple

from common.knobs import METADATA_KEY, RunKnobs
from common.report import names as N
from common.report.cpu_work import CpuWork, split_cpu_work
from common.errors import fail
from common.report.load import Args, Loaded, load

# ----------------------------------------------------------------------------- categories

KERNEL_CATS = frozenset({"kernel", "Kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "Memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "Memset"})
RUNTIME_CATS = frozenset({"cuda_runtime", "Runtime", "cuda_driver", "Driver", "hip_runtime", "privateuse1_runtime"})
OP_CATS = frozenset({"cpu_op", "Operator"})
ANNOTATION_CATS = frozenset({"user_annotation"})
PYTHON_CATS = frozenset({"python_function", "Python"})
GPU_ANNOTATION_CATS = frozenset({"gpu_user_annotation", "GPU_USER_ANNOTATION"})
OVERHEAD_CATS = frozenset({"overhead", "Overhead"})

# CPU event kinds
OP, ANNOTATION, RUNTIME, PYTHON = 0, 1, 2, 3
# device event kinds
KERNEL, MEMCPY, MEMSET = 0, 1, 2
DEVICE_KIND_NAMES = ("kernel", "memcpy", "memset")

STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
SYNC_NAMES = frozenset({"cudaDeviceSynchronize", "hipDeviceSynchronize"})
OCCUPANCY_PREFIXES = N.OCCUPANCY_PREFIXES  # the family (cudaOccupancy..., cuOccupancy..., hipOccupancy...)
MEMCPY_RUNTIME = ("cudaMemcpy", "hipMemcpy", "cuMemcpy")
BREAKDOWN_KEYS = ("kernel", "memcpy", "memset", "runtime", "dataloader", "cpu_exec", "other")


# ----------------------------------------------------------------------------- intervals


class Intervals:
    """A union of intervals: sorted, disjoint ``starts``/``ends`` and their cumulative length."""

    __slots__ = ("starts", "ends", "_cum")

    def __init__(self, starts: np.ndarray, ends: np.ndarray, merged: bool = False):
        starts = np.asarray(starts, dtype=np.float64)
        ends = np.asarray(ends, dtype=np.float64)
        if not merged and starts.size:
            order = np.argsort(starts, kind="stable")
            s, e = starts[order], np.maximum(ends[order], starts[order])
            emax = np.maximum.accumulate(e)
            brk = s[1:] > emax[:-1]
            starts = s[np.concatenate(([True], brk))]
            ends = emax[np.concatenate((brk, [True]))]
        self.starts, self.ends = starts, ends
        self._cum = np.concatenate(([0.0], np.cumsum(ends - starts)))

    @classmethod
    def empty(cls) -> "Intervals":
        return cls(np.empty(0), np.empty(0), merged=True)

    def __len__(self) -> int:
        return int(self.starts.size)

    @property
    def total(self) -> float:
        return float(self._cum[-1])

    def union(self, other: "Intervals") -> "Intervals":
        return Intervals(np.concatenate((self.starts, other.starts)), np.concatenate((self.ends, other.ends)))

    def covered(self, a, b):
        """Length of the union inside ``[a, b]`` (scalars or arrays)."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if not self.starts.size:
            return np.zeros(np.broadcast(a, b).shape) if a.ndim or b.ndim else 0.0
        i0 = np.searchsorted(self.ends, a, side="right")  # first interval ending after a
        i1 = np.searchsorted(self.starts, b, side="left")  # intervals starting before b: [0, i1)
        total = self._cum[np.maximum(i1, i0)] - self._cum[i0]
        n = self.starts.size
        first = np.minimum(i0, n - 1)
        last = np.maximum(i1 - 1, 0)
        has = i1 > i0
        cut_a = np.where(has, np.maximum(0.0, a - self.starts[first]), 0.0)
        cut_b = np.where(has, np.maximum(0.0, self.ends[last] - b), 0.0)
        out = np.maximum(total - cut_a - cut_b, 0.0)
        return out if out.ndim else float(out)

    def gaps_inside(self, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
        """Idle gaps between the union's intervals that lie inside ``[a, b]``: (gap starts, gap ends)."""
        i0 = np.searchsorted(self.ends, a, side="left")
        i1 = np.searchsorted(self.starts, b, side="right")
        s, e = self.starts[i0:i1], self.ends[i0:i1]
        return e[:-1], s[1:]


# ----------------------------------------------------------------------------- the model


@dataclass
class Step:
    name: str
    number: Optional[int]
    start: float  # relative to t0
    dur: float
    tid: object = None

    @property
    def end(self) -> float:
        return self.start + self.dur


@dataclass
class Model:
    path: str
    size_bytes: int
    file_bytes: int
    n_events: int
    meta: dict
    notes: list
    t0: float  # absolute µs of the window's start
    window: tuple  # (start, end) relative
    window_source: str  # "ProfilerStep" | "all events"
    steps: list  # list[Step]
    names: list  # name id -> str
    # CPU events (sorted by thread, then time), columns
    cpu: dict
    # device events (kernel/memcpy/memset), columns
    dev: dict
    gpu_annotations: list  # (name, start, dur)
    overheads: list  # (name, start, dur, pid, tid)
    devices: dict  # device id -> deviceProperties entry
    numbers: dict = field(default_factory=dict)  # every headline number
    step_rows: list = field(default_factory=list)
    breakdown: dict = field(default_factory=dict)
    categories: list = field(default_factory=list)
    kernels: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    intervals: dict = field(default_factory=dict)
    enclosing: object = None  # enclosing(cpu indices, kinds) -> innermost ancestor of those kinds
    cpu_work: Optional[CpuWork] = None  # per step: compute ops' own work vs the dispatch around them
    phases: list = field(default_factory=list)  # list[phases.Phase]: one row per user annotation name

    @property
    def knobs(self) -> Optional[RunKnobs]:
        """What the lesson that wrote this trace did (warm-up, compile, schedule); None for other traces."""
        return RunKnobs.from_json(self.meta.get(METADATA_KEY))

    @property
    def has_gpu(self) -> bool:
        return self.dev["n"] > 0

    @property
    def window_us(self) -> float:
        return self.window[1] - self.window[0]

    def name(self, i: int) -> str:
        return self.names[i]

    def ids_where(self, pred) -> np.ndarray:
        """Name ids whose name satisfies ``pred`` (called once per distinct name)."""
        return np.fromiter((i for i, n in enumerate(self.names) if pred(n)), dtype=np.int64)

    def name_mask(self, pred) -> np.ndarray:
        m = np.zeros(len(self.names), dtype=bool)
        ids = self.ids_where(pred)
        m[ids] = True
        return m

    def step_of(self, t) -> np.ndarray:
        """Index of the step holding each time ``t`` (relative), -1 outside every step."""
        t = np.asarray(t, dtype=np.float64)
        if not self.steps:
            return np.full(t.shape, -1, dtype=np.int64)
        starts = np.array([s.start for s in self.steps])
        ends = np.array([s.end for s in self.steps])
        i = np.searchsorted(starts, t, side="right") - 1
        ok = (i >= 0) & (t <= ends[np.maximum(i, 0)])
        return np.where(ok, i, -1)

    def step_label(self, i: int) -> str:
        s = self.steps[i]
        return f"#{s.number}" if s.number is not None else s.name


def analyze(path, graveyard: Optional[list] = None, parallel: bool = False) -> Model:
    """Load and model one trace file (see :func:`build` for ``graveyard``). With ``parallel``, a
    big plain-JSON file is decoded by two processes (a fork; the command line uses it, a library
    caller inside a torch program does not)."""
    loaded = load(path, graveyard, extract=extract if parallel else None)
    enabled = gc.isenabled()
    gc.disable()
    try:
        return build(loaded, graveyard)
    finally:
        if enabled:
            gc.enable()


def _int_array(values, default: int = -1) -> np.ndarray:
    """Integers (ids) from a list that may hold None (-> ``default``) or odd values."""
    try:
        f = np.array(values, dtype=np.float64)  # None -> NaN; ids stay exact below 2**53
        return np.where(np.isnan(f), default, f).astype(np.int64)
    except (TypeError, ValueError, OverflowError):
        out = np.full(len(values), default, dtype=np.int64)
        for i, v in enumerate(values):
            try:
                out[i] = int(v)
            except (TypeError, ValueError, OverflowError):
                pass
        return out


def _float_array(values) -> np.ndarray:
    """Floats from a list that may hold None (-> NaN) or odd values (-> NaN)."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        out = np.full(len(values), np.nan)
        for i, v in enumerate(values):
            try:
                out[i] = float(v)
            except (TypeError, ValueError):
                pass
        return out


import os as _os
import time as _time

_TIMING = bool(_os.environ.get("REPORT_TIMING"))
_last = [0.0]


def _tick(label: str) -> None:
    """With REPORT_TIMING=1 in the environment, print how long each stage of the model took."""
    if _TIMING:
        now = _time.perf_counter()
        if _last[0]:
            print(f"  [timing] {now - _last[0]:.3f}s before {label}", flush=True)
        _last[0] = now


def factorize(values) -> tuple[np.ndarray, list]:
    """(ids, uniques): ``uniques[ids[i]] == values[i]``, uniques in order of first appearance."""
    d = dict.fromkeys(values)
    uniq = list(d)
    for i, k in enumerate(uniq):
        d[k] = i
    return np.fromiter(map(d.__getitem__, values), np.int64, len(values)), uniq


# event groups (by category)
G_OP, G_ANNOTATION, G_RUNTIME, G_PYTHON, G_KERNEL, G_MEMCPY, G_MEMSET, G_GPU_ANN, G_OVERHEAD, G_TRACE, G_OTHER = range(11)
class _Groups(dict):
    def __missing__(self, key):
        return G_OTHER


_GROUP_OF = _Groups()
for _cats, _g in ((OP_CATS, G_OP), (ANNOTATION_CATS, G_ANNOTATION), (RUNTIME_CATS, G_RUNTIME),
                  (PYTHON_CATS, G_PYTHON), (KERNEL_CATS, G_KERNEL), (MEMCPY_CATS, G_MEMCPY),
                  (MEMSET_CATS, G_MEMSET), (GPU_ANNOTATION_CATS, G_GPU_ANN), (OVERHEAD_CATS, G_OVERHEAD),
                  ({"Trace"}, G_TRACE)):
    for _c in _cats:
        _GROUP_OF[_c] = _g
_NAN3 = (float("nan"),) * 3
_NO_ARGS = (None,) * len(Args.__struct_fields__)


def _dims(values) -> np.ndarray:
    """Product of grid/block dimensions ([x, y, z]) per event, NaN where absent."""
    try:
        return np.array([(v[0] * v[1] * v[2] if v.__class__ is list and len(v) == 3 else None) for v in values],
                        dtype=np.float64)
    except (TypeError, ValueError, IndexError):
        out = np.full(len(values), np.nan)
        for i, v in enumerate(values):
            try:
                p = 1.0
                for x in v:
                    p *= float(x)
                out[i] = p
            except (TypeError, ValueError):
                pass
        return out


def extract(xs: list) -> dict:
    """Columns from decoded complete events: everything the model reads, nothing else.

    Per event: group (category family), ts, dur, name id. Per CPU event: thread id and, for
    runtime calls, the correlation id. Per device event: correlation, device, stream and the
    launch arguments. GPU-lane annotations and profiler overhead events as small tuples.
    """
    n_all = len(xs)
    group = np.fromiter(map(_GROUP_OF.__getitem__, map(attrgetter("cat"), xs)), np.int8, n_all)
    a_ts = np.fromiter(map(attrgetter("ts"), xs), np.float64, n_all)
    a_dur = np.fromiter(map(attrgetter("dur"), xs), np.float64, n_all)
    a_name, names = factorize(list(map(attrgetter("name"), xs)))

    def subset(sel: np.ndarray) -> list:
        return [xs[i] for i in sel.tolist()]

    cpu_sel = np.flatnonzero(group <= G_PYTHON)
    cpu_evs = subset(cpu_sel)
    # a CPU lane is a thread id (OS thread ids are unique across the processes of one trace)
    c_thread, threads = factorize(list(map(attrgetter("tid"), cpu_evs)))
    c_corr = np.full(cpu_sel.size, -1, dtype=np.int64)
    rt = np.flatnonzero(group[cpu_sel] == G_RUNTIME)
    if rt.size:
        c_corr[rt] = _int_array([(a.correlation if (a := cpu_evs[i].args) is not None else None) for i in rt.tolist()])
    del cpu_evs

    dev_sel = np.flatnonzero((group >= G_KERNEL) & (group <= G_MEMSET))
    dev_evs = subset(dev_sel)
    d_pid = list(map(attrgetter("pid"), dev_evs))
    d_stream = list(map(attrgetter("tid"), dev_evs))
    fields = Args.__struct_fields__
    cols = dict(zip(fields, zip(*[astuple(a) if a is not None else _NO_ARGS for a in map(attrgetter("args"), dev_evs)])))
    if not cols:
        cols = {f: () for f in fields}
    del dev_evs
    out = dict(
        group=group, ts=a_ts, dur=a_dur, name=a_name, names=names,
        thread=c_thread, threads=threads, corr=c_corr,
        d_corr=_int_array(cols["correlation"]), d_device=_int_array(d_pid), d_stream=d_stream,
        d_blocks=_dims(cols["grid"]), d_bps=_float_array(cols["blocks_per_sm"]),
        d_occ=_float_array(cols["occupancy"]), d_regs=_float_array(cols["registers"]),
        d_smem=_float_array(cols["shared_memory"]), d_bytes=_float_array(cols["bytes"]),
        gpu_ann=[(e.name, e.ts, e.dur) for e in subset(np.flatnonzero(group == G_GPU_ANN))],
        overheads=[(e.name, e.ts, e.dur, e.pid, e.tid) for e in subset(np.flatnonzero(group == G_OVERHEAD))],
    )
    return out


def _remap(a_keys: list, b_keys: list) -> tuple[list, np.ndarray]:
    index = {k: i for i, k in enumerate(a_keys)}
    merged = list(a_keys)
    lut = np.empty(len(b_keys), dtype=np.int64)
    for j, k in enumerate(b_keys):
        i = index.get(k)
        if i is None:
            i = index[k] = len(merged)
            merged.append(k)
        lut[j] = i
    return merged, lut


def merge(a: dict, b: dict) -> dict:
    """Columns of two consecutive slices of one trace, as if extracted at once."""
    names, nlut = _remap(a["names"], b["names"])
    threads, tlut = _remap(a["threads"], b["threads"])
    out = dict(names=names, threads=threads,
               name=np.concatenate((a["name"], nlut[b["name"]] if b["name"].size else b["name"])),
               thread=np.concatenate((a["thread"], tlut[b["thread"]] if b["thread"].size else b["thread"])),
               d_stream=a["d_stream"] + b["d_stream"], gpu_ann=a["gpu_ann"] + b["gpu_ann"],
               overheads=a["overheads"] + b["overheads"])
    for k in ("group", "ts", "dur", "corr", "d_corr", "d_device", "d_blocks", "d_bps", "d_occ", "d_regs", "d_smem",
              "d_bytes"):
        out[k] = np.concatenate((a[k], b[k]))
    return out


def build(loaded: Loaded, graveyard: Optional[list] = None) -> Model:
    """The model of a loaded trace. With ``graveyard`` (a list), the decoded events are parked
    there instead of freed: a command that exits right after (``os._exit``) skips freeing
    millions of small objects one by one."""
    _tick("build")
    if loaded.columns is None:
        xs = loaded.events
        loaded.events = []
        loaded.columns = extract(xs)
        if graveyard is not None:
            graveyard.append(xs)
        del xs
    cols = loaded.columns
    loaded.columns = None
    _tick("columns")
    group, a_ts, a_dur, a_name, names = cols["group"], cols["ts"], cols["dur"], cols["name"], cols["names"]
    a_dur = np.maximum(a_dur, 0.0)  # a negative duration (clock trouble) counts as zero, not as negative time
    cpu_sel = np.flatnonzero(group <= G_PYTHON)
    kind_of_group = np.array([OP, ANNOTATION, RUNTIME, PYTHON], dtype=np.int8)
    c_kind = kind_of_group[group[cpu_sel]]
    c_ts, c_dur, c_name = a_ts[cpu_sel], a_dur[cpu_sel], a_name[cpu_sel]
    n_cpu = cpu_sel.size
    c_thread, threads, c_corr = cols["thread"], cols["threads"], cols["corr"]
    dev_sel = np.flatnonzero((group >= G_KERNEL) & (group <= G_MEMSET))
    n_dev = dev_sel.size
    d_kind = (group[dev_sel] - G_KERNEL).astype(np.int8)
    d_ts, d_dur, d_name = a_ts[dev_sel], a_dur[dev_sel], a_name[dev_sel]
    d_corr, d_device, d_stream = cols["d_corr"], cols["d_device"], cols["d_stream"]
    d_blocks, d_bps, d_occ = cols["d_blocks"], cols["d_bps"], cols["d_occ"]
    d_regs, d_smem, d_bytes = cols["d_regs"], cols["d_smem"], cols["d_bytes"]
    gpu_ann_evs, overhead_evs = cols["gpu_ann"], cols["overheads"]
    bound = np.flatnonzero(group != G_TRACE)  # everything but the profiler's own span bounds the window
    del cols

    _tick("steps")
    # --- steps and the window
    step_list = []
    seen = set()
    step_ids = {i: int(m.group(1)) for i, n in enumerate(names) if (m := STEP_RE.match(n))}
    if step_ids:
        sel = np.flatnonzero(np.isin(c_name, np.fromiter(step_ids, np.int64)) & (c_kind <= ANNOTATION))
        for i in sel[np.argsort(c_ts[sel], kind="stable")].tolist():
            key = (int(c_name[i]), float(c_ts[i]))
            if key in seen:
                continue
            seen.add(key)
            step_list.append((names[c_name[i]], step_ids[int(c_name[i])], float(c_ts[i]), float(c_dur[i]),
                              int(c_thread[i])))
    notes = list(loaded.notes)
    drawn = _findings_track_events(loaded.meta)
    if drawn:
        notes.append(f"this copy of the trace holds the report's Findings track ({drawn} events): "
                     "left out of every figure")
    if step_list:
        t0 = step_list[0][2]
        t1 = max(s[2] + s[3] for s in step_list)
        window_source = "ProfilerStep"
    else:
        if not bound.size:
            fail(f"{loaded.path}: the trace holds no complete events (ph \"X\"): nothing to analyse")
        t0 = float(a_ts[bound].min())
        t1 = float((a_ts[bound] + a_dur[bound]).max())
        window_source = "all events"
        notes.append("no ProfilerStep in the trace: analysed as one window spanning all events "
                     "(call prof.step() once per iteration to get steps)")
    del a_ts, a_dur, a_name, group, bound
    steps = [Step(n, num, ts - t0, dur, tid) for n, num, ts, dur, tid in step_list]
    if not steps:
        steps = [Step("window", None, 0.0, float(t1 - t0))]

    c_ts -= t0
    d_ts -= t0
    gpu_annotations = [(n, ts - t0, dur) for n, ts, dur in gpu_ann_evs]
    overheads = [(n, ts - t0, dur, pid, tid) for n, ts, dur, pid, tid in overhead_evs]

    _tick("call tree")
    # --- the CPU call tree, per thread, from timestamps
    order = np.lexsort((-c_dur, c_ts, c_thread))
    c_kind, c_ts, c_dur, c_name, c_thread, c_corr = (a[order] for a in (c_kind, c_ts, c_dur, c_name, c_thread, c_corr))
    c_end = c_ts + c_dur
    parent, depth = _tree(c_ts, c_end, c_thread)
    has_parent = parent >= 0
    child_sum = np.bincount(parent[has_parent], weights=c_dur[has_parent], minlength=n_cpu) if n_cpu else np.zeros(0)
    c_self = np.maximum(c_dur - child_sum, 0.0)
    max_depth = int(depth.max(initial=0))

    def enclosing(idx: np.ndarray, want=(OP,)) -> np.ndarray:
        """The innermost ancestor of each event whose kind is in ``want`` (-1 where none)."""
        cur = parent[idx].copy()
        wanted = np.zeros(4, dtype=bool)
        wanted[list(want)] = True
        for _ in range(max_depth + 1):
            todo = (cur >= 0) & ~wanted[c_kind[np.maximum(cur, 0)]]
            if not todo.any():
                break
            cur[todo] = parent[cur[todo]]
        return cur

    _tick("correlation")
    # --- kernel <-> launch correlation
    rt_idx = np.flatnonzero(c_kind == RUNTIME)
    d_launch = np.full(n_dev, -1, dtype=np.int64)
    if n_dev and rt_idx.size:
        rc = c_corr[rt_idx]
        o = np.argsort(rc, kind="stable")
        rc_sorted = rc[o]
        pos = np.minimum(np.searchsorted(rc_sorted, d_corr), rc_sorted.size - 1)
        hit = (d_corr >= 0) & (rc_sorted[pos] == d_corr)
        d_launch[hit] = rt_idx[o[pos[hit]]]
    d_op = np.full(n_dev, -1, dtype=np.int64)
    linked = d_launch >= 0
    if linked.any():
        d_op[linked] = enclosing(d_launch[linked], (OP,))
        miss = linked & (d_op < 0)
        if miss.any():
            d_op[miss] = enclosing(d_launch[miss], (ANNOTATION,))
    d_end = d_ts + d_dur
    # a device event belongs to the step its launch is in (else the step its start is in)
    when = np.where(linked, c_ts[np.maximum(d_launch, 0)], d_ts) if n_cpu else d_ts
    _tick("model")
    model = Model(
        path=loaded.path, size_bytes=loaded.size_bytes, file_bytes=loaded.file_bytes,
        n_events=loaded.n_events - drawn,
        meta=loaded.meta, notes=notes, t0=t0, window=(0.0, float(t1 - t0)), window_source=window_source,
        steps=steps, names=names,
        cpu=dict(n=n_cpu, kind=c_kind, ts=c_ts, dur=c_dur, end=c_end, name=c_name, thread=c_thread, corr=c_corr,
                 parent=parent, depth=depth, self=c_self, threads=threads),
        dev=dict(n=n_dev, kind=d_kind, ts=d_ts, dur=d_dur, end=d_end, name=d_name, corr=d_corr, device=d_device,
                 stream=d_stream, blocks=d_blocks, bps=d_bps, occ=d_occ, regs=d_regs,
                 smem=d_smem, bytes=d_bytes, launch=d_launch, op=d_op),
        gpu_annotations=gpu_annotations, overheads=overheads,
        devices=_devices(loaded.meta),
    )
    model.enclosing = enclosing
    model.dev["step"] = model.step_of(when) if n_dev else np.empty(0, np.int64)
    model.cpu["step"] = model.step_of(c_ts)
    _tick("numbers")
    _numbers(model)
    from common.report.phases import phase_table  # reads the numbers above (imported here: it imports this module)

    model.phases = phase_table(model)
    _tick("end")
    return model


def _findings_track_events(meta: dict) -> int:
    """How many events the report's own Findings track added to an annotated copy (0 for other traces).
    Its slices have the category "finding", which no figure reads."""
    drawn = meta.get("report_findings")
    if isinstance(drawn, dict) and isinstance(drawn.get("events"), int) and drawn["events"] >= 0:
        return drawn["events"]
    return 0


def _devices(meta: dict) -> dict:
    out = {}
    props = meta.get("deviceProperties")
    if isinstance(props, list):
        for i, p in enumerate(props):
            if isinstance(p, dict):
                out[p.get("id", i)] = p
    return out


def _tree(ts: np.ndarray, end: np.ndarray, thread: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
    starts = np.concatenate(([0], bounds))
    stops = np.concatenate((bounds, [n]))
    for a, b in zip(starts, stops):
        t = ts[a:b]
        e = np.maximum(end[a:b], t + 1e-6)  # zero-length events end after they start
        ended = np.searchsorted(np.sort(e), t, side="right")
        d = np.arange(b - a) - ended
        d = np.maximum(d, 0)
        depth[a:b] = d
        pos = np.arange(b - a)
        by_level = [pos[d == lv] for lv in range(int(d.max()) + 1)]
        for lv in range(1, len(by_level)):
            up, here = by_level[lv - 1], by_level[lv]
            if not here.size:
                continue
            j = np.searchsorted(up, here) - 1
            ok = j >= 0
            parent[a + here[ok]] = a + up[j[ok]]
    return parent, depth


# ----------------------------------------------------------------------------- numbers


def _numbers(m: Model) -> None:
    cpu, dev = m.cpu, m.dev
    w0, w1 = m.window
    nums: dict = {}
    step_ids = set()
    for i, n in enumerate(m.names):
        if STEP_RE.match(n):
            step_ids.add(i)
    is_step_name = np.zeros(len(m.names), dtype=bool)
    is_step_name[list(step_ids)] = True

    # --- device intervals (HTA's definition: all kernel/memcpy/memset events, all streams)
    if dev["n"]:
        gpu_u = Intervals(dev["ts"], dev["end"])
        span0, span1 = float(dev["ts"].min()), float(dev["end"].max())
        comm = m.name_mask(lambda s: N.kernel_category(s) == "communication")
        is_comm = comm[dev["name"]] & (dev["kind"] == KERNEL)
        compute_sel = (dev["kind"] == KERNEL) & ~is_comm
        compute_u = Intervals(dev["ts"][compute_sel], dev["end"][compute_sel])
        comm_u = Intervals(dev["ts"][is_comm], dev["end"][is_comm])
        busy = gpu_u.total
        span = span1 - span0
        in_window = gpu_u.covered(w0, w1)
        nums["gpu"] = dict(
            busy_us=busy, span_us=span, idle_us=span - busy,
            idle_pct=100.0 * (span - busy) / span if span > 0 else 0.0,
            busy_pct=100.0 * busy / span if span > 0 else 0.0,
            compute_us=compute_u.total, communication_us=comm_u.total,
            busy_in_window_us=in_window,
            busy_pct_of_window=100.0 * in_window / (w1 - w0) if w1 > w0 else 0.0,
            first_event_us=span0, last_event_us=span1,
            kernels=int((dev["kind"] == KERNEL).sum()), memcpys=int((dev["kind"] == MEMCPY).sum()),
            memsets=int((dev["kind"] == MEMSET).sum()),
            launches_correlated=int((dev["launch"] >= 0).sum()),
            streams=len({(d, s) for d, s in zip(dev["device"].tolist(), dev["stream"])}),
        )
        m.intervals["gpu"] = gpu_u
    else:
        gpu_u = Intervals.empty()
        nums["gpu"] = dict(busy_us=None, span_us=None, idle_us=None, idle_pct=None, busy_pct=None,
                           compute_us=None, communication_us=None, busy_in_window_us=None,
                           busy_pct_of_window=None, kernels=0, memcpys=0, memsets=0, launches_correlated=0,
                           streams=0)
        m.intervals["gpu"] = gpu_u

    # --- CPU vs device time (the profiler table's two totals)
    in_win = (cpu["ts"] >= w0) & (cpu["ts"] <= w1)
    nums["cpu"] = dict(
        self_cpu_total_us=float(cpu["self"][in_win].sum()),
        events=int(cpu["n"]), ops=int((cpu["kind"] == OP).sum()), runtime_calls=int((cpu["kind"] == RUNTIME).sum()),
        threads=len(cpu["threads"]),
    )
    # A CPU-only trace has no device time at all: null, not 0.
    if dev["n"]:
        dev_in = m.dev["step"] >= 0
        nums["device"] = dict(
            self_device_total_us=float(dev["dur"].sum()),
            self_device_in_steps_us=float(dev["dur"][dev_in].sum()),
            kernel_total_us=float(dev["dur"][dev["kind"] == KERNEL].sum()),
        )
        sc = nums["cpu"]["self_cpu_total_us"]
        nums["device"]["device_to_cpu_ratio"] = nums["device"]["self_device_total_us"] / sc if sc > 0 else None
    else:
        nums["device"] = dict.fromkeys(
            ("self_device_total_us", "self_device_in_steps_us", "kernel_total_us", "device_to_cpu_ratio"))

    # --- breakdown intervals by TensorBoard's priority
    k_sel, mc_sel, ms_sel = (dev["kind"] == KERNEL), (dev["kind"] == MEMCPY), (dev["kind"] == MEMSET)
    rt_sel = cpu["kind"] == RUNTIME
    dl_mask = m.name_mask(lambda s: "DataLoader" in s or "dataloader" in s)
    dl_sel = dl_mask[cpu["name"]] & (cpu["kind"] != RUNTIME)
    exec_sel = (cpu["kind"] != RUNTIME) & ~is_step_name[cpu["name"]] & ~dl_sel
    layers = [
        ("kernel", Intervals(dev["ts"][k_sel], dev["end"][k_sel])),
        ("memcpy", Intervals(dev["ts"][mc_sel], dev["end"][mc_sel])),
        ("memset", Intervals(dev["ts"][ms_sel], dev["end"][ms_sel])),
        ("runtime", Intervals(cpu["ts"][rt_sel], cpu["end"][rt_sel])),
        ("dataloader", Intervals(cpu["ts"][dl_sel], cpu["end"][dl_sel])),
        ("cpu_exec", Intervals(cpu["ts"][exec_sel], cpu["end"][exec_sel])),
    ]
    st_a = np.array([s.start for s in m.steps])
    st_b = np.array([s.end for s in m.steps])
    st_d = st_b - st_a
    cum = Intervals.empty()
    prev = np.zeros(len(m.steps))
    per_step = {}
    for key, iv in layers:
        cum = cum.union(iv) if len(iv) else cum
        cov = np.asarray(cum.covered(st_a, st_b), dtype=np.float64)
        per_step[key] = cov - prev
        prev = cov
    per_step["other"] = np.maximum(st_d - prev, 0.0)
    m.breakdown = {k: float(v.sum()) for k, v in per_step.items()}
    m.breakdown["total"] = float(st_d.sum())

    # --- steps
    gpu_in_step = np.asarray(gpu_u.covered(st_a, st_b), dtype=np.float64) if len(gpu_u) else np.zeros(len(m.steps))
    kern_step = dev["step"][k_sel] if dev["n"] else np.zeros(0, np.int64)
    kcount = np.bincount(kern_step[kern_step >= 0], minlength=len(m.steps)) if kern_step.size else np.zeros(len(m.steps), int)
    dstep = dev["step"] if dev["n"] else np.zeros(0, np.int64)
    dtime = np.bincount(dstep[dstep >= 0], weights=dev["dur"][dstep >= 0], minlength=len(m.steps)) if dev["n"] else np.zeros(len(m.steps))
    ops_step = cpu["step"][cpu["kind"] == OP]
    ocount = np.bincount(ops_step[ops_step >= 0], minlength=len(m.steps)) if ops_step.size else np.zeros(len(m.steps), int)
    gaps = _annotation_gaps(m)
    rows = []
    for i, s in enumerate(m.steps):
        rows.append(dict(
            name=s.name, number=s.number, start_us=s.start, wall_us=s.dur,
            ops=int(ocount[i]), kernels=int(kcount[i]), device_us=float(dtime[i]),
            gpu_busy_us=float(gpu_in_step[i]) if m.has_gpu else None,
            gpu_busy_pct=(100.0 * float(gpu_in_step[i]) / s.dur if s.dur > 0 else 0.0) if m.has_gpu else None,
            annotation=gaps[i][0], annotation_gap_us=gaps[i][1], first_op=gaps[i][2],
            breakdown={k: float(per_step[k][i]) for k in BREAKDOWN_KEYS},
        ))
    m.step_rows = rows
    nums["steps"] = dict(count=len(m.steps) if m.window_source == "ProfilerStep" else 0,
                         numbers=[s.number for s in m.steps if s.number is not None])
    nums["window"] = dict(start_us=w0, end_us=w1, wall_us=w1 - w0, source=m.window_source)

    _kernel_table(m, nums)
    _op_table(m)
    if m.window_source == "ProfilerStep":
        m.cpu_work = split_cpu_work(is_op=cpu["kind"] == OP, name=cpu["name"], names=m.names, dur=cpu["dur"],
                                    self_us=cpu["self"], parent=cpu["parent"], step=cpu["step"],
                                    step_walls=[s.dur for s in m.steps])
    m.numbers = nums


def _annotation_gaps(m: Model) -> list:
    """Per step: (first user annotation, gap to its first aten::* descendant, that op's name)."""
    cpu = m.cpu
    out = [(None, None, None)] * len(m.steps)
    ann = np.flatnonzero((cpu["kind"] == ANNOTATION) & (cpu["step"] >= 0))
    if not ann.size:
        return out
    skip = m.name_mask(lambda s: bool(STEP_RE.match(s)) or s.startswith(("nccl:", "gloo:", "## ", "Optimizer.")))
    ann = ann[~skip[cpu["name"][ann]]]
    is_aten = m.name_mask(lambda s: s.startswith("aten::"))
    done = set()
    for i in ann:  # sorted by thread, then time
        st = int(cpu["step"][i])
        if st in done:
            continue
        end = cpu["end"][i]
        j = i + 1
        hi = np.searchsorted(cpu["ts"][i + 1:i + 1 + 4096], end, side="right") + i + 1
        cand = np.flatnonzero(is_aten[cpu["name"][j:hi]] & (cpu["thread"][j:hi] == cpu["thread"][i]))
        if not cand.size:
            continue
        k = j + int(cand[0])
        done.add(st)
        out[st] = (m.names[cpu["name"][i]], float(cpu["ts"][k] - cpu["ts"][i]), m.names[cpu["name"][k]])
    return out


def _group_stats(gid: np.ndarray, vals: np.ndarray, ngroups: int) -> dict:
    """count/total/min/max/median of ``vals`` per group id."""
    order = np.lexsort((vals, gid))
    g, v = gid[order], vals[order]
    count = np.bincount(g, minlength=ngroups)
    total = np.bincount(g, weights=v, minlength=ngroups)
    starts = np.concatenate(([0], np.cumsum(count)[:-1]))
    has = count > 0
    mn = np.full(ngroups, np.nan)
    mx = np.full(ngroups, np.nan)
    med = np.full(ngroups, np.nan)
    if v.size:
        mn[has] = v[starts[has]]
        mx[has] = v[starts[has] + count[has] - 1]
        lo = v[starts[has] + (count[has] - 1) // 2]
        hi = v[starts[has] + count[has] // 2]
        med[has] = (lo + hi) / 2
    return dict(count=count, total=total, min=mn, max=mx, median=med)


def _kernel_table(m: Model, nums: dict) -> None:
    dev = m.dev
    sel = np.flatnonzero(dev["kind"] == KERNEL) if dev["n"] else np.empty(0, np.int64)
    eff = dict(est_sm_efficiency_pct=None, est_achieved_occupancy_pct=None, mean_blocks_per_sm=None,
               tensor_core_pct=None, kernels_with_launch_args=0)
    nums["efficiency"] = eff
    # categories (device events of every kind)
    cats: dict = {}
    if dev["n"]:
        code = {c: i for i, c in enumerate(N.CATEGORIES)}
        used = np.zeros(len(m.names), dtype=bool)
        used[dev["name"]] = True
        name_cat = np.zeros(len(m.names), dtype=np.int64)
        for nid in np.flatnonzero(used).tolist():
            name_cat[nid] = code[N.kernel_category(m.names[nid])]
        dcat = np.where(dev["kind"] == MEMCPY, code["memcpy"],
                        np.where(dev["kind"] == MEMSET, code["memset"], name_cat[dev["name"]]))
        m.dev["category"] = dcat
        tot = np.bincount(dcat, weights=dev["dur"], minlength=len(code))
        cnt = np.bincount(dcat, minlength=len(code))
        all_t = float(dev["dur"].sum())
        for c, i in code.items():
            if cnt[i]:
                cats[c] = dict(category=c, label=N.CATEGORIES[c], time_us=float(tot[i]), count=int(cnt[i]),
                               pct=100.0 * float(tot[i]) / all_t if all_t > 0 else 0.0)
    m.categories = sorted(cats.values(), key=lambda r: -r["time_us"])
    if not sel.size:
        m.kernels = []
        return
    nid = dev["name"][sel]
    dur = dev["dur"][sel]
    uniq, gid = np.unique(nid, return_inverse=True)
    st = _group_stats(gid, dur, uniq.size)
    total_k = float(dur.sum())
    # launch configuration -> TensorBoard's estimates (duration-weighted)
    blocks = dev["blocks"][sel]
    bps_arg = dev["bps"][sel]
    occ = dev["occ"][sel]
    sms = np.full(sel.size, np.nan)
    if m.devices:
        sm_of = {d: p.get("numSms") for d, p in m.devices.items()
                 if isinstance(p.get("numSms"), (int, float)) and p.get("numSms") > 0}
        if sm_of:
            default = next(iter(sm_of.values()))
            devs = dev["device"][sel]
            for d in np.unique(devs).tolist():
                sms[devs == d] = sm_of.get(d, default)
    bps = np.where(np.isfinite(blocks) & np.isfinite(sms), blocks / sms, bps_arg)
    sm_eff = np.minimum(bps, 1.0)
    has_cfg = np.isfinite(sm_eff)
    has_occ = np.isfinite(occ)
    w_cfg = np.where(has_cfg, dur, 0.0)
    w_occ = np.where(has_occ, dur, 0.0)
    eff["kernels_with_launch_args"] = int(has_cfg.sum())
    if has_cfg.any() and w_cfg.sum() > 0:
        eff["est_sm_efficiency_pct"] = 100.0 * float((sm_eff[has_cfg] * dur[has_cfg]).sum() / w_cfg.sum())
        eff["mean_blocks_per_sm"] = float((bps[has_cfg] * dur[has_cfg]).sum() / w_cfg.sum())
    if has_occ.any() and w_occ.sum() > 0:
        eff["est_achieved_occupancy_pct"] = float((occ[has_occ] * dur[has_occ]).sum() / w_occ.sum())
    g_wcfg = np.bincount(gid, weights=w_cfg, minlength=uniq.size)
    g_eff = np.bincount(gid, weights=np.where(has_cfg, sm_eff * dur, 0.0), minlength=uniq.size)
    g_bps = np.bincount(gid, weights=np.where(has_cfg, bps * dur, 0.0), minlength=uniq.size)
    g_wocc = np.bincount(gid, weights=w_occ, minlength=uniq.size)
    g_occ = np.bincount(gid, weights=np.where(has_occ, occ * dur, 0.0), minlength=uniq.size)
    # per-step totals and counts, for the spread rule
    kstep = dev["step"][sel]
    nsteps = len(m.steps)
    tc_time = 0.0
    rows = []
    regs = dev["regs"][sel]
    smem = dev["smem"][sel]
    for g in np.argsort(-st["total"]).tolist():
        name = m.names[int(uniq[g])]
        tc = N.uses_tensor_cores(name)
        if tc:
            tc_time += float(st["total"][g])
        gsel = gid == g
        row = dict(
            name=name, category=N.kernel_category(name), calls=int(st["count"][g]), total_us=float(st["total"][g]),
            mean_us=float(st["total"][g] / st["count"][g]), min_us=float(st["min"][g]),
            median_us=float(st["median"][g]), max_us=float(st["max"][g]),
            share_pct=100.0 * float(st["total"][g]) / total_k if total_k > 0 else 0.0,
            est_sm_efficiency_pct=100.0 * float(g_eff[g] / g_wcfg[g]) if g_wcfg[g] > 0 else None,
            mean_blocks_per_sm=float(g_bps[g] / g_wcfg[g]) if g_wcfg[g] > 0 else None,
            est_achieved_occupancy_pct=float(g_occ[g] / g_wocc[g]) if g_wocc[g] > 0 else None,
            tensor_cores=tc,
        )
        if len(rows) < 200:  # per-kernel detail only for the kernels anyone will read
            r = regs[gsel]
            sm = smem[gsel]
            row["registers_per_thread"] = float(np.nanmax(r)) if np.isfinite(r).any() else None
            row["shared_memory_bytes"] = float(np.nanmax(sm)) if np.isfinite(sm).any() else None
            ks = kstep[gsel]
            ok = ks >= 0
            row["per_step_us"] = np.bincount(ks[ok], weights=dur[gsel][ok], minlength=nsteps).tolist() if nsteps else []
            row["per_step_calls"] = np.bincount(ks[ok], minlength=nsteps).tolist() if nsteps else []
            gemm = N.decode_gemm(name)
            fused = N.decode_fused(name)
            row["decoded"] = (dict(gemm, kind="gemm", text=N.describe_gemm(gemm)) if gemm else
                              dict(fused, kind="fused", text=N.describe_fused(fused)) if fused else None)
        rows.append(row)
    eff["tensor_core_pct"] = 100.0 * tc_time / total_k if total_k > 0 else None
    m.kernels = rows


def _op_table(m: Model) -> None:
    """Per op name: calls, CPU total, self CPU, self device time (kernels it launched itself)."""
    cpu, dev = m.cpu, m.dev
    sel = np.flatnonzero((cpu["kind"] == OP) | (cpu["kind"] == ANNOTATION))
    if not sel.size:
        m.ops = []
        return
    nid = cpu["name"][sel]
    nn = len(m.names)
    calls = np.bincount(nid, minlength=nn)
    total = np.bincount(nid, weights=cpu["dur"][sel], minlength=nn)
    self_ = np.bincount(nid, weights=cpu["self"][sel], minlength=nn)
    devt = np.zeros(nn)
    kern = np.zeros(nn, dtype=np.int64)
    if dev["n"]:
        ok = dev["op"] >= 0
        on = cpu["name"][dev["op"][ok]]
        devt = np.bincount(on, weights=dev["dur"][ok], minlength=nn)
        kern = np.bincount(on, minlength=nn)
    # has the op (or anything under it) launched device work?
    launched = np.zeros(cpu["n"], dtype=bool)
    if dev["n"]:
        cur = dev["launch"][dev["launch"] >= 0]
        while cur.size:
            cur = cur[~launched[cur]]
            launched[cur] = True
            cur = cpu["parent"][cur]
            cur = cur[cur >= 0]
    with_kernel = np.bincount(nid, weights=launched[sel].astype(np.float64), minlength=nn)
    kinds = np.zeros(nn, dtype=np.int8)
    kinds[nid] = cpu["kind"][sel]
    rows = []
    for i in np.flatnonzero(calls).tolist():
        rows.append(dict(name=m.names[i], kind="annotation" if kinds[i] == ANNOTATION else "op", calls=int(calls[i]),
                         cpu_total_us=float(total[i]), self_cpu_us=float(self_[i]), self_device_us=float(devt[i]),
                         kernels=int(kern[i]), calls_with_device_work=int(with_kernel[i])))
    rows.sort(key=lambda r: -r["cpu_total_us"])
    m.ops = rows
