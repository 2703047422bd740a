"""The annotated trace, for Perfetto: a copy of the trace with the findings on a track of their own.

The copy has one more process, "Findings", whose track holds a slice for every place in time a finding
points at (its spans, filled by the rule), named by the rule, with the message, evidence and hint in its
args. Open the copy in Perfetto (``uv run -m common.view OUT``) and the cold first step, the gap between
kernels or the hidden copy is marked where it happens. A trace with ``[memory]`` events also gets a
counter track of the bytes allocated on each device.

Every original event is kept byte for byte: the new events are spliced into the JSON text at the
start of ``traceEvents``, and a top-level ``report_findings`` key says how many there are, so the
report recognises the track and leaves it out of every figure when it reads the copy again.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path

from common.errors import fail
from common.output import identity, writing
from common.report.facts.tables import Tables
from common.report.findings import Finding
from common.report.load.file_bytes import read_bytes

FINDINGS_PID = 999_999_001  # a process id no profiler hands out (Kineto's are OS pids or small device ids)
FINDINGS_KEY = "report_findings"
FINDINGS_CATEGORY = "finding"
_TRACE_EVENTS = re.compile(rb'"traceEvents"\s*:\s*\[')


def findings_events(t: Tables, findings: list[Finding]) -> list[dict]:
    """The Findings process: its name and sort order (metadata), then one slice per finding place."""
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": FINDINGS_PID, "tid": 0, "args": {"name": "Findings"}},
        {"ph": "M", "name": "process_sort_index", "pid": FINDINGS_PID, "tid": 0, "args": {"sort_index": -1}},
        {"ph": "M", "name": "thread_name", "pid": FINDINGS_PID, "tid": 1, "args": {"name": "report findings"}},
    ]
    for f in findings:
        for span in f.spans:
            events.append({"ph": "X", "cat": FINDINGS_CATEGORY, "name": f.rule, "pid": FINDINGS_PID, "tid": 1,
                           "ts": round(t.model.t0 + span.start_us, 3), "dur": round(span.dur_us, 3),
                           "args": {"level": f.level, "message": f.message, "hint": f.hint,
                                    "evidence": f.evidence}})
    return events


def memory_counter_events(t: Tables) -> list[dict]:
    """A counter track ("ph": "C") of allocated bytes per device on the Findings process, from the memory
    curve (:mod:`.memory`); none without [memory] events."""
    if t.memory is None:
        return []
    return [{"ph": "C", "name": f"allocated {d.device}", "pid": FINDINGS_PID, "tid": 0,
             "ts": round(t.model.t0 + us, 3), "args": {"bytes": level}}
            for d in t.memory.devices for us, level in d.curve]


def _read_text(path: Path) -> bytes:
    """The trace's JSON text as the report read it (:func:`common.report.load.file_bytes.read_bytes`: gzip by its
    magic, what follows the last gzip member ignored, decompressed no further than the report's limit)."""
    data, _ = read_bytes(path)
    return data if isinstance(data, (bytes, bytearray)) else bytes(data)


def splice(original: bytes, events: list[dict]) -> bytes:
    """``original`` with ``events`` first in its ``traceEvents`` and the ``report_findings`` key."""
    body = b",".join(json.dumps(e, separators=(",", ":"), default=str).encode() for e in events)
    head = json.dumps({"pid": FINDINGS_PID, "events": len(events)}, separators=(",", ":")).encode()
    start = original.lstrip()[:1]
    if start == b"[":  # Chrome's JSON Array form: no object to hold the key; the events alone
        i = original.index(b"[") + 1
        rest = original[i:].lstrip()
        return original[:i] + body + (b"," if rest[:1] != b"]" else b"") + original[i:]
    match = _TRACE_EVENTS.search(original)
    if start != b"{" or match is None:
        fail("cannot annotate this trace: no traceEvents list found in its JSON text")
    i = match.end()
    rest = original[i:].lstrip()
    spliced = original[:i] + body + (b"," if rest[:1] != b"]" else b"") + original[i:]
    brace = spliced.index(b"{") + 1
    return spliced[:brace] + b'"' + FINDINGS_KEY.encode() + b'":' + head + b"," + spliced[brace:]


@dataclass(frozen=True)
class AnnotatedCopy:
    """The annotated copy, made but not yet written: its path, its JSON text, and how many finding slices
    it holds."""

    out: Path
    data: bytes
    slices: int
    flag: str | None = None

    def write(self) -> int:
        """Write it, whole or not at all (:func:`common.output.writing`), gzipped when the name ends in
        ``.gz``; returns the number of finding slices."""
        with writing([self.out], flag=self.flag, what="the annotated trace") as (tmp,):
            if str(self.out).endswith(".gz"):
                with gzip.open(tmp, "wb", compresslevel=6) as f:
                    f.write(self.data)
            else:
                tmp.write_bytes(self.data)
        return self.slices


def annotated_copy(source: Path, t: Tables, findings: list[Finding], out: Path, *,
                   flag: str | None = None) -> AnnotatedCopy:
    """The annotated copy of ``source`` for ``out`` (``flag`` names it in an error line), made in memory: every
    check and the reading of the trace happen here, before anything is written. Refuses to overwrite the
    source; an existing annotated copy is fine."""
    source, out = Path(source), Path(out)
    named = f"{flag} {out}" if flag else str(out)
    if not str(out).endswith((".json", ".json.gz")):
        fail(f"{named}: name a .json or .json.gz file")
    if out.exists() and identity(out) == identity(source):
        fail(f"{named}: that is the trace itself; name a new file (e.g. {_default_name(source)})")
    original = _read_text(source)
    if FINDINGS_KEY.encode() in original[:200]:
        fail(f"{source}: already annotated by the report; annotate the original trace")
    events = findings_events(t, findings) + memory_counter_events(t)
    return AnnotatedCopy(out, splice(original, events), sum(1 for e in events if e["ph"] == "X"), flag)


def write_annotated(source: Path, t: Tables, findings: list[Finding], out: Path, *, flag: str | None = None) -> int:
    """Write the annotated copy of ``source`` to ``out`` (:func:`annotated_copy`, then written); returns the
    number of finding slices."""
    return annotated_copy(source, t, findings, out, flag=flag).write()


def _default_name(source: Path) -> str:
    return annotated_name(source.name)


def annotated_name(name: str) -> str:
    """``64_bf16_cold_eager.json.gz`` -> ``64_bf16_cold_eager.annotated.json.gz``."""
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)] + ".annotated" + suffix
    return name + ".annotated.json"
