"""Which traces form one job, and what each says about itself.

A job is given as a folder (every ``.json``/``.json.gz`` in it; the lessons' ``.txt`` tables and
hidden temporary files are left alone) or as several traces named ``..._rank<k>``. Each file is
decoded once, by the report's loader (:mod:`~common.report.load.reader`); :func:`rank_file` reads from that
:class:`~common.report.load.reader.Loaded` its rank and job (``distributedInfo`` and a lesson's ``"lesson"``
metadata; the file name as a fallback), and what the model does not keep about collectives: a CPU
backend's collective events (``gloo:all_reduce``, on the backend's own thread) and the message sizes
(a kernel's ``In msg nelems`` and ``dtype``, or the ``Input Dims`` and ``Input type`` that
``record_shapes`` gives the collective's annotation).

Anything that is not one whole job (a non-trace among the traces, two jobs, a missing or doubled
rank) raises :class:`common.errors.BadInput` (:func:`check_one_job`) before the job's numbers are
computed.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from common.commands import display_path
from common.errors import fail
from common.knobs import JobKnobs
from common.paths import TRACE_SUFFIXES
from common.printable import printable
from common.report.load.columns import (CPU_COLLECTIVE_PREFIXES, GPU_COLLECTIVE_PREFIXES, NCCL_KERNEL_PREFIX,
                                   CollectiveEvent, Columns, Group)
from common.report.load.reader import Loaded

RANK_IN_NAME = re.compile(r"(?:^|[_.-])rank[-_]?(\d+)(?=$|[_.-])")


@dataclass(frozen=True)
class RankFile:
    """One rank's trace: who it is, which job it belongs to, its collectives' sizes."""

    path: Path
    rank: int
    world_size: Optional[int]
    backend: Optional[str]
    job_id: Optional[str]  # torchrun's run id (lesson traces)
    tag: Optional[str]  # the lesson's tag without the rank (lesson traces)
    cpu_collectives: tuple[CollectiveEvent, ...] = ()  # the CPU backend's (gloo), absolute µs
    kernel_bytes: dict = field(default_factory=dict)  # NCCL kernel correlation id -> message bytes

    @property
    def job_key(self) -> tuple:
        return (self.job_id, self.tag, self.world_size, self.backend)


def job_inputs(inputs: list[str]) -> Optional[list[Path]]:
    """The trace files of a job when ``inputs`` name one (a folder, or several ``..._rank<k>``
    traces); None when they are ordinary traces for the one-trace report."""
    if len(inputs) == 1 and _is_folder(inputs[0]):
        return traces_in_folder(Path(inputs[0]))
    if len(inputs) >= 2 and all(RANK_IN_NAME.search(_stem(Path(p).name)) for p in inputs):
        return [Path(p) for p in inputs]
    return None


def _is_folder(path: str) -> bool:
    """A folder we can look into; any other path (too long, missing, a device) is the one-trace
    reader's to refuse in its own words."""
    try:
        return Path(path).is_dir()
    except OSError:
        return False


def traces_in_folder(folder: Path) -> list[Path]:
    try:
        names = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    except OSError as exc:
        fail(f"{folder}: cannot list the folder ({exc.strerror or exc})")
    # the report's own annotated copies (--annotate) are the same ranks again: not part of the job
    traces = [p for p in names if p.name.endswith(TRACE_SUFFIXES) and ".annotated." not in p.name]
    if not traces:
        fail(f"{folder}: no traces (.json or .json.gz) in this folder")
    return traces


def _stem(name: str) -> str:
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def rank_file(loaded: Loaded) -> RankFile:
    """What one rank's loaded trace says about itself and its job (no second read of the file)."""
    path = Path(loaded.path)
    info = loaded.meta.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    knobs = loaded.knobs
    job: Optional[JobKnobs] = knobs.job if knobs else None
    rank = _int(info.get("rank"))
    if rank is None:
        rank = job.rank if job else _rank_from_name(path)
    world = _int(info.get("world_size")) or (job.world_size if job else None)
    backend = info.get("backend") if isinstance(info.get("backend"), str) else (job.backend if job else None)
    backend = printable(backend) if backend is not None else None  # names are data: shown escaped
    tag = printable(RANK_IN_NAME.sub("", knobs.tag)) if knobs and knobs.tag else None
    c = loaded.columns
    cpu = tuple(e for e in c.collectives if e.name.startswith(CPU_COLLECTIVE_PREFIXES))
    return RankFile(path, rank, world, backend, printable(job.id) if job and job.id else None, tag, cpu,
                    kernel_bytes(c))


