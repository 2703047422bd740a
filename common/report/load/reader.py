"""Load: a trace file -> the columns the model reads.

What is read: a regular file (or ``-``, standard input) of at most ``max_bytes`` of JSON text,
gzip-compressed or not (gzip is recognised by its magic bytes, not the name, and decompressed no
further than the cap), holding either a JSON object with ``traceEvents`` (Kineto, Chrome's JSON
Object format) or a bare JSON array of events (Chrome's JSON Array format), with or without a
UTF-8 byte-order mark. Anything else (a device such as ``/dev/zero``, a FIFO, a folder, text that
is not JSON, JSON nested deeper than Python can follow) ends in :class:`common.errors.BadInput`
with one line that says why; nothing here waits on a writer or reads without bound.

Of the events, complete events (``ph: "X"``, and ``B``/``E`` pairs turned into complete
events) are kept, with their name, category, time, thread and a handful of ``args``, and so are the
``[memory]`` instant events (``ph: "i"``, written with ``profile_memory=True``: bytes, totals, address,
device); every other phase (flow arrows, metadata) is decoded into an empty struct whose fields
msgspec skips. The structs become :class:`~common.report.load.columns.Columns` here, and the structs
are dropped before the model is built.

Speed and memory are this module's business and stay inside it: a plain JSON file is memory-mapped,
not copied; the garbage collector is off while millions of structs are made; JSON text over
``SPLIT_MIN`` is decoded a slice of ``SLICE_BYTES`` at a time (cut between events, :mod:`.spans`),
each slice's structs turned into columns and freed before the next, so the peak holds columns, not
every decoded event; on the command line a big plain file's slices are shared by two processes, half
each (:func:`load` with ``parallel``). A smaller file is decoded at once, and its structs can be kept
until the process leaves with ``os._exit`` instead of being freed one by one
(:func:`keep_decoded_until_exit`).
"""

from __future__ import annotations

import gc
import mmap
import os
import pickle
import re
import stat
import sys
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Optional, Union

import msgspec
from msgspec import Struct

from common.errors import fail
from common.knobs import METADATA_KEY, RunKnobs
from common.printable import printable_all
from common.report.load.columns import Columns, extract, merge
from common.report.load.inputs import DEFAULT_MAX_BYTES, STDIN, shorten
from common.report.load.spans import event_cuts

MEMORY_EVENT_NAME = "[memory]"  # the instant events profile_memory=True writes
SPLIT_MIN = 64 << 20  # JSON text this big is decoded a slice at a time; a plain file, by two processes, half each
SLICE_BYTES = 32 << 20  # the size of a slice
MAX_META_DEPTH = 32  # trace-level metadata nested deeper than this is dropped (no real trace nests so)

Number = Union[int, float, None]
IdOrText = Union[int, str, None]


class Args(Struct, gc=False):
    """The event ``args`` we read; unknown keys are skipped by the decoder."""

    correlation: IdOrText = None
    grid: Optional[list] = None
    block: Optional[list] = None
    registers: Number = msgspec.field(default=None, name="registers per thread")
    shared_memory: Number = msgspec.field(default=None, name="shared memory")
    blocks_per_sm: Number = msgspec.field(default=None, name="blocks per SM")
    occupancy: Number = msgspec.field(default=None, name="est. achieved occupancy %")
    bytes: Union[int, float, str, None] = None
    # record_shapes' lists (:mod:`.shapes`; the columns keep them only for the roofline's ops)
    input_dims: Any = msgspec.field(default=None, name="Input Dims")
    input_type: Any = msgspec.field(default=None, name="Input type")
    concrete_inputs: Any = msgspec.field(default=None, name="Concrete Inputs")
    # collectives (:func:`~common.report.load.columns.collective_records`): a CPU backend's event still running
    # when the profiler stopped (``finished: false``), and a NCCL kernel's message (elements, their dtype)
    finished: Any = None
    msg_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    msg_dtype: Any = msgspec.field(default=None, name="dtype")


