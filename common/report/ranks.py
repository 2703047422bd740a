"""Ranks: the traces of one distributed job, read together.

    uv run -m common.report traces/06_ddp/<tag>_rank*.json     # several ranks' traces
    uv run -m common.report DIR                                # a folder that holds one job

Per rank and profiled step (times in µs, over the ProfilerStep's span):

- ``compute``: on a GPU trace, the union of computation kernels; on a CPU trace, of the CPU ops
  (any thread) that are not communication;
- ``communication``: the union of communication kernels (NCCL); on a CPU trace, of the backend's
  collectives (``gloo:all_reduce``, timed on gloo's own thread) and the ops that issue them
  (``c10d::allreduce_``);
- ``overlap``: both at once; ``idle``: neither (on a GPU: no kernel, copy or set at all);
- ``wait``: time spent in collectives waiting for the other ranks. A collective ends on every rank
  at about the same moment, when the last rank has joined, so the rank that joined last spent
  only the transfer in it and every other rank also waited: per collective, a rank's wait is its
  duration minus the shortest duration any rank had for it (the k-th collective of a name in a
  step is the same collective on every rank). Durations, not start times, so the ranks' clocks
  need not agree.

Across ranks: the straggler, the rank the others wait for (the least waiting, when the others
wait at least a tenth of a step more), by how much, and where (the collective and the annotation
it was issued in). Per rank, the communication/computation overlap on HolisticTraceAnalysis's
definition (``get_comm_comp_overlap``): the share of communication-kernel time that runs while a
computation kernel runs. As HTA does: kernels are typed by name (communication ``nccl...Kernel``;
memory ``Memcpy``/``Memset``/``dma``; neither computation nor communication when the name holds
``Memcpy`` or ``Sync``); only kernels launched (by a correlated runtime call) before the last
profiled step starts count, because HTA leaves the last step out; with one step or none, every
device event counts. On a CPU trace the same share is given for CPU ops and collectives.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from common.report.job_files import RankFile, read_job
from common.report.intervals import Intervals
from common.report.model import ANNOTATION, OP, STEP_RE, Model
from common.report.tables import Tables

STRAGGLER_SHARE = 0.10  # the others wait at least this share of a step more than the straggler
STRAGGLER_MIN_US = 50.0
CPU_COMM_OPS = ("c10d::", "record_param_comms", "nccl:", "gloo:")  # CPU-side communication, not compute
_COLLECTIVE_NAME = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")


# ----------------------------------------------------------------------------- one rank


@dataclass(frozen=True)
class StepTimes:
    number: Optional[int]
    wall_us: float
    compute_us: float
    communication_us: float
    overlap_us: float
    idle_us: float


@dataclass(frozen=True)
class Collective:
    step: int  # index of the profiled step it was issued in (-1: outside every step)
    name: str  # AllReduce (NCCL), gloo:all_reduce, ...
    dur_us: float
    bytes: Optional[int]
    issued_in: Optional[str]  # the step's top-level annotation at its launch (forward, backward, ...)
    complete: bool  # False: still running when the profiler stopped


@dataclass(frozen=True)
class RankTrace:
    file: RankFile
    on_gpu: bool
    steps: tuple[StepTimes, ...]
    collectives: tuple[Collective, ...]
    overlap_pct: Optional[float]  # HTA's comm/comp overlap (GPU), or its CPU analogue


def hta_kernel_type(name: str) -> str:
    """HolisticTraceAnalysis's kernel types, by name: communication, memory, computation, other."""
    if name.startswith("nccl") and "Kernel" in name[4:]:
        return "communication"
    if name.startswith(("Memcpy", "Memset", "dma")):
        return "memory"
    if "Memcpy" in name or "Sync" in name:
        return "other"
    return "computation"


def _kernel_types(m: Model) -> np.ndarray:
    """HTA's type of every device event, as a code (0 communication, 1 memory, 2 computation, 3 other)."""
    codes = {"communication": 0, "memory": 1, "computation": 2, "other": 3}
    by_name = np.full(len(m.names), 3, dtype=np.int8)
    for nid in np.unique(m.dev.name).tolist():
        by_name[nid] = codes[hta_kernel_type(m.names[nid])]
    return by_name[m.dev.name]


def _hta_selection(m: Model) -> np.ndarray:
    """The device events HTA keeps: launched by a correlated runtime call before the last step starts
    (every device event when the trace has one step or none)."""
    dev = m.dev
    if m.window_source != "ProfilerStep" or len(m.steps) < 2:
        return np.ones(dev.n, dtype=bool)
    launch = dev.launch
    when = m.cpu.ts[np.maximum(launch, 0)]
    return (launch >= 0) & (when < m.steps[-1].start)


