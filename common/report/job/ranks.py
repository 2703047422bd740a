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
  step is the same collective on every rank), spent at the collective's start. Durations, not
  start times, so the ranks' clocks need not agree. Collectives overlap (gloo runs a bucket's
  all-reduce while the next one is issued), so a step's wait is the union of those waiting
  intervals inside the step, never their sum: it never exceeds the step's communication, nor the step.

Across ranks: the straggler, the rank the others wait for (:mod:`.straggler` says when the run can
name one, and otherwise why it cannot tell), by how much, and where (the collective and the
annotation it was issued in). Per rank, the communication/computation overlap on HolisticTraceAnalysis's
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

from common.report.job.result import CollectiveCount, JobReport, RankSummary, StepRow, StepTimes, Straggler
from common.report.load.columns import CPU_COLLECTIVE_PREFIXES, GPU_COLLECTIVE_PREFIXES
from common.report.load.inputs import DEFAULT_MAX_BYTES
from common.report.model.intervals import Intervals
from common.report.job.files import RankFile, check_one_job, rank_file
from common.report.load.reader import load
from common.report.model.build import ANNOTATION, OP, Model, build
from common.report.facts.overlap import intersection, kernel_types
from common.report.job.straggler import RankWork, judge, step_spread, top_annotations, work_of
from common.report.facts.tables import Tables, build_tables

CPU_COMM_OPS = ("c10d::", "record_param_comms") + GPU_COLLECTIVE_PREFIXES + CPU_COLLECTIVE_PREFIXES  # not compute
_COLLECTIVE_NAME = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")


# ----------------------------------------------------------------------------- one rank


@dataclass(frozen=True)
class Collective:
    step: int  # index of the profiled step it was issued in (-1: outside every step)
    name: str  # AllReduce (NCCL), gloo:all_reduce, ...
    start_us: float  # on the trace's clock, relative to its window (as the steps)
    dur_us: float
    bytes: Optional[int]
    issued_in: Optional[str]  # the step's top-level annotation at its launch (forward, backward, ...)
    complete: bool  # False: still running when the profiler stopped


@dataclass(frozen=True)
class RankTrace:
    file: RankFile
    on_gpu: bool
    steps: tuple[StepTimes, ...]
    spans: tuple[tuple[float, float], ...]  # each step's (start, end), on the collectives' clock
    collectives: tuple[Collective, ...]
    overlap_pct: Optional[float]  # HTA's comm/comp overlap (GPU), or its CPU analogue
    work: RankWork  # its ops and top-level annotations per step (what the straggler verdict compares)


def _lanes(t: Tables, f: RankFile) -> tuple[Intervals, Intervals, Intervals]:
    """(busy, compute, communication) unions over the whole trace (times relative to the window)."""
    m = t.model
    if m.has_gpu:
        types, ts, end = kernel_types(m), m.dev.ts, m.dev.end
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
        return steps, t.numbers.gpu.comm_comp_overlap_pct
    w0, w1 = m.window
    comm_in = comm.covered(w0, w1)
    return steps, (100.0 * both.covered(w0, w1) / comm_in if comm_in > 0 else None)


def _issued_in(tops, times: np.ndarray) -> list[Optional[str]]:
    starts, ends, names = tops
    i = np.searchsorted(starts, times, side="right") - 1
    return [names[j] if j >= 0 and t <= ends[j] else None for j, t in zip(i.tolist(), times.tolist())]


def _collectives(m: Model, f: RankFile) -> tuple[Collective, ...]:
    tops = top_annotations(m)
    if m.has_gpu:
        dev = m.dev
        rows = np.flatnonzero(kernel_types(m) == 0)
        rows = rows[np.argsort(dev.ts[rows], kind="stable")]  # in time order: the k-th of each step
        launch = dev.launch[rows]
        when = np.where(launch >= 0, m.cpu.ts[np.maximum(launch, 0)], dev.ts[rows])
        where = _issued_in(tops, when)
        return tuple(
            Collective(int(dev.step[r]), _short_name(m.names[dev.name[r]]), float(dev.ts[r]), float(dev.dur[r]),
                       f.kernel_bytes.get(int(dev.corr[r])), where[i], True)
            for i, r in enumerate(rows.tolist()))
    events = sorted(f.cpu_collectives, key=lambda c: c.ts)
    starts = np.array([c.ts - m.t0 for c in events])
    steps = m.step_of(starts).tolist() if starts.size else []
    where = _issued_in(tops, starts)
    return tuple(Collective(int(steps[i]), c.name, float(starts[i]), c.dur, c.bytes, where[i], c.finished)
                 for i, c in enumerate(events))


def _short_name(kernel: str) -> str:
    match = _COLLECTIVE_NAME.match(kernel)
    return match.group(1) if match else kernel


def rank_trace(t: Tables, f: RankFile) -> RankTrace:
    steps, pct = _step_times(t, f)
    spans = tuple((s.start, s.end) for s in t.model.steps)
    return RankTrace(f, t.has_gpu, steps, spans, _collectives(t.model, f), pct, work_of(t.model))


# ----------------------------------------------------------------------------- the job


def _collective_keys(t: RankTrace) -> list:
    """(step number, name, k) for the k-th collective of that name in its step; None outside steps."""
    seen: Counter = Counter()
    keys = []
    for c in t.collectives:
        number = t.steps[c.step].number if c.step >= 0 else None
        keys.append((number, c.name, seen[(number, c.name)]) if c.step >= 0 else None)
        seen[(number, c.name)] += 1
    return keys


