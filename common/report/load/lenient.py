"""The slow path for traces the fast decode refuses (fields of unexpected types, unknown phases, text that
is not UTF-8): decode generically and convert what the report reads; and the error line for text that is
not JSON (which number is out of range, in which event)."""

from __future__ import annotations

import re
from typing import Optional

import msgspec

from common.errors import fail
from common.report.load.events import (MEMORY_EVENT_NAME, META_KEYS, Args, CompleteEvent, EndEvent, InstantEvent,
                                       MemoryArgs, Schema)
from common.report.load.inputs import shorten


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


def lenient_decode(data, path, schema: Schema) -> tuple[list, dict]:
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