def intersection(a: Intervals, b: Intervals) -> Intervals:
    """The times covered by both unions."""
    if not len(a) or not len(b):
        return Intervals.empty()
    points = np.concatenate((a.starts, a.ends, b.starts, b.ends))
    in_a = np.concatenate((np.ones(len(a)), -np.ones(len(a)), np.zeros(2 * len(b))))
    in_b = np.concatenate((np.zeros(2 * len(a)), np.ones(len(b)), -np.ones(len(b))))
    order = np.argsort(points, kind="stable")
    points, depth_a, depth_b = points[order], np.cumsum(in_a[order]), np.cumsum(in_b[order])
    both = (depth_a[:-1] > 0) & (depth_b[:-1] > 0) & (points[1:] > points[:-1])
    return Intervals(points[:-1][both], points[1:][both])


def overlap_pct(compute: Intervals, comm: Intervals) -> Optional[float]:
    """The share of communication time that runs while compute runs; None without communication."""
    if comm.total <= 0:
        return None
    return 100.0 * intersection(compute, comm).total / comm.total


def hta_overlap_pct(m: Model) -> Optional[float]:
    """HolisticTraceAnalysis's ``get_comm_comp_overlap`` for this trace (None without NCCL kernels)."""
    if not m.dev.n:
        return None
    types, keep = _kernel_types(m), _hta_selection(m)
    ts, end = m.dev.ts, m.dev.end
    comm, comp = keep & (types == 0), keep & (types == 2)
    return overlap_pct(Intervals(ts[comp], end[comp]), Intervals(ts[comm], end[comm]))


def _lanes(t: Tables, f: RankFile) -> tuple[Intervals, Intervals, Intervals]:
    """(busy, compute, communication) unions over the whole trace (times relative to the window)."""
    m = t.model
    if m.has_gpu:
        types, ts, end = _kernel_types(m), m.dev.ts, m.dev.end
        return (t.gpu_busy, Intervals(ts[types == 2], end[types == 2]),
                Intervals(ts[types == 0], end[types == 0]))
    cpu = m.cpu
    comm_name = m.name_mask(lambda s: s.startswith(CPU_COMM_OPS))
    comm_op = comm_name[cpu.name] & (cpu.kind <= ANNOTATION)
    compute_sel = (cpu.kind == OP) & ~comm_op
    compute = Intervals(cpu.ts[compute_sel], cpu.end[compute_sel])
    starts = [c.ts - m.t0 for c in f.cpu_collectives]
    ends = [c.ts + c.dur - m.t0 for c in f.cpu_collectives]
    comm = Intervals(np.concatenate((cpu.ts[comm_op], starts)), np.concatenate((cpu.end[comm_op], ends)))
    return compute.union(comm), compute, comm


def _step_times(t: Tables, f: RankFile) -> tuple[tuple[StepTimes, ...], Optional[float]]:
    m = t.model
    busy, compute, comm = _lanes(t, f)
    both = intersection(compute, comm)
    a = np.array([s.start for s in m.steps])
    b = np.array([s.end for s in m.steps])
    per = {k: np.asarray(u.covered(a, b), dtype=np.float64) for k, u in
           (("busy", busy), ("compute", compute), ("comm", comm), ("both", both))}
    steps = tuple(StepTimes(s.number, s.dur, float(per["compute"][i]), float(per["comm"][i]), float(per["both"][i]),
                            max(s.dur - float(per["busy"][i]), 0.0)) for i, s in enumerate(m.steps))
    if m.has_gpu:
        return steps, hta_overlap_pct(m)
    w0, w1 = m.window
    comm_in = comm.covered(w0, w1)
    return steps, (100.0 * both.covered(w0, w1) / comm_in if comm_in > 0 else None)


def _top_annotations(m: Model):
    """The annotations right under each ProfilerStep (forward, backward, ...): (starts, ends, names)."""
    cpu = m.cpu
    is_step = m.name_mask(lambda s: bool(STEP_RE.match(s)))
    parent = cpu.parent
    top = (cpu.kind == ANNOTATION) & (parent >= 0)
    top &= is_step[cpu.name[np.maximum(parent, 0)]] & ~is_step[cpu.name]
    idx = np.flatnonzero(top)
    idx = idx[np.argsort(cpu.ts[idx], kind="stable")]
    return cpu.ts[idx], cpu.end[idx], [m.names[i] for i in cpu.name[idx].tolist()]