def _waits(traces: list[RankTrace]) -> tuple[list[list[Optional[float]]], list[str]]:
    """Per rank, per collective: the time it waited for the other ranks (None where not comparable)."""
    keyed = [_collective_keys(t) for t in traces]
    index = [{k: i for i, k in enumerate(keys) if k is not None and t.collectives[i].complete}
             for keys, t in zip(keyed, traces)]
    common = set.intersection(*(set(ix) for ix in index))
    waits: list[list[Optional[float]]] = [[None] * len(t.collectives) for t in traces]
    for key in common:
        durs = [t.collectives[ix[key]].dur_us for t, ix in zip(traces, index)]
        for r, ix in enumerate(index):
            waits[r][ix[key]] = durs[r] - min(durs)
    every = set().union(*(set(k for k in keys if k is not None) for keys in keyed))
    notes = []
    if len(every) > len(common):
        notes.append(f"{len(every) - len(common)} of {len(every)} collectives could not be compared across ranks "
                     "(missing on a rank, or still running when the profiler stopped): their wait counts as 0, and "
                     "a rank's median wait leaves their steps out")
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


def step_waits(t: RankTrace, waits: list[float]) -> np.ndarray:
    """Per step, the union of the rank's waiting intervals (each collective's first ``wait`` µs) inside
    the step: overlapping collectives wait at the same time, once."""
    waiting = Intervals(np.array([c.start_us for c in t.collectives]),
                        np.array([c.start_us + w for c, w in zip(t.collectives, waits)]))
    spans = np.array(t.spans, dtype=np.float64).reshape(-1, 2)
    per_step = np.asarray(waiting.covered(spans[:, 0], spans[:, 1]), dtype=np.float64).reshape(-1)
    for s, w in zip(t.steps, per_step.tolist()):  # inside the collectives' union, inside the step
        assert w <= s.communication_us + 1e-3 and w <= s.wall_us + 1e-3, (s, w)
    return per_step


def _summary(t: RankTrace, waits: list[Optional[float]]) -> RankSummary:
    per_step = step_waits(t, [w or 0.0 for w in waits])
    rows = tuple(StepRow(**asdict(s), wait_us=float(per_step[i])) for i, s in enumerate(t.steps))
    unknown = {c.step for c, w in zip(t.collectives, waits) if w is None}  # a collective not compared
    compared = [r for i, r in enumerate(rows) if i not in unknown]

    def med(key: str) -> float:
        use = compared if key == "wait_us" and compared else rows
        return float(statistics.median(getattr(r, key) for r in use)) if use else 0.0

    return RankSummary(t.file.rank, str(t.file.path), med("wall_us"), med("compute_us"), med("communication_us"),
                       med("overlap_us"), med("idle_us"), med("wait_us"), t.overlap_pct, rows, _counts(t))


def _straggler(traces: list[RankTrace], waits: list[list[float]], ranks: list[RankSummary]):
    """The straggler (:mod:`.straggler` decides), where the others waited for it, or why none is named."""
    verdict = judge(ranks, [t.work for t in traces], any(t.on_gpu for t in traces))
    if verdict.lead is None:
        return None, verdict.cannot_tell
    slow = verdict.lead.slow
    where: Counter = Counter()
    for i, (t, w) in enumerate(zip(traces, waits)):
        if i != slow:
            for c, wait in zip(t.collectives, w):
                where[(c.name, c.issued_in)] += wait or 0.0
    (name, issued_in), _ = where.most_common(1)[0]
    return Straggler(ranks[slow].rank, verdict.lead.behind_us, name, issued_in, verdict.annotation,
                     verdict.annotation_us), None


def job_report(traces: list[RankTrace]) -> JobReport:
    """The job's numbers from its ranks' traces (sorted by rank)."""
    waits, notes = _waits(traces)
    ranks = [_summary(t, w) for t, w in zip(traces, waits)]
    numbers = {tuple(s.number for s in t.steps) for t in traces}
    if len(numbers) > 1:
        notes.append("the ranks profiled different steps: collectives are compared step by step where both have them")
    first = traces[0].file
    on_gpu = any(t.on_gpu for t in traces)
    straggler, cannot_tell = _straggler(traces, waits, ranks)
    if not any(t.collectives for t in traces):
        notes.append("no collectives in these traces (no NCCL kernels, no gloo events): nothing to wait in")
    if not on_gpu and any(c.bytes is None for t in traces for c in t.collectives):
        notes.append("message sizes need --record-shapes on the CPU (gloo's events carry no sizes otherwise)")
    return JobReport(
        paths=tuple(str(t.file.path) for t in traces), world_size=first.world_size or len(traces),
        backend=first.backend, on_gpu=on_gpu, tag=first.tag, overlap_basis="hta" if on_gpu else "cpu",
        ranks=tuple(ranks), straggler=straggler, step_spread_us=step_spread(ranks)[0],
        straggler_cannot_tell=cannot_tell, notes=tuple(notes))


def read_rank(path: Path, parallel: bool = False, max_bytes: int | None = None) -> RankTrace:
    """One rank's trace, decoded once: what it says about its job (:func:`.files.rank_file`) and
    its model's numbers, from the same :class:`~common.report.load.reader.Loaded`."""
    loaded = load(path, parallel=parallel, max_bytes=max_bytes or DEFAULT_MAX_BYTES)
    f = rank_file(loaded)
    return rank_trace(build_tables(build(loaded)), f)


def read_ranks(paths: list[Path], parallel: bool = False, max_bytes: int | None = None) -> JobReport:
    """Model each rank's trace (one at a time: only its RankTrace is kept), check the files are one
    whole job, and compare. ``parallel`` (the command line): a big plain-JSON trace is decoded by two
    processes."""
    traces = [read_rank(p, parallel, max_bytes) for p in paths]
    check_one_job([t.file for t in traces])
    return job_report(sorted(traces, key=lambda t: t.file.rank))
