"""with_stack: torch's Python tracer returns from the call that opens a record_function range a few µs after
the range began, so a Python event overhangs the start of the user's annotation. The call tree cuts the Python
event, not the annotation: a lesson's ``mlp_fwd`` keeps its length and its ops. A clock glitch (a child that
overhangs its parent's end by a little) is still cut at the parent's end."""

from __future__ import annotations

import gzip
import json

import numpy as np

from common.report.model.build import _nested_tree
from common.report.pipeline import tables_of
from conftest import REPO

STACK = REPO / "tests/data/lessons_cpu/03_simple_mlp/2x16x64x256_bf16_warm_eager_stack.json.gz"


def test_an_annotation_opened_under_the_python_tracer_keeps_its_length_and_ops():
    raw = [e for e in json.load(gzip.open(STACK))["traceEvents"] if e.get("name") == "mlp_fwd"]
    t = tables_of(STACK)
    (phase,) = [p for p in t.phases if p.name == "mlp_fwd"]
    assert phase.calls == len(raw) == 3
    assert abs(phase.mean_us - np.mean([e["dur"] for e in raw])) < 0.01, phase  # was 2.8 µs
    assert phase.ops_per_call >= 30  # three nn.Linear and the GeGLU: was 0
    assert any("Python tracer" in n for n in t.model.notes)


def test_a_clock_glitch_is_still_cut_at_the_parents_end():
    ts = np.array([0.0, 10.0])
    end = np.array([100.0, 100.5])  # the child overhangs by 0.5 µs
    ends, parent, _, cut = _nested_tree(ts, end.copy(), np.zeros(2, dtype=np.int64), np.zeros(2, dtype=bool))
    assert list(ends) == [100.0, 100.0] and list(parent) == [-1, 0] and cut == 1


def test_a_python_call_that_opens_a_range_is_cut_at_the_ranges_start():
    ts = np.array([0.0, 10.0, 12.0, 20.0])  # step(), _record_function_enter_new, the annotation, an op in it
    end = np.array([200.0, 14.0, 170.0, 60.0])
    ends, parent, _, cut = _nested_tree(ts, end.copy(), np.zeros(4, dtype=np.int64), np.array([True, True, False, False]))
    assert list(ends) == [200.0, 12.0, 170.0, 60.0] and list(parent) == [-1, 0, 0, 2] and cut == 1


def test_the_python_call_that_closes_a_range_is_cut_at_the_ranges_end_however_long():
    ts = np.array([0.0, 10.0, 150.0])  # the annotation, an op, _record_function_exit (44 µs, from 10 µs before the end)
    end = np.array([160.0, 100.0, 194.0])
    ends, parent, _, cut = _nested_tree(ts, end.copy(), np.zeros(3, dtype=np.int64), np.array([False, False, True]))
    assert list(ends) == [160.0, 100.0, 160.0] and list(parent) == [-1, 0, 0] and cut == 1


def test_the_time_around_the_ops_names_the_python_tracer_where_it_ran():
    from common.report.pipeline import analyze

    plain = REPO / "tests/data/lessons_cpu/03_simple_mlp/2x16x64x256_bf16_warm_compile.json.gz"
    for path, said in ((STACK, True), (plain, False)):
        _, findings = analyze(path)
        (bound,) = [f for f in findings if f.rule == "overhead_bound"]
        assert ("Python tracer's own time (with_stack)" in bound.message) is said, bound.message