def _issued_in(tops, times: np.ndarray) -> list[Optional[str]]:
    starts, ends, names = tops
    i = np.searchsorted(starts, times, side="right") - 1
    return [names[j] if j >= 0 and t <= ends[j] else None for j, t in zip(i.tolist(), times.tolist())]


def _collectives(m: Model, f: RankFile) -> tuple[Collective, ...]:
    tops = _top_annotations(m)
    if m.has_gpu:
        dev = m.dev
        rows = np.flatnonzero(_kernel_types(m) == 0)
        rows = rows[np.argsort(dev.ts[rows], kind="stable")]  # in time order: the k-th of each step
        launch = dev.launch[rows]
        when = np.where(launch >= 0, m.cpu.ts[np.maximum(launch, 0)], dev.ts[rows])
        where = _issued_in(tops, when)
        return tuple(
            Collective(int(dev.step[r]), _short_name(m.names[dev.name[r]]), float(dev.dur[r]),
                       f.kernel_bytes.get(int(dev.corr[r])), where[i], True)
            for i, r in enumerate(rows.tolist()))
    events = sorted(f.cpu_collectives, key=lambda c: c.ts)
    starts = np.array([c.ts - m.t0 for c in events])
    steps = m.step_of(starts).tolist() if starts.size else []
    where = _issued_in(tops, starts)
    return tuple(Collective(int(steps[i]), c.name, c.dur, c.bytes, where[i], c.finished)
                 for i, c in enumerate(events))


def _short_name(kernel: str) -> str:
    match = _COLLECTIVE_NAME.match(kernel)
    return match.group(1) if match else kernel


def rank_trace(t: Tables, f: RankFile) -> RankTrace:
    steps, pct = _step_times(t, f)
    return RankTrace(f, t.has_gpu, steps, _collectives(t.model, f), pct)


# ----------------------------------------------------------------------------- the job


@dataclass(frozen=True)
class CollectiveCount:
    step: Optional[int]  # the ProfilerStep number
    name: str
    count: int
    bytes: Optional[int]  # the messages' total, None when the trace does not say


@dataclass(frozen=True)
class StepRow(StepTimes):
    """A rank's step times with its wait in collectives, known once every rank is read."""

    wait_us: float


@dataclass(frozen=True)
class RankSummary:
    """One rank: medians over its profiled steps, each step, and its collectives per step."""

    rank: int
    path: str
    step_us: float
    compute_us: float
    communication_us: float
    overlap_us: float
    idle_us: float
    wait_us: float
    overlap_pct: Optional[float]
    steps: tuple[StepRow, ...]
    collectives: tuple[CollectiveCount, ...]


@dataclass(frozen=True)
class Straggler:
    rank: int
    behind_us: float  # the other ranks' wait per step (median; their mean) minus its own
    collective: str  # where the others waited most: the collective ...
    issued_in: Optional[str]  # ... and the annotation it was issued in


@dataclass(frozen=True)
class JobReport:
    paths: tuple[str, ...]
    world_size: int
    backend: Optional[str]
    on_gpu: bool
    tag: Optional[str]
    overlap_basis: str  # "hta" (GPU kernels) or "cpu" (CPU ops and collectives)
    ranks: tuple[RankSummary, ...]
    straggler: Optional[Straggler]
    notes: tuple[str, ...]

    @property
    def median_step_us(self) -> float:
        return statistics.median(r.step_us for r in self.ranks)


def _collective_keys(t: RankTrace) -> list:
    """(step number, name, k) for the k-th collective of that name in its step; None outside steps."""
    seen: Counter = Counter()
    keys = []
    for c in t.collectives:
        number = t.steps[c.step].number if c.step >= 0 else None
        keys.append((number, c.name, seen[(number, c.name)]) if c.step >= 0 else None)
        seen[(number, c.name)] += 1
    return keys


def _waits(traces: list[RankTrace]) -> tuple[list[list[float]], list[str]]:
    """Per rank, per collective: the time it waited for the other ranks (0 where not comparable)."""
    keyed = [_collective_keys(t) for t in traces]
    index = [{k: i for i, k in enumerate(keys) if k is not None and t.collectives[i].complete}
             for keys, t in zip(keyed, traces)]
    common = set.intersection(*(set(ix) for ix in index))
    waits = [[0.0] * len(t.collectives) for t in traces]
    for key in common:
        durs = [t.collectives[ix[key]].dur_us for t, ix in zip(traces, index)]
        for r, ix in enumerate(index):
            waits[r][ix[key]] = durs[r] - min(durs)
    every = set().union(*(set(k for k in keys if k is not None) for keys in keyed))
    notes = []
    if len(every) > len(common):
        notes.append(f"{len(every) - len(common)} of {len(every)} collectives could not be compared across ranks "
                     "(missing on a rank, or still running when the profiler stopped): their wait counts as 0")
    return waits, notes