class CompleteEvent(Struct, tag_field="ph", tag="X", gc=False):
    """A complete event (``ph: "X"``): the only kind the model reads."""

    name: str = ""
    cat: str = ""
    ts: float = 0.0
    dur: float = 0.0
    pid: Union[int, str] = 0
    tid: Union[int, str] = 0
    args: Optional[Args] = None


class MemoryArgs(Struct, gc=False):
    """The ``args`` of a ``[memory]`` instant event (``profile_memory=True``): what one allocation (Bytes > 0)
    or free (Bytes < 0) did, and, in traces since PyTorch 1.10, the allocator's totals after it and the address."""

    bytes: Number = msgspec.field(default=None, name="Bytes")
    total_allocated: Number = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Number = msgspec.field(default=None, name="Total Reserved")
    addr: Number = msgspec.field(default=None, name="Addr")
    device_type: Number = msgspec.field(default=None, name="Device Type")
    device_id: Number = msgspec.field(default=None, name="Device Id")


class InstantEvent(Struct, tag_field="ph", tag="i", gc=False):
    """An instant event (``ph: "i"``): the model reads those named ``[memory]``."""

    name: str = ""
    ts: float = 0.0
    tid: Union[int, str] = 0
    args: Optional[MemoryArgs] = None


class EndEvent(Struct, tag_field="ph", tag="E", gc=False):
    """The end of a ``B`` event on its thread."""

    ts: float = 0.0
    pid: Union[int, str] = 0
    tid: Union[int, str] = 0


_BEGIN_FIELDS = [("name", str, ""), ("cat", str, ""), ("ts", float, 0.0), ("pid", Union[int, str], 0),
                 ("tid", Union[int, str], 0), ("args", Optional[Args], None)]
# Every other phase of the Chrome trace format: decoded into an empty struct (fields skipped).
_OTHER_PHASES = ["I", "C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M", "V", "v", "R",
                 "c", "(", ")", "T", "p", "S", "F"]
_OTHER_EVENTS = tuple(msgspec.defstruct(f"Phase{i}", [], tag_field="ph", tag=ph, gc=False)
                      for i, ph in enumerate(_OTHER_PHASES))
META_KEYS = ("schemaVersion", "deviceProperties", "distributedInfo", "cupti_version", "cuda_runtime_version",
             "cuda_driver_version", "hip_runtime_version", "rocm_version", "roctracer_version", "torch_version",
             "pytorch_version", "python_version", "cuda_version", "cudnn_version", "nccl_version", "trace_id",
             "host_name", "hostname", "displayTimeUnit", "baseTimeNanoseconds", "traceName", "record_shapes",
             "profile_memory", "with_stack", "with_flops", "with_modules",
             "lesson",  # the knobs a lesson of this project wrote (common/knobs.py)
             "report_findings")  # {"pid", "events"}: the Findings track the report drew (common/report/render/annotate.py)


class _Schema:
    """The decoders of one decode. Its begin-event struct records, in this object and nowhere else,
    that the decode met a ``B`` event, so the common case (no B/E pairs) skips a second pass."""

    def __init__(self) -> None:
        seen = self.begins = []

        def note_begin(_event) -> None:
            if not seen:
                seen.append(True)

        self.begin_type = msgspec.defstruct("BeginEvent", _BEGIN_FIELDS, tag_field="ph", tag="B", gc=False,
                                            namespace={"__post_init__": note_begin})
        event = Union[(CompleteEvent, self.begin_type, EndEvent, InstantEvent) + _OTHER_EVENTS]  # type: ignore[valid-type]
        trace = msgspec.defstruct("Trace", [("traceEvents", list[event])] + [(k, Any, None) for k in META_KEYS])
        self.object_form = msgspec.json.Decoder(trace)
        self.array_form = msgspec.json.Decoder(list[event])

    @property
    def saw_begin(self) -> bool:
        return bool(self.begins)

    def decode(self, view, array_form: bool) -> tuple[list, dict]:
        """(the events, the trace-level metadata) of JSON text in either form; decode errors propagate."""
        if array_form:
            return self.array_form.decode(view), {}
        trace = self.object_form.decode(view)
        return trace.traceEvents, {k: getattr(trace, k) for k in META_KEYS if getattr(trace, k) is not None}


