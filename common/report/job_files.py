"""Which traces form one job, and what each says about itself.

A job is given as a folder (every ``.json``/``.json.gz`` in it; the lessons' ``.txt`` tables and
hidden temporary files are left alone) or as several traces named ``..._rank<k>``. Each file is
read once here, with msgspec decoding a few fields per event: its rank and job (``distributedInfo``
and a lesson's ``"lesson"`` metadata; the file name as a fallback), and what the model does not
keep about collectives: a CPU backend's collective events (``gloo:all_reduce``, on the backend's
own thread) and the message sizes (a kernel's ``In msg nelems`` and ``dtype``, or the ``Input Dims``
and ``Input type`` that ``record_shapes`` gives the collective's annotation).

Anything that is not one whole job (a non-trace among the traces, two jobs, a missing or doubled
rank) raises :class:`common.errors.BadInput` before any number is computed.
"""

from __future__ import annotations

import bisect
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import msgspec

from common.commands import display_path
from common.errors import fail
from common.knobs import JobKnobs, RunKnobs
from common.printable import printable
from common.paths import TRACE_SUFFIXES
from common.report.load import json_error, read_bytes

RANK_IN_NAME = re.compile(r"(?:^|[_.-])rank[-_]?(\d+)(?=$|[_.-])")
CPU_COLLECTIVE_PREFIXES = ("gloo:",)  # a CPU backend's collective, timed on the backend's worker thread
GPU_COLLECTIVE_PREFIXES = ("nccl:",)  # the CPU-side annotation around a NCCL collective's launch
RUNTIME_CATS = frozenset({"cuda_runtime", "Runtime", "cuda_driver", "Driver"})
KERNEL_CATS = frozenset({"kernel", "Kernel"})

# bytes per element, by the names traces give dtypes (record_shapes' "Input type", NCCL's "dtype")
ELEMENT_BYTES = {
    "float": 4, "Float": 4, "float32": 4, "double": 8, "Double": 8, "c10::BFloat16": 2, "BFloat16": 2,
    "bfloat16": 2, "c10::Half": 2, "Half": 2, "float16": 2, "long int": 8, "Long": 8, "int64": 8, "int": 4,
    "Int": 4, "int32": 4, "short int": 2, "Short": 2, "signed char": 1, "Char": 1, "int8": 1,
    "unsigned char": 1, "Byte": 1, "uint8": 1, "bool": 1, "Bool": 1,
}


class _Args(msgspec.Struct):
    correlation: Any = None
    finished: Any = None
    input_dims: Any = msgspec.field(default=None, name="Input Dims")
    input_type: Any = msgspec.field(default=None, name="Input type")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    dtype: Any = None


class _Event(msgspec.Struct):
    ph: Any = None
    name: Any = None
    cat: Any = None
    ts: Any = None
    dur: Any = None
    tid: Any = None
    args: Optional[_Args] = None


class _File(msgspec.Struct):
    traceEvents: list[_Event]
    distributedInfo: Any = None
    lesson: Any = None


_DECODER = msgspec.json.Decoder(_File)


@dataclass(frozen=True)
class CpuCollective:
    """One collective of a CPU backend (gloo), as its worker thread timed it (absolute µs)."""

    name: str  # gloo:all_reduce
    ts: float
    dur: float
    finished: bool  # False: still running when the profiler stopped, so its end is unknown
    bytes: Optional[int]


@dataclass(frozen=True)
class RankFile:
    """One rank's trace: who it is, which job it belongs to, its collectives' sizes."""

    path: Path
    rank: int
    world_size: Optional[int]
    backend: Optional[str]
    job_id: Optional[str]  # torchrun's run id (lesson traces)
    tag: Optional[str]  # the lesson's tag without the rank (lesson traces)
    cpu_collectives: tuple[CpuCollective, ...] = ()
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


def read_job(paths: list[Path]) -> list[RankFile]:
    """Every file of the job, sorted by rank, after checking they are one whole job."""
    files = [read_rank_file(p) for p in paths]
    check_one_job(files)
    return sorted(files, key=lambda f: f.rank)


def read_rank_file(path: Path) -> RankFile:
    data, _ = read_bytes(path)
    try:
        doc = _DECODER.decode(data)
    except msgspec.ValidationError:
        doc = _loose(data, path)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        fail(f"{path}: not a trace: {json_error(data, exc)}; a job's folder should hold only its ranks' traces")
    del data
    info = doc.distributedInfo if isinstance(doc.distributedInfo, dict) else {}
    knobs = RunKnobs.from_json(doc.lesson)
    job: Optional[JobKnobs] = knobs.job if knobs else None
    rank = _int(info.get("rank"))
    if rank is None:
        rank = job.rank if job else _rank_from_name(path)
    world = _int(info.get("world_size")) or (job.world_size if job else None)
    backend = info.get("backend") if isinstance(info.get("backend"), str) else (job.backend if job else None)
    backend = printable(backend) if backend is not None else None  # names are data: shown escaped
    tag = printable(RANK_IN_NAME.sub("", knobs.tag)) if knobs and knobs.tag else None
    cpu, kernel_bytes = _collective_records(doc.traceEvents)
    return RankFile(path, rank, world, backend, printable(job.id) if job and job.id else None, tag, cpu, kernel_bytes)