def _counts(t: RankTrace) -> tuple[CollectiveCount, ...]:
    groups: dict = defaultdict(list)
    for c in t.collectives:
        if c.step >= 0:
            groups[(c.step, c.name)].append(c.bytes)
    out = []
    for (step, name), sizes in sorted(groups.items()):
        total = None if any(s is None for s in sizes) else sum(sizes)
        out.append(CollectiveCount(t.steps[step].number, name, len(sizes), total))
    return tuple(out)


def _summary(t: RankTrace, waits: list[float]) -> RankSummary:
    per_step = np.zeros(len(t.steps))
    for c, w in zip(t.collectives, waits):
        if c.step >= 0:
            per_step[c.step] += w
    rows = tuple(StepRow(**asdict(s), wait_us=float(per_step[i])) for i, s in enumerate(t.steps))

    def med(key: str) -> float:
        return float(statistics.median(getattr(r, key) for r in rows)) if rows else 0.0

    return RankSummary(t.file.rank, str(t.file.path), med("wall_us"), med("compute_us"), med("communication_us"),
                       med("overlap_us"), med("idle_us"), med("wait_us"), t.overlap_pct, rows, _counts(t))


def _straggler(traces: list[RankTrace], waits: list[list[float]], ranks: list[RankSummary]) -> Optional[Straggler]:
    if len(ranks) < 2:
        return None
    slow = min(range(len(ranks)), key=lambda i: ranks[i].wait_us)
    others = [r.wait_us for i, r in enumerate(ranks) if i != slow]
    behind = statistics.fmean(others) - ranks[slow].wait_us
    step = statistics.median(r.step_us for r in ranks)
    if behind < max(STRAGGLER_SHARE * step, STRAGGLER_MIN_US):
        return None
    where: Counter = Counter()
    for i, (t, w) in enumerate(zip(traces, waits)):
        if i != slow:
            for c, wait in zip(t.collectives, w):
                where[(c.name, c.issued_in)] += wait
    (name, issued_in), _ = where.most_common(1)[0]
    return Straggler(ranks[slow].rank, behind, name, issued_in)


def job_report(traces: list[RankTrace]) -> JobReport:
    """The job's numbers from its ranks' traces (sorted by rank)."""
    waits, notes = _waits(traces)
    ranks = [_summary(t, w) for t, w in zip(traces, waits)]
    numbers = {tuple(s.number for s in t.steps) for t in traces}
    if len(numbers) > 1:
        notes.append("the ranks profiled different steps: collectives are compared step by step where both have them")
    first = traces[0].file
    on_gpu = any(t.on_gpu for t in traces)
    if not any(t.collectives for t in traces):
        notes.append("no collectives in these traces (no NCCL kernels, no gloo events): nothing to wait in")
    if not on_gpu and any(c.bytes is None for t in traces for c in t.collectives):
        notes.append("message sizes need --record-shapes on the CPU (gloo's events carry no sizes otherwise)")
    return JobReport(
        paths=tuple(str(t.file.path) for t in traces), world_size=first.world_size or len(traces),
        backend=first.backend, on_gpu=on_gpu, tag=first.tag, overlap_basis="hta" if on_gpu else "cpu",
        ranks=tuple(ranks), straggler=_straggler(traces, waits, ranks), notes=tuple(notes))


def read_ranks(paths: list[Path], parallel: bool = False, max_bytes: int | None = None) -> JobReport:
    """Check the files are one whole job, then model each rank's trace (one at a time) and compare.
    ``parallel`` (the command line): a big plain-JSON trace is decoded by two processes."""
    from common.report import model_of

    traces = []
    for f in read_job(paths):
        tables = model_of(f.path, parallel=parallel, max_bytes=max_bytes)
        traces.append(rank_trace(tables, f))
        del tables
    return job_report(traces)


def to_json(job: JobReport) -> dict:
    """The ``ranks`` section of the report's JSON (keys documented in docs/report.md, "JSON schema")."""
    from common.report.units import json_ready

    out = asdict(job)
    out["median_step_us"] = job.median_step_us
    return json_ready(out)
