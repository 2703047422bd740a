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
import os
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
    external_id: IntStr = msgspec.field(default=None, name="External id")
    external_id_old: IntStr = msgspec.field(default=None, name="external id")
    grid: Optional[list] = None
    block: Optional[list] = None
    registers: Num = msgspec.field(default=None, name="registers per thread")
    shared_memory: Num = msgspec.field(default=None, name="shared memory")
    blocks_per_sm: Num = msgspec.field(default=None, name="blocks per SM")
    occupancy: Num = msgspec.field(default=None, name="est. achieved occupancy %")
    device: IntStr = None
    stream: IntStr = None
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


class B(Struct, tag_field="ph", tag="B", gc=False):
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


def read_bytes(path: str | os.PathLike) -> tuple[bytes, int]:
    """The trace's JSON text (gunzipped when the file is gzip) and the file's size on disk."""
    p = Path(path)
    if not p.exists():
        fail(f"{p}: no such file")
    if p.is_dir():
        fail(f"{p}: is a directory, not a trace file")
    try:
        data = p.read_bytes()
    except OSError as exc:
        fail(f"{p}: cannot read it ({exc.strerror or exc})")
    size = len(data)
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            fail(f"{p}: not a valid gzip file, truncated or corrupt ({exc})")
    elif str(p).endswith(".gz"):
        fail(f"{p}: named .gz but not gzip-compressed")
    return data, size


def load(path: str | os.PathLike) -> Loaded:
    """Read a trace file into :class:`Loaded`; bad input raises :class:`common.errors.BadInput`."""
    data, file_bytes = read_bytes(path)
    size = len(data)
    if not data.strip():
        fail(f"{path}: empty file, not a trace")
    enabled = gc.isenabled()
    gc.disable()  # millions of new objects: generational GC passes would only cost time
    try:
        try:
            trace = _DECODER.decode(data)
            events, n_events = trace.traceEvents, len(trace.traceEvents)
            meta = {k: getattr(trace, k) for k in META_KEYS if getattr(trace, k) is not None}
            del trace
        except msgspec.ValidationError:
            events, meta, n_events = _lenient(data, path)
        except msgspec.DecodeError as exc:
            fail(f"{path}: not JSON ({exc})")
        del data
        xs = _complete_events(events)
        del events
    finally:
        if enabled:
            gc.enable()
    loaded = Loaded(str(path), size, file_bytes, xs, meta, n_events)
    if size > LARGE_BYTES:
        loaded.notes.append(
            f"the trace is {size / 1e6:,.0f} MB of JSON: Perfetto and TensorBoard open files this "
            "big slowly (or not at all); profile fewer active steps (schedule active=1..3)"
        )
    return loaded


def _complete_events(events: list) -> list:
    """Complete events only; ``B``/``E`` pairs (per thread, a stack) become complete events."""
    xs = [e for e in events if e.__class__ is X]
    if any(e.__class__ is B for e in events):
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
    except msgspec.DecodeError as exc:
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
    for f, key in (("correlation", "correlation"), ("external_id", "External id"),
                   ("external_id_old", "external id"), ("device", "device"), ("stream", "stream")):
        v = a.get(key)
        if isinstance(v, (int, str)) and not isinstance(v, bool):
            kw[f] = v
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
