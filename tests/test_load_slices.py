"""Loading a big trace a slice at a time (#30): the events array is cut between events, each slice decoded,
extracted to columns and freed before the next, so the peak holds columns, not every decoded event.

The report must not change: on every shared trace (HTA, Kineto, the H100 runs), cut into slices far
smaller than any real threshold so each has many, the report's JSON equals the one from the whole text
decoded at once, in one process and in two (the command line's fork). The structs of one slice only are
alive at a time, and a ``B`` left open at a slice's end (its ``E`` in a later slice) falls back to the
whole decode with the same report.
"""

from __future__ import annotations

import gzip
import json

import pytest

from common.report import analyze
from common.report.load import reader as L
from common.report.load import slices as S
from common.report.render.json import to_json

from conftest import DATA_TRACES, event
from h100 import H100_RUNS
from test_report import _mmap_always

SHARED = sorted(p for p in DATA_TRACES.rglob("*.json.gz")) + sorted(H100_RUNS.rglob("*.json.gz"))
SLICE = 1 << 16  # 64 KiB: every shared trace of some size is cut many times


def _report(path, monkeypatch, *, sliced: bool, parallel: bool = False) -> tuple[dict, list]:
    """The report's JSON, and per load the number of slices decoded (empty: the whole text at once)."""
    monkeypatch.setattr(L, "SPLIT_MIN", 1 if sliced else 1 << 62)
    monkeypatch.setattr(S, "SLICE_BYTES", SLICE)
    spans = []
    real = S._decode_spans
    monkeypatch.setattr(S, "_decode_spans",
                        lambda data, start, s, **kw: spans.append(len(s)) or real(data, start, s, **kw))
    return to_json(*analyze(path, parallel=parallel)), spans


@pytest.mark.parametrize("path", SHARED, ids=lambda p: p.parent.name + "/" + p.name.split(".")[0][:24])
def test_sliced_load_gives_the_same_report(path, monkeypatch):
    whole, spans = _report(path, monkeypatch, sliced=False)
    assert not spans
    sliced, spans = _report(path, monkeypatch, sliced=True)
    assert sliced == whole
    if len(gzip.decompress(path.read_bytes())) > 8 * SLICE:
        assert spans and spans[0] >= 4  # the sliced path ran, with several slices


@pytest.mark.parametrize("name", ["hta/v100_ddp_rank1", "hta/a100_rank3", "kineto/v100_resnet50_train"])
def test_sliced_load_in_two_processes_gives_the_same_report(name, tmp_path, monkeypatch):
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress((DATA_TRACES / f"{name}.json.gz").read_bytes()))
    whole, _ = _report(plain, monkeypatch, sliced=False)
    monkeypatch.setattr(L, "read_bytes", _mmap_always(L))  # the fork needs a mapped file
    split, spans = _report(plain, monkeypatch, sliced=True, parallel=True)
    assert len(spans) == 1 and spans[0] >= 2  # the parent's share; the child's is in the child
    assert split == whole


def test_only_one_slice_of_structs_is_alive_at_a_time(tmp_path, monkeypatch):
    """Each extraction sees one slice's events, not the trace's (the old loader extracted them all at once)."""
    ev = [event("ProfilerStep#1", 0, 100_000, cat="user_annotation")]
    ev += [event("aten::mm", 10 + 10 * i, 5) for i in range(5000)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": ev}, indent=1))
    sizes = []
    real = S.extract
    monkeypatch.setattr(S, "extract", lambda complete, memory=(): sizes.append(len(complete)) or real(complete, memory))
    monkeypatch.setattr(L, "SPLIT_MIN", 1)
    monkeypatch.setattr(S, "SLICE_BYTES", 1 << 16)
    sliced = to_json(*analyze(path))
    assert sum(sizes) == len(ev) and len(sizes) > 4 and max(sizes) < len(ev) / 4
    monkeypatch.setattr(L, "SPLIT_MIN", 1 << 62)
    assert sliced == to_json(*analyze(path))


@pytest.mark.parametrize("begin_at", [1, 2000])
def test_begin_left_open_at_a_slice_end_falls_back_to_the_whole(tmp_path, monkeypatch, begin_at):
    """A ``B`` in one slice with its ``E`` in a later one (in the parent's half, or both in the child's): the
    sliced load gives up, the whole decode pairs them."""
    ev = [event("ProfilerStep#1", 0, 100_000, cat="user_annotation")]
    ev += [event("aten::mm", 10 + 10 * i, 5) for i in range(3000)]
    ts = 10 * begin_at
    ev.insert(begin_at, {"ph": "B", "name": "aten::add", "cat": "cpu_op", "pid": 100, "tid": 100, "ts": ts})
    ev.append({"ph": "E", "pid": 100, "tid": 100, "ts": ts + 45_000.0})
    path = tmp_path / "be.json"
    path.write_text(json.dumps({"traceEvents": ev}, indent=1))
    monkeypatch.setattr(L, "read_bytes", _mmap_always(L))
    for parallel in (False, True):
        sliced, spans = _report(path, monkeypatch, sliced=True, parallel=parallel)
        assert spans  # the sliced path was tried
        assert {o["name"]: o["cpu_total_us"] for o in sliced["ops"]}["aten::add"] == 45_000
        assert sliced == _report(path, monkeypatch, sliced=False)[0]


@pytest.mark.parametrize("parallel", [False, True])
def test_sliced_load_of_a_bare_array_with_a_byte_order_mark(tmp_path, monkeypatch, parallel):
    """Chrome's JSON Array format (no traceEvents object), after a UTF-8 BOM: cut and decoded the same."""
    doc = json.loads(gzip.decompress((DATA_TRACES / "hta" / "a100_rank3.json.gz").read_bytes()))
    path = tmp_path / "array.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(doc["traceEvents"], indent=1).encode())
    monkeypatch.setattr(L, "read_bytes", _mmap_always(L))
    whole, _ = _report(path, monkeypatch, sliced=False)
    sliced, spans = _report(path, monkeypatch, sliced=True, parallel=parallel)
    assert spans and spans[0] >= 2
    assert sliced == whole