def _int(value) -> Optional[int]:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _rank_from_name(path: Path) -> int:
    match = RANK_IN_NAME.search(_stem(path.name))
    if not match:
        fail(f"{path}: no rank: the trace has no distributedInfo and its name no rank<k> (a folder or rank*.json "
             "files are read as one multi-process job; name single traces for one report each)")
    return int(match.group(1))


# ----------------------------------------------------------------------------- collectives' sizes


def kernel_bytes(c: Columns) -> dict:
    """The message bytes of each NCCL kernel, by correlation id: from the kernel's own args, else from
    the ``nccl:*`` annotation around its launch (the last one begun on the launching thread, if it
    still runs at the launch)."""
    dev = c.device_rows
    nccl_name = np.fromiter((n.startswith(NCCL_KERNEL_PREFIX) for n in c.names), bool, len(c.names))
    nccl = (c.group[dev] == Group.KERNEL) & nccl_name[c.name[dev]]
    kernels = [(corr, None if size != size else int(size))  # NaN: not in the kernel's args
               for corr, size in zip(c.dev_corr[nccl].tolist(), c.dev_msg_bytes[nccl].tolist()) if corr >= 0]
    unsized = {corr for corr, size in kernels if size is None}
    launches = _launches(c, unsized) if unsized else {}
    annotations: dict = defaultdict(list)  # thread -> [(start, end, bytes)]
    for e in c.collectives:
        if e.name.startswith(GPU_COLLECTIVE_PREFIXES):
            annotations[e.tid].append((e.ts, e.ts + e.dur, e.bytes))
    for spans in annotations.values():
        spans.sort()
    starts = {tid: [s[0] for s in spans] for tid, spans in annotations.items()}
    out = {}
    for corr, size in kernels:
        if size is None and corr in launches:
            tid, t = launches[corr]
            i = bisect.bisect_right(starts.get(tid, []), t) - 1
            if i >= 0 and annotations[tid][i][1] >= t:
                size = annotations[tid][i][2]
        if size is not None:
            out[corr] = size
    return out


def _launches(c: Columns, wanted: set) -> dict:
    """correlation id -> (thread, time) of the runtime call that launched it (the last such call)."""
    cpu = c.cpu_rows
    runtime = np.flatnonzero(c.group[cpu] == Group.RUNTIME)
    corr = c.corr[runtime].tolist()
    thread = c.thread[runtime].tolist()
    ts = c.ts[cpu[runtime]].tolist()
    return {k: (c.threads[t], when) for k, t, when in zip(corr, thread, ts) if k in wanted}


# ----------------------------------------------------------------------------- one job


def check_one_job(files: list[RankFile]) -> None:
    """One job, every rank once: else one clear error naming what is wrong."""
    jobs: dict[tuple, list[RankFile]] = defaultdict(list)
    for f in files:
        jobs[f.job_key].append(f)
    if len(jobs) > 1:
        described = _describe_jobs(jobs)
        fail(f"these traces come from {len(jobs)} different jobs ({described}); give one job's traces, "
             f"e.g. DIR/<tag>_rank*.json")
    by_rank: dict[int, list[RankFile]] = defaultdict(list)
    for f in files:
        by_rank[f.rank].append(f)
    for rank, same in sorted(by_rank.items()):
        if len(same) > 1:
            fail(f"rank {rank} appears in {len(same)} traces ({', '.join(display_path(f.path) for f in same)}); "
                 "give each rank's trace once")
    world = files[0].world_size or max(by_rank) + 1
    missing = sorted(set(range(world)) - set(by_rank))
    extra = sorted(r for r in by_rank if not 0 <= r < world)
    if extra:
        fail(f"rank {extra[0]} is outside the job's {world} ranks (0..{world - 1}): {display_path(by_rank[extra[0]][0].path)}")
    if missing:
        have = ", ".join(map(str, sorted(by_rank)))
        fail(f"the job has {world} ranks but rank{'s' if len(missing) > 1 else ''} "
             f"{', '.join(map(str, missing))} {'are' if len(missing) > 1 else 'is'} missing (found {have})")


_JOB_KEY_FIELDS = ("run id", "tag", "world size", "backend")  # RankFile.job_key, in order


def _describe_jobs(jobs: dict) -> str:
    """Each job by what tells it from the others (its run id, tag, world size or backend), and its ranks."""
    keys = list(jobs)
    differing = [i for i in range(len(_JOB_KEY_FIELDS)) if len({k[i] for k in keys}) > 1]
    described = []
    for key, group in jobs.items():
        what = ", ".join(f"{_JOB_KEY_FIELDS[i]} {key[i] if key[i] is not None else 'not given'}" for i in differing)
        ranks = ", ".join(str(g.rank) for g in sorted(group, key=lambda g: g.rank))
        described.append(f"{what}: rank{'s' if len(group) > 1 else ''} {ranks}")
    return "; ".join(described)
