"""The memory view (#30): vectorised, it gives the figures of the original per-call scan, and its cost grows
with the trace, not with events x annotation calls.

- The oracle: ``tests/memory_reference.py`` is the view as first written (every memory event scanned once per
  annotation call, ``device_name`` per event), kept unchanged. The figures of both (devices, annotations, the
  plugin's op table) must be equal, value for value, on real traces and on generated ones with two devices,
  nested annotations on two threads, frees, events on a thread with no CPU event, and no recorded totals.
- The ratio: ``benchmarks/bench_memory.py`` times the whole analysis against a bare ``json.load`` of a
  generated trace with 16,000 annotation calls; the scan per call made that about 6 (a few seconds), the
  vectorised view keeps it near 1; the test fails above ``MAX_RATIO``. Ratios, not seconds: the machine is
  shared.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import numpy as np
import pytest

from common.report import tables_of
from common.report.facts.memory import memory_of

from conftest import DATA_TRACES, REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import bench_memory  # noqa: E402
import memory_reference  # noqa: E402


def _both(path) -> tuple:
    """(the vectorised view, the oracle's) of the trace; the view's per-size figures (``sizes``: which ops make
    each of the largest sizes, how many live at once, :mod:`common.report.facts.memory_blocks`), which came
    later than the oracle, left out: tests/test_h100_recorded.py and test_memory.py check them."""
    m = tables_of(path).model
    assert m.mem.n, f"{path}: no memory events"
    new = memory_of(m)
    return replace(new, annotations=tuple(replace(a, sizes=()) for a in new.annotations)), memory_reference.memory_of(m)


def _generated(tmp_path, seed: int, calls: int = 120, totals: bool = True, stray: bool = False):
    path = bench_memory.write_trace(tmp_path / f"gen{seed}.json", calls, seed=seed, events_per_op=1 + seed % 3,
                                    ops_per_call=1 + seed % 2)
    doc = json.loads(path.read_text())
    memory = [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
    if not totals:
        for e in memory:
            del e["args"]["Total Allocated"], e["args"]["Total Reserved"]
    if stray:  # a thread that holds no CPU event: its events count per device, in no annotation or op
        for e in memory[::7]:
            e["tid"] = 99
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("seed,totals,stray", [(0, True, False), (1, False, False), (2, True, True), (3, False, True)])
def test_vectorised_view_equals_the_per_call_scan_on_generated_traces(tmp_path, seed, totals, stray):
    new, reference = _both(_generated(tmp_path, seed, totals=totals, stray=stray))
    assert {a.name for a in new.annotations} == {"fwd", "attn", "bwd", "opt"}
    assert {d.device for d in new.devices} == {"GPU0", "CPU"}
    assert new.devices == reference.devices
    assert new.annotations == reference.annotations
    assert new.ops == reference.ops
    assert new == reference


@pytest.mark.parametrize("name", ["kineto/v100_resnet50_train.json.gz", "hta/v100_ddp_rank1.json.gz"])
def test_vectorised_view_equals_the_per_call_scan_on_real_traces(name):
    new, reference = _both(DATA_TRACES / name)
    assert new.ops and new == reference


def test_vectorised_view_equals_the_per_call_scan_on_a_lesson(tmp_path):
    """04_a with --profile-memory at a tiny shape: the annotation's per-call figures and its ops."""
    from conftest import run_script

    run = run_script("04_a_naive_attention.py", "--batch", "1", "--heads", "2", "--seq", "64", "--head_dim", "16",
                     "--profile-memory", "--schedule", "0,0,3", "--no-report", trace_dir=tmp_path)
    assert run.returncode == 0, run.stderr
    new, reference = _both(next(tmp_path.glob("*.json")))
    assert [a.name for a in new.annotations] == ["attn_fwd"] and new.annotations[0].calls == 3
    assert new == reference


def test_report_against_json_load_stays_linear(tmp_path):
    """The whole analysis of a trace with 16,000 annotation calls and ~40,000 memory events, against a bare
    json.load of it: the per-call scan took about 6 times json.load here, the vectorised view about 1."""
    path = bench_memory.write_trace(tmp_path / "memory.json")
    ratio, report_s, load_s = bench_memory.time_ratio(path)
    print(f"report {report_s:.2f} s, json.load {load_s:.2f} s: ratio {ratio:.2f}")
    assert ratio < bench_memory.MAX_RATIO, f"report {report_s:.2f} s against json.load {load_s:.2f} s"



def test_two_process_load_gives_the_same_memory_view(tmp_path, monkeypatch):
    """The [memory] events' table from two halves decoded by two processes (a big file on the command line)
    is the one process's: the same lane, the same view (with a tid written as text in the second half)."""
    from common.report.render.json import to_json
    from common.report import analyze

    from test_report import _force_split

    path = _generated(tmp_path, 5, calls=400)
    doc = json.loads(path.read_text())
    for e in _memory_events_of(doc)[-40:]:
        e["tid"] = str(e["tid"])
    path.write_text(json.dumps(doc, indent=0))  # one event per line: the file splits between events
    seen = _force_split(monkeypatch)
    split = analyze(path, parallel=True)
    assert seen and seen[0] is not None  # the split path ran
    monkeypatch.setenv("REPORT_ONE_PROCESS", "1")
    one = analyze(path, parallel=True)
    assert split[0].memory is not None and split[0].memory == one[0].memory
    assert np.array_equal(split[0].model.mem.thread, one[0].model.mem.thread)
    assert to_json(*split) == to_json(*one)


def _memory_events_of(doc: dict) -> list:
    return [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]