@dataclass(frozen=True, eq=False)
class Loaded:
    """What the model starts from: the columns of the complete events, the trace-level metadata and
    the run's knobs (a lesson's ``"lesson"`` metadata, parsed here once; None for other traces)."""

    path: str
    size_bytes: int  # the JSON text's size (decompressed)
    file_bytes: int  # the file's size on disk
    columns: Columns
    meta: dict
    knobs: Optional[RunKnobs]
    n_events: int  # every event of the trace, of any phase
    notes: tuple  # str


# ----------------------------------------------------------------------------- bytes


def read_bytes(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES):
    """The trace's JSON text (gunzipped when the file is gzip; a private copy-on-write mapping of a big
    plain file) and the file's size on disk. Regular files and ``-`` (standard input) only."""
    if str(path) == STDIN:
        data = _read_stdin(max_bytes)
        return (_gunzip(data, max_bytes, "standard input") if data[:2] == b"\x1f\x8b" else data), len(data)
    shown = shorten(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        fail(f"{shown}: no such file")
    except IsADirectoryError:
        fail(f"{shown}: is a directory, not a trace file")
    except OSError as exc:
        fail(f"{shown}: cannot read it ({exc.strerror or exc})")
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            fail(f"{shown}: is a directory, not a trace file")
        fail(f"{shown}: not a regular file (a device, FIFO or socket); the report reads trace files, "
             f"or {STDIN} for standard input")
    with os.fdopen(fd, "rb") as f:
        size = info.st_size
        _check_size(size, max_bytes, shown)
        try:
            head = f.read(2)
            if head != b"\x1f\x8b" and str(path).endswith(".gz"):
                fail(f"{shown}: named .gz but not gzip-compressed")
            if head != b"\x1f\x8b" and size > (1 << 20):  # map it, not copy it (the decoder reads it in place)
                return mmap.mmap(fd, 0, access=mmap.ACCESS_COPY), size
            f.seek(0)
            data = f.read(size + 1)  # (a file that grew since the fstat is caught by the size checks below)
        except ValueError:  # mmap of a file emptied since the fstat above
            data = b""
        except OSError as exc:
            fail(f"{shown}: cannot read it ({exc.strerror or exc})")
    if data[:2] == b"\x1f\x8b":
        return _gunzip(data, max_bytes, shown), size
    _check_size(len(data), max_bytes, shown)
    return data, size


def _check_size(size: int, max_bytes: int, shown: str) -> None:
    if size > max_bytes:
        fail(f"{shown}: over {max_bytes:,} bytes of JSON, the limit (raise it with --max-size)")


def _read_stdin(max_bytes: int) -> bytes:
    chunks, total = [], 0
    stream = sys.stdin.buffer
    while chunk := stream.read1(1 << 20):
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            fail(f"standard input: over {max_bytes:,} bytes, the limit (raise it with --max-size)")
    return b"".join(chunks)


def _gunzip(data: bytes, max_bytes: int, shown: str) -> bytes:
    """Every gzip member of ``data``, decompressed no further than ``max_bytes`` (a gzip bomb stops there)."""
    parts, total = [], 0
    while data[:2] == b"\x1f\x8b":
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            part = member.decompress(data, max_bytes + 1 - total)
        except zlib.error as exc:
            fail(f"{shown}: not a valid gzip file, truncated or corrupt ({exc})")
        total += len(part)
        if total > max_bytes or member.unconsumed_tail:
            fail(f"{shown}: over {max_bytes:,} bytes of JSON once decompressed, the limit (raise it with --max-size)")
        if not member.eof:
            fail(f"{shown}: not a valid gzip file, truncated or corrupt (it ends inside the compressed data)")
        parts.append(part)
        data = member.unused_data
    return parts[0] if len(parts) == 1 else b"".join(parts)


# ----------------------------------------------------------------------------- decoding


def load(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES, parallel: bool = False) -> Loaded:
    """Read a trace file into :class:`Loaded`; bad input raises :class:`common.errors.BadInput`.

    With ``parallel`` (the command line), a big plain-JSON file is split at an event boundary near
    its middle and a forked child decodes and extracts the second half while this process does the
    first; any surprise falls back to one process, with the same result.
    """
    data, file_bytes = read_bytes(path, max_bytes)
    size = len(data)
    start = _start_of_json(data, path)
    enabled = gc.isenabled()
    gc.disable()  # millions of new objects: generational GC passes would only cost time
    try:
        sliced = None
        if size >= SPLIT_MIN:
            sliced = _load_sliced(data, start, fork=parallel and isinstance(data, mmap.mmap) and hasattr(os, "fork")
                                  and not os.environ.get("REPORT_ONE_PROCESS"))
        if sliced is not None:
            columns, meta, n_events = sliced
        else:
            events, complete, meta = _decode_whole(data, start, path)
            if isinstance(data, mmap.mmap):
                data.close()  # unmap the text before the columns are made: they never need both
            del data
            columns, n_events = extract(complete, memory_events(events)), len(events)
            _keep_or_drop(events, complete)
            del events, complete
    finally:
        if enabled:
            gc.enable()
    meta, notes = _bounded_meta(meta)
    meta = printable_all(meta)  # names are data: a control character in a GPU's or host's name is shown escaped
    return Loaded(str(path), size, file_bytes, columns, meta, RunKnobs.from_json(meta.get(METADATA_KEY)), n_events,
                  tuple(notes))


def _start_of_json(data, path) -> int:
    """Where the JSON starts: after a UTF-8 byte-order mark and leading white space."""
    at = 3 if data[:3] == b"\xef\xbb\xbf" else 0
    while at < len(data):
        chunk = bytes(data[at:at + 65536])
        text = chunk.lstrip()
        if text:
            return at + len(chunk) - len(text)
        at += len(chunk)
    fail(f"{shorten(path)}: empty file, not a trace")


def _decode_whole(data, start: int, path) -> tuple[list, list, dict]:
    """One process: (every decoded event, the complete ones, the metadata)."""
    schema = _Schema()
    view = memoryview(data)[start:]
    try:
        try:
            events, meta = schema.decode(view, data[start:start + 1] == b"[")
            has_begin = schema.saw_begin
        except msgspec.ValidationError:  # fields of unexpected types, unknown phases: the slow path
            events, meta = _lenient(view, path, schema)
            has_begin = True
        except UnicodeDecodeError:  # a string that is not UTF-8: read it with U+FFFD in its place
            events, meta = _lenient(bytes(view).decode("utf-8", "replace").encode(), path, schema)
            has_begin = True
        except msgspec.DecodeError as exc:
            fail(f"{shorten(path)}: {json_error(view, exc)}")
    except RecursionError:
        fail(f"{shorten(path)}: JSON nested too deeply to read (arrays or objects inside each other "
             f"about {sys.getrecursionlimit()} levels deep); no trace nests like that")
    finally:
        view.release()
    return events, _complete_events(events, has_begin, schema.begin_type), meta


def _bounded_meta(meta: dict) -> tuple[dict, list]:
    """The trace-level metadata without values nested deeper than MAX_META_DEPTH (with a note)."""
    deep = [k for k, v in meta.items() if _deeper_than(v, MAX_META_DEPTH)]
    if not deep:
        return meta, []
    return ({k: v for k, v in meta.items() if k not in deep},
            [f"ignored the trace's {', '.join(deep)}: nested more than {MAX_META_DEPTH} levels deep"])


def _deeper_than(value, limit: int) -> bool:
    todo = [(value, 0)]
    while todo:
        value, depth = todo.pop()
        if isinstance(value, (dict, list)):
            if depth >= limit:
                return True
            todo.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return False


def _complete_events(events: list, has_begin: bool, begin_type, whole: bool = True) -> Optional[list]:
    """Complete events only; with ``has_begin`` (the decode saw a ``B``), ``B``/``E`` pairs (per
    thread, a stack) become complete events too. Not ``whole`` (a slice of the events): None when a
    ``B`` is left open at the slice's end (its ``E`` may be in the next slice)."""
    complete = [e for e in events if e.__class__ is CompleteEvent]
    if has_begin:
        open_events: dict = {}
        for e in events:
            cls = e.__class__
            if cls is begin_type:
                open_events.setdefault((e.pid, e.tid), []).append(e)
            elif cls is EndEvent:
                stack = open_events.get((e.pid, e.tid))
                if stack:
                    begin = stack.pop()
                    complete.append(CompleteEvent(begin.name, begin.cat, begin.ts, max(0.0, e.ts - begin.ts),
                                                  begin.pid, begin.tid, begin.args))
        if not whole and any(open_events.values()):
            return None
    return complete


def memory_events(events: list) -> list:
    """The ``[memory]`` instant events among the decoded events, in trace order."""
    return [e for e in events if e.__class__ is InstantEvent and e.name == MEMORY_EVENT_NAME]


_HUGE_NUMBER = re.compile(rb'(?:"((?:[^"\\]|\\.){0,100})"\s*:\s*)?(-?\d+(?:\.\d+)?[eE]\+?\d{3,}|-?\d{309,}(?:\.\d+)?)')
_EVENT_NAME = re.compile(rb'"name"\s*:\s*"((?:[^"\\]|\\.){0,200})"')


def json_error(data, exc: Exception) -> str:
    """Why ``data`` cannot be read, for an error line: "not JSON (...)", or for a number a 64-bit
    float cannot hold (``1e400``: JSON itself has no limit) which number, in which field and event."""
    if "out of range" not in str(exc):
        return f"not JSON ({exc})"
    for m in _HUGE_NUMBER.finditer(data):
        if abs(float(m.group(2))) != float("inf"):
            continue
        field = f"{m.group(1).decode(errors='replace')}: " if m.group(1) is not None else ""
        number = m.group(2).decode() if len(m.group(2)) <= 24 else f"a number of {len(m.group(2)):,} digits"
        before = bytes(data[max(0, m.start() - 4096):m.start()])
        after = bytes(data[m.end():m.end() + 4096])
        obj = before[before.rfind(b"{") + 1:] + after[:after.find(b"}") if b"}" in after else 0]  # its object
        name = _EVENT_NAME.search(obj)
        event = f' in the event named "{name.group(1).decode(errors="replace")}"' if name else ""
        return (f"{field}{number} at byte {m.start(2):,}{event} is a number out of range (a 64-bit float holds "
                "up to about 1.8e308)")
    return f"a number out of range ({exc})"


def _lenient(data, path, schema: _Schema) -> tuple[list, dict]:
    """The slow path for traces whose fields have unexpected types: decode generically, convert."""
    shown = shorten(path)
    try:
        doc = msgspec.json.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        fail(f"{shown}: {json_error(data, exc)}")
    if isinstance(doc, list):
        raw, meta = doc, {}
    elif isinstance(doc, dict):
        raw = doc.get("traceEvents")
        if raw is None:
            fail(f"{shown}: not a trace (no traceEvents)")
        if not isinstance(raw, list):
            fail(f"{shown}: not a trace (traceEvents is not a list)")
        meta = {k: doc[k] for k in META_KEYS if doc.get(k) is not None}
    else:
        fail(f"{shown}: not a trace (the JSON is a {type(doc).__name__}, not an object with traceEvents "
             "or an array of events)")
    if raw and not any(isinstance(d, dict) for d in raw):
        fail(f"{shown}: not a trace (its events are not JSON objects)")
    events = [e for e in map(lambda d: _lenient_event(d, schema.begin_type), raw) if e is not None]
    return events, meta


def _lenient_event(d, begin_type):
    if isinstance(d, dict) and d.get("ph") == "i" and d.get("name") == MEMORY_EVENT_NAME:
        return _lenient_memory_event(d)
    if not isinstance(d, dict) or d.get("ph") not in ("X", "B", "E"):
        return None
    try:
        ts = float(d.get("ts", 0.0))
        dur = float(d.get("dur", 0.0) or 0.0)
    except (TypeError, ValueError, OverflowError):
        return None
    pid, tid = d.get("pid", 0), d.get("tid", 0)
    pid = pid if isinstance(pid, (int, str)) and not isinstance(pid, bool) else str(pid)
    tid = tid if isinstance(tid, (int, str)) and not isinstance(tid, bool) else str(tid)
    if d["ph"] == "E":
        return EndEvent(ts, pid, tid)
    args = _lenient_args(d.get("args"))
    name, cat = str(d.get("name", "")), str(d.get("cat", ""))
    if d["ph"] == "X":
        return CompleteEvent(name, cat, ts, dur, pid, tid, args)
    return begin_type(name, cat, ts, pid, tid, args)


def _lenient_memory_event(d) -> Optional[InstantEvent]:
    try:
        ts = float(d.get("ts", 0.0))
    except (TypeError, ValueError, OverflowError):
        return None
    tid = d.get("tid", 0)
    tid = tid if isinstance(tid, (int, str)) and not isinstance(tid, bool) else str(tid)
    a = d.get("args") if isinstance(d.get("args"), dict) else {}
    kw = {f: v for f, key in (("bytes", "Bytes"), ("total_allocated", "Total Allocated"),
                              ("total_reserved", "Total Reserved"), ("addr", "Addr"), ("device_type", "Device Type"),
                              ("device_id", "Device Id"))
          if isinstance(v := a.get(key), (int, float)) and not isinstance(v, bool)}
    return InstantEvent(MEMORY_EVENT_NAME, ts, tid, MemoryArgs(**kw))


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
        if isinstance(a.get(f), list):
            kw[f] = a[f]
    for f, key in (("input_dims", "Input Dims"), ("input_type", "Input type"), ("concrete_inputs", "Concrete Inputs"),
                   ("finished", "finished"), ("msg_nelems", "In msg nelems"), ("msg_dtype", "dtype")):
        if key in a:
            kw[f] = a[key]  # read as loosely as the fast path reads them (Any)
    return Args(**kw)


# ----------------------------------------------------------------------------- slices and two processes


def _load_sliced(data, start: int, fork: bool) -> Optional[tuple[Columns, dict, int]]:
    """Decode + extract the events SLICE_BYTES at a time, each slice's structs freed before the next (the
    peak holds columns, not every decoded event); with ``fork``, a child does the second half of the
    slices. None on any surprise (no cut, a ``B`` event, a decode error): the caller decodes the whole."""
    if fork:
        return _load_split(data, start)
    found = _spans(data, start, SLICE_BYTES)
    if found is None:
        return None
    spans, end = found
    return _with_tail_keys(data, start, end, _decode_spans(data, start, spans, pair_begins=False))


def _spans(data, start: int, every: int) -> Optional[tuple[list, int]]:
    """((lo, hi) of each slice: the first holds the document's head, the others start at a comma; the
    array's ``]``), or None when the events array has no cut."""
    found = event_cuts(data, start, every)
    if found is None:
        return None
    cuts, end = found
    bounds = [start] + cuts + [end]
    return list(zip(bounds, bounds[1:])), end


def _with_tail_keys(data, start: int, end: int, loaded):
    """``loaded`` with the metadata keys that follow the events array (e.g. ``traceName``)."""
    if loaded is not None and data[start:start + 1] != b"[":
        loaded[1].update({k: v for k, v in _tail_keys(data[end + 1:]).items() if k not in loaded[1]})
    return loaded


def _load_split(mm, start: int) -> Optional[tuple[Columns, dict, int]]:
    """The first half of the slices here, the second in a forked child that sends back its columns."""
    found = _spans(mm, start, min(SLICE_BYTES, max(1, (len(mm) - start) // 2)))
    if found is None:
        return None
    spans, end = found
    half = len(spans) // 2  # the child's share is the larger: this process goes on to the model
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # no memory or processes left for a fork: one process
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:
        os.close(read_end)
        os._exit(_second_half_in_child(mm, start, spans[half:], write_end))
    os.close(write_end)
    try:
        first = _decode_spans(mm, start, spans[:half], pair_begins=False)
        with os.fdopen(read_end, "rb") as f:
            payload = f.read()
        _, status = os.waitpid(pid, 0)
    except BaseException:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except OSError:
            pass
        raise
    if first is None or status != 0 or not payload:
        return None
    columns_a, meta, n_a = first
    columns_b, n_b = pickle.loads(payload)
    return _with_tail_keys(mm, start, end, (merge(columns_a, columns_b), meta, n_a + n_b))


def _second_half_in_child(mm, start: int, spans: list, write_end: int) -> int:
    """The child: decode + extract ``spans``, send the columns; its exit code. B/E pairs that lie wholly
    in one slice pair up; a ``B`` left open at a slice's end fails it (the parent falls back)."""
    try:
        decoded = _decode_spans(mm, start, spans, pair_begins=True)
        if decoded is None:
            return 1
        columns, _, n_events = decoded
        payload = pickle.dumps((columns, n_events), protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_end, "wb") as f:
            f.write(payload)
        return 0
    except BaseException:
        return 1


def _decode_spans(data, start: int, spans: list, pair_begins: bool) -> Optional[tuple[Columns, dict, int]]:
    """(columns, metadata, events) of consecutive spans of the events array, one slice at a time: each
    decoded, its complete and [memory] events extracted, its structs freed, its text's pages given back.
    None when a slice fails to decode or has a ``B`` event (left open at its end, or at all without
    ``pair_begins``). The metadata: the head's keys (in the first span) and those after the array."""
    schema, parts, meta, n_events = _Schema(), [], {}, 0
    array_form = data[start:start + 1] == b"["
    for lo, hi in spans:
        head = lo == start
        try:
            with _slice_text(data, start, lo, hi, array_form) as text:
                events, head_meta = schema.decode(text, array_form if head else True)
        except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
            return None
        if schema.saw_begin and not pair_begins:
            return None
        complete = _complete_events(events, schema.saw_begin, schema.begin_type, whole=False)
        if complete is None:
            return None
        meta.update(head_meta)
        parts.append(extract(complete, memory_events(events)))
        n_events += len(events)
        del events, complete
        _give_back_pages(data, start if head else lo, hi)
    return merge(*parts), meta, n_events


@contextmanager
def _slice_text(data, start: int, lo: int, hi: int, array_form: bool):
    """The JSON text of one slice: the head span (``lo == start``) closed after its last event with ``]``
    or ``]}``; any other span ``[`` + its events + ``]``. A mapping is patched in place (private
    copy-on-write pages) and restored; bytes are copied."""
    head = lo == start
    close = (b"] " if array_form else b"]}") if head else b"]"
    patches = [(hi, close)] if head else [(lo, b"["), (hi, close)]
    if not isinstance(data, mmap.mmap):
        text = bytes(data[start:hi]) + close if head else b"[" + data[lo + 1:hi] + close
        yield text
        return
    saved = [(at, bytes(data[at:at + len(new)])) for at, new in patches]
    for at, new in patches:
        data[at:at + len(new)] = new
    view = memoryview(data)[start if head else lo:hi + len(close)]
    try:
        yield view
    finally:
        view.release()
        for at, old in saved:
            data[at:at + len(old)] = old


def _give_back_pages(data, lo: int, hi: int) -> None:
    """Drop the mapped pages of ``[lo, hi)`` from memory (decoded; read again from the file if ever needed)."""
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        first, last = -(-lo // mmap.PAGESIZE) * mmap.PAGESIZE, hi // mmap.PAGESIZE * mmap.PAGESIZE
        if last > first:
            data.madvise(mmap.MADV_DONTNEED, first, last - first)


def _tail_keys(tail: bytes) -> dict:
    tail = tail.lstrip()
    if not tail.startswith(b","):
        return {}
    try:
        extra = msgspec.json.decode(b"{" + tail[1:])
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return {}
    return {k: extra[k] for k in META_KEYS if isinstance(extra, dict) and extra.get(k) is not None}


# ----------------------------------------------------------------------------- leaving fast

_kept_until_exit: Optional[list] = None  # switched on by keep_decoded_until_exit()


def keep_decoded_until_exit() -> None:
    """For a command line that ends with ``os._exit``: keep the decoded structs instead of freeing
    millions of small objects one by one (the process leaves without freeing anything)."""
    global _kept_until_exit
    if _kept_until_exit is None:
        _kept_until_exit = []


def _keep_or_drop(*objects) -> None:
    if _kept_until_exit is not None:
        _kept_until_exit.append(objects)
