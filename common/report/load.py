"""Load: bytes -> the few fields the analysis needs.

A Kineto/Chrome trace is a JSON object whose ``traceEvents`` list holds a few kinds of events; we
keep only complete events (``ph: "X"``, and ``B``/``E`` pairs turned into complete events) with
their name, category, time, thread and a handful of ``args`` (correlation, External id, launch
configuration, bytes). Everything else (flow arrows, instant memory events, metadata) is decoded
into empty structs: msgspec skips their fields without building them. ``.json`` and ``.json.gz``
are both read (gzip is recognised by its magic bytes, not the name); the gzip is decompressed
into memory, decoded, and the raw bytes are dropped before the model is built.

Timestamps and durations are microseconds, integer or float in the file, float here.
"""

from __future__ import annotations

import gc
import gzip
import mmap
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import msgspec
from msgspec import Struct

from common.errors import fail

LARGE_BYTES = 500_000_000  # Perfetto and TensorBoard become slow to open a trace this big

Num = Union[int, float, None]
IntStr = Union[int, str, None]


class Args(Struct, gc=False):
    """The event ``args`` we read; unknown keys are skipped by the decoder."""

    correlation: IntStr = None
    grid: Optional[list] = None
    block: Optional[list] = None
    registers: Num = msgspec.field(default=None, name="registers per thread")
    shared_memory: Num = msgspec.field(default=None, name="shared memory")
    blocks_per_sm: Num = msgspec.field(default=None, name="blocks per SM")
    occupancy: Num = msgspec.field(default=None, name="est. achieved occupancy %")
    bytes: Union[int, float, str, None] = None


class X(Struct, tag_field="ph", tag="X", gc=False):
    """A complete event: the only kind the model reads."""

    name: str = ""
    cat: str = ""
    ts: float = 0.0
    dur: float = 0.0
    pid: Union[int, str] = 0
    tid: Union[int, str] = 0
    args: Optional[Args] = None


# Set by B.__post_init__ while a decode runs: whether any "B" event was decoded, so that the common
# case (no B/E pairs) skips a second pass over millions of events. Cleared before each decode and
# read right after it; module state, so one decode at a time (not thread-safe).
_SEEN_B = []


class B(Struct, tag_field="ph", tag="B", gc=False):
    """A begin event; paired with the next ``E`` on its thread."""

    def __post_init__(self):
        if not _SEEN_B:
            _SEEN_B.append(True)

    name: str = ""
    cat: str = ""
    ts: float = 0.0
    pid: Union[int, str] = 0
    tid: Union[int, str] = 0
    args: Optional[Args] = None


class E(Struct, tag_field="ph", tag="E", gc=False):
    ts: float = 0.0
    pid: Union[int, str] = 0
    tid: Union[int, str] = 0


# Every other phase of the Chrome trace format: decoded into an empty struct (fields skipped).
_OTHER_PHASES = ["i", "I", "C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M", "V", "v", "R",
                 "c", "(", ")", "T", "p", "S", "F"]
_OTHERS = tuple(
    type(f"_Ph{i}", (Struct,), {}, tag_field="ph", tag=ph, gc=False) for i, ph in enumerate(_OTHER_PHASES)
)
Event = Union[(X, B, E) + _OTHERS]  # type: ignore[valid-type]


class _Trace(Struct):
    """The top level: the events plus the trace-level keys that say what ran where."""

    traceEvents: list[Event]  # type: ignore[valid-type]
    schemaVersion: Any = None
    deviceProperties: Any = None
    distributedInfo: Any = None
    cupti_version: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    hip_runtime_version: Any = None
    rocm_version: Any = None
    roctracer_version: Any = None
    torch_version: Any = None
    pytorch_version: Any = None
    python_version: Any = None
    cuda_version: Any = None
    cudnn_version: Any = None
    nccl_version: Any = None
    trace_id: Any = None
    host_name: Any = None
    hostname: Any = None
    displayTimeUnit: Any = None
    baseTimeNanoseconds: Any = None
    traceName: Any = None
    record_shapes: Any = None
    profile_memory: Any = None
    with_stack: Any = None
    with_flops: Any = None
    with_modules: Any = None
    lesson: Any = None  # the run's knobs, written by this suite's lessons (common.knobs)


META_KEYS = [f for f in _Trace.__struct_fields__ if f != "traceEvents"]
_DECODER = msgspec.json.Decoder(_Trace)


@dataclass
class Loaded:
    """What the model starts from: complete events and the trace-level metadata."""

    path: str
    size_bytes: int  # the JSON text's size (decompressed)
    file_bytes: int  # the file's size on disk
    events: list  # list[X]
    meta: dict = field(default_factory=dict)
    n_events: int = 0  # every event in traceEvents, of any phase
    notes: list = field(default_factory=list)
    columns: Optional[dict] = None  # set when the columns were extracted while loading (two processes)