def _loose(data, path) -> _File:
    """Traces whose fields have unexpected types: decode generically, keep what is usable."""
    try:
        doc = msgspec.json.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        fail(f"{path}: not a trace: {json_error(data, exc)}; a job's folder should hold only its ranks' traces")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail(f"{path}: not a trace (no traceEvents list); a job's folder should hold only its ranks' traces")
    events = []
    for e in doc["traceEvents"]:
        if isinstance(e, dict):
            a = e.get("args") if isinstance(e.get("args"), dict) else {}
            args = _Args(a.get("correlation"), a.get("finished"), a.get("Input Dims"), a.get("Input type"),
                         a.get("In msg nelems"), a.get("dtype"))
            events.append(_Event(e.get("ph"), e.get("name"), e.get("cat"), e.get("ts"), e.get("dur"), e.get("tid"), args))
    return _File(events, doc.get("distributedInfo"), doc.get("lesson"))


def _int(value) -> Optional[int]:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _float(value) -> Optional[float]:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _rank_from_name(path: Path) -> int:
    match = RANK_IN_NAME.search(_stem(path.name))
    if not match:
        fail(f"{path}: no rank: the trace has no distributedInfo and its name no rank<k> (a folder or rank*.json "
             "files are read as one multi-process job; name single traces for one report each)")
    return int(match.group(1))


# ----------------------------------------------------------------------------- collectives' records


def message_bytes(dims, types) -> Optional[int]:
    """Bytes of the tensors a record_shapes op lists (``Input Dims`` and ``Input type``), or None."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    total = 0
    for shape, kind in zip(dims, types):
        if kind == "TensorList" and isinstance(shape, list):
            continue  # the tensors inside a list carry no type here
        size = ELEMENT_BYTES.get(kind)
        if size is None or not isinstance(shape, list):
            continue
        n = 1
        for d in shape:
            if not isinstance(d, int):
                return None
            n *= d
        total += n * size
    return total or None


def _nccl_bytes(args: Optional[_Args]) -> Optional[int]:
    n = _int(args.in_nelems) if args else None
    size = ELEMENT_BYTES.get(args.dtype) if args and isinstance(args.dtype, str) else None
    return n * size if n is not None and size else None


def _collective_records(events: list) -> tuple[tuple[CpuCollective, ...], dict]:
    """The CPU backend's collectives, and the message bytes of each NCCL kernel (by correlation id):
    from the kernel's own args, else from the ``nccl:*`` annotation around its launch."""
    cpu: list[CpuCollective] = []
    kernels: list[tuple[int, Optional[int]]] = []  # (correlation, bytes from the kernel's args)
    launches: dict[int, tuple[Any, float]] = {}  # correlation -> (thread, launch time)
    annotations: dict[Any, list[tuple[float, float, Optional[int]]]] = defaultdict(list)  # thread -> (ts, end, bytes)
    for e in events:
        name, ph = e.name, e.ph
        if ph != "X" or not isinstance(name, str):
            continue
        ts, dur = _float(e.ts), _float(e.dur)
        if ts is None:
            continue
        if name.startswith(CPU_COLLECTIVE_PREFIXES):
            a = e.args
            cpu.append(CpuCollective(name, ts, max(dur or 0.0, 0.0), not (a and a.finished is False),
                                     message_bytes(a.input_dims, a.input_type) if a else None))
        elif e.cat in KERNEL_CATS and name.startswith("nccl"):
            corr = _int(e.args.correlation) if e.args else None
            if corr is not None:
                kernels.append((corr, _nccl_bytes(e.args)))
        elif e.cat in RUNTIME_CATS and e.args is not None:
            corr = _int(e.args.correlation)
            if corr is not None:
                launches[corr] = (e.tid, ts)
        elif name.startswith(GPU_COLLECTIVE_PREFIXES) and e.args is not None:
            annotations[e.tid].append((ts, ts + (dur or 0.0), message_bytes(e.args.input_dims, e.args.input_type)))
    return tuple(cpu), _kernel_bytes(kernels, launches, annotations)


def _kernel_bytes(kernels, launches, annotations) -> dict:
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