def read_bytes(path: str | os.PathLike):
    """The trace's JSON text (gunzipped when the file is gzip) and the file's size on disk."""
    p = Path(path)
    if not p.exists():
        fail(f"{p}: no such file")
    if p.is_dir():
        fail(f"{p}: is a directory, not a trace file")
    try:
        with open(p, "rb") as f:
            head = f.read(2)
            size = os.fstat(f.fileno()).st_size
            if head != b"\x1f\x8b" and str(p).endswith(".gz"):
                fail(f"{p}: named .gz but not gzip-compressed")
            if head != b"\x1f\x8b" and size > (1 << 20):
                # a plain JSON file: map it instead of copying it (the decoder reads it in place)
                return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY), size
            f.seek(0)
            data = f.read()
    except OSError as exc:
        fail(f"{p}: cannot read it ({exc.strerror or exc})")
    except ValueError:  # mmap of a file emptied since the fstat above
        data = b""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            fail(f"{p}: not a valid gzip file, truncated or corrupt ({exc})")
    return data, size


SPLIT_MIN = 64 << 20  # plain JSON files this big are decoded by two processes, half each


def load(path: str | os.PathLike, graveyard: Optional[list] = None, extract=None) -> Loaded:
    """Read a trace file into :class:`Loaded`; bad input raises :class:`common.errors.BadInput`.

    With ``graveyard`` (a list), the decoded event list is parked there rather than freed. With
    ``extract`` (events -> columns), a big plain-JSON file is split at an event boundary near its
    middle, a forked child decodes and extracts the second half while this process does the first,
    and ``Loaded.columns`` holds the merged columns; any surprise falls back to one process.
    """
    data, file_bytes = read_bytes(path)
    size = len(data)
    if not data[:4096].strip() and not bytes(data).strip():
        fail(f"{path}: empty file, not a trace")
    enabled = gc.isenabled()
    gc.disable()  # millions of new objects: generational GC passes would only cost time
    try:
        if (extract is not None and isinstance(data, mmap.mmap) and size >= SPLIT_MIN and hasattr(os, "fork")
                and not os.environ.get("REPORT_ONE_PROCESS")):
            got = _load_split(data, extract, graveyard)
            if got is not None:
                columns, meta, n_events = got
                loaded = Loaded(str(path), size, file_bytes, [], meta, n_events, columns=columns)
                _large_note(loaded)
                return loaded
        _SEEN_B.clear()
        try:
            trace = _DECODER.decode(data)
            events, n_events = trace.traceEvents, len(trace.traceEvents)
            meta = {k: getattr(trace, k) for k in META_KEYS if getattr(trace, k) is not None}
            del trace
        except msgspec.ValidationError:
            _SEEN_B.clear()
            events, meta, n_events = _lenient(data, path)
        except msgspec.DecodeError as exc:
            fail(f"{path}: not JSON ({exc})")
        except UnicodeDecodeError:  # a string that is not UTF-8: read it with U+FFFD in its place
            _SEEN_B.clear()
            events, meta, n_events = _lenient(bytes(data).decode("utf-8", "replace").encode(), path)
        del data
        xs = _complete_events(events, bool(_SEEN_B))
        if graveyard is not None:
            graveyard.append(events)
        del events
    finally:
        if enabled:
            gc.enable()
    loaded = Loaded(str(path), size, file_bytes, xs, meta, n_events)
    _large_note(loaded)
    return loaded


def _large_note(loaded: Loaded) -> None:
    if loaded.size_bytes > LARGE_BYTES:
        loaded.notes.append(
            f"the trace is {loaded.size_bytes / 1e6:,.0f} MB of JSON: Perfetto and TensorBoard open files this "
            "big slowly (or not at all); profile fewer active steps (schedule active=1..3)"
        )


_BOUNDARY = re.compile(rb"\}\s*(,)\s+\{\s*\"ph\"")
_EVENTS_LIST = msgspec.json.Decoder(list[Event])


def _find_split(mm) -> Optional[tuple[int, int]]:
    """(comma between two events near the middle, position of the traceEvents array's ``]``)."""
    n = len(mm)
    m = _BOUNDARY.search(mm, n // 2, min(n, n // 2 + (8 << 20)))
    if not m:
        return None
    comma = m.start(1)
    # the array's end: the last ']' preceded by '}' whose tail parses as the rest of an object
    pos = n
    for _ in range(8):
        pos = mm.rfind(b"]", comma, pos)
        if pos < 0:
            return None
        before = mm[max(comma, pos - 64):pos].rstrip()
        if before.endswith(b"}"):
            tail = mm[pos + 1:].lstrip()
            tail = b"{" + tail[1:] if tail.startswith(b",") else (b"{}" if tail.rstrip() == b"}" else None)
            if tail is not None:
                try:
                    msgspec.json.decode(tail)
                    return comma, pos
                except (msgspec.DecodeError, UnicodeDecodeError):
                    pass
    return None


def _load_split(mm, extract, graveyard):
    """Decode + extract two halves in two processes; None when the file does not split cleanly."""
    import pickle

    found = _find_split(mm)
    if found is None:
        return None
    comma, end = found
    # mm is a private copy-on-write mapping: each process edits its own pages in place
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # no memory or processes left for a fork: one process
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: the second half, as a list
        os.close(r)
        code = 1
        try:
            mm[comma] = ord("[")
            _SEEN_B.clear()
            events = _EVENTS_LIST.decode(memoryview(mm)[comma:end + 1])
            # B/E pairs that lie wholly in this half pair up here; a pair split between the halves
            # has its B in the first half, which the parent checks (and then falls back)
            xs = _complete_events(events, bool(_SEEN_B))
            payload = pickle.dumps((extract(xs), len(events)), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(w, "wb") as f:
                f.write(payload)
            code = 0
        except BaseException:
            pass
        os._exit(code)
    os.close(w)
    try:
        saved = bytes(mm[comma:comma + 2])
        mm[comma:comma + 2] = b"]}"
        try:
            _SEEN_B.clear()
            trace = _DECODER.decode(memoryview(mm)[:comma + 2])
            ok = not _SEEN_B
        except (msgspec.MsgspecError, UnicodeDecodeError):
            ok = False
        mm[comma:comma + 2] = saved
        if ok:
            events = trace.traceEvents
            meta = {k: getattr(trace, k) for k in META_KEYS if getattr(trace, k) is not None}
            del trace
            xs = _complete_events(events, False)
            cols_a = extract(xs)
            n_a = len(events)
            if graveyard is not None:
                graveyard.append((events, xs))
            del events, xs
        with os.fdopen(r, "rb") as f:
            payload = f.read()
        _, status = os.waitpid(pid, 0)
    except BaseException:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except OSError:
            pass
        raise
    if not ok or status != 0 or not payload:
        return None
    cols_b, n_b = pickle.loads(payload)
    from common.report.model import merge

    # the tail keys after traceEvents (e.g. traceName) are in the second half
    tail = mm[end + 1:].lstrip()
    if tail.startswith(b","):
        try:
            extra = msgspec.json.decode(b"{" + tail[1:])
            meta.update({k: extra[k] for k in META_KEYS if extra.get(k) is not None and k not in meta})
        except (msgspec.DecodeError, UnicodeDecodeError):
            pass
    return merge(cols_a, cols_b), meta, n_a + n_b


def _complete_events(events: list, has_b: bool) -> list:
    """Complete events only; with ``has_b`` (the decode saw a ``B``), ``B``/``E`` pairs (per
    thread, a stack) become complete events too."""
    xs = [e for e in events if e.__class__ is X]
    if has_b:
        stacks: dict = {}
        for e in events:
            cls = e.__class__
            if cls is B:
                stacks.setdefault((e.pid, e.tid), []).append(e)
            elif cls is E:
                st = stacks.get((e.pid, e.tid))
                if st:
                    b = st.pop()
                    xs.append(X(b.name, b.cat, b.ts, max(0.0, e.ts - b.ts), b.pid, b.tid, b.args))
    return xs


def _lenient(data: bytes, path) -> tuple[list, dict, int]:
    """The slow path for traces whose fields have unexpected types: decode generically, convert."""
    try:
        doc = msgspec.json.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        fail(f"{path}: not JSON ({exc})")
    if not isinstance(doc, dict):
        fail(f"{path}: not a trace (the JSON is a {type(doc).__name__}, not an object with traceEvents)")
    raw = doc.get("traceEvents")
    if raw is None:
        fail(f"{path}: not a trace (no traceEvents)")
    if not isinstance(raw, list):
        fail(f"{path}: not a trace (traceEvents is not a list)")
    meta = {k: doc[k] for k in META_KEYS if doc.get(k) is not None}
    out: list = []
    for d in raw:
        if not isinstance(d, dict):
            continue
        ph = d.get("ph")
        if ph not in ("X", "B", "E"):
            continue
        try:
            ts = float(d.get("ts", 0.0))
            dur = float(d.get("dur", 0.0) or 0.0)
        except (TypeError, ValueError):
            continue
        pid, tid = d.get("pid", 0), d.get("tid", 0)
        pid = pid if isinstance(pid, (int, str)) else str(pid)
        tid = tid if isinstance(tid, (int, str)) else str(tid)
        if ph == "E":
            out.append(E(ts, pid, tid))
            continue
        args = _lenient_args(d.get("args"))
        name, cat = str(d.get("name", "")), str(d.get("cat", ""))
        out.append(X(name, cat, ts, dur, pid, tid, args) if ph == "X" else B(name, cat, ts, pid, tid, args))
    return out, meta, len(raw)


def _lenient_args(a) -> Optional[Args]:
    if not isinstance(a, dict):
        return None
    kw = {}
    v = a.get("correlation")
    if isinstance(v, (int, str)) and not isinstance(v, bool):
        kw["correlation"] = v
    for f, key in (("registers", "registers per thread"), ("shared_memory", "shared memory"),
                   ("blocks_per_sm", "blocks per SM"), ("occupancy", "est. achieved occupancy %"),
                   ("bytes", "bytes")):
        v = a.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            kw[f] = v
    for f in ("grid", "block"):
        v = a.get(f)
        if isinstance(v, list):
            kw[f] = v
    return Args(**kw)
