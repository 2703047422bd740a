"""``--compare`` judges a ratio only when the two runs' steps are clearly apart (issue 17, item 3):
a stalled step, overlapping ranges or a gap inside the runs' own spread give "cannot tell" and why,
on the console, in the HTML page and in the JSON's verdict; two clean runs get their ratio."""

from __future__ import annotations

import json
import re

from conftest import command_env, event, run_module, write_trace
from test_pictures import verdicts_under


def steps_trace(path, step_us, control_us=20.0, ops=("aten::linear", "aten::addmm")):
    """A CPU-only trace of back-to-back ProfilerSteps, each an aten::mul of ``control_us`` (the work
    that does not change between two runs: the control of a comparison), then ``ops`` (an op and its
    child, which takes half the step)."""
    ev, t = [], 0.0
    for i, wall in enumerate(step_us):
        ev += [event(f"ProfilerStep#{i + 2}", t, wall, "user_annotation"),
               event("linear_fwd", t + 1, wall - 2, "user_annotation"),
               event("aten::mul", t + 1.5, control_us),
               event(ops[0], t + 2 + control_us, wall - 4 - control_us),
               event(ops[1], t + 3 + control_us, wall / 2)]
        t += wall + 1
    return write_trace(path, ev)


def compared(tmp_path, a_us, b_us, control_us=20.0):
    """(JSON summary, console text, HTML page) of ``--compare`` over two synthetic runs."""
    a = steps_trace(tmp_path / "a.json", a_us, control_us)
    b = steps_trace(tmp_path / "b.json", b_us, control_us, ops=("aten::matmul", "aten::mm"))  # B changed its ops
    out = run_module("common.report", "--compare", a, b, "--json")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)["summary"]
    page = tmp_path / "c.html"
    text = run_module("common.report", "--compare", a, b, "--html", page, env=command_env(COLUMNS="80"))
    assert text.returncode == 0, text.stderr
    return summary, " ".join(text.stdout.split()), page.read_text()


def one_verdict(summary, text, page) -> str:
    """The CPU verdict line, the same on the console, in the JSON and in the page, under the CPU plot."""
    verdict = summary["cpu"]["verdict"]
    assert verdict in text and summary["device"] is None
    assert verdicts_under(page, "compare-cpu") == {"compare": verdict}
    return verdict


def test_a_stalled_step_is_never_a_ratio(tmp_path):
    """One 15 ms stall among 70 µs steps (the 217x of issue 17): cannot tell, with the numbers."""
    # one stall; a stalled median (the first step, the profiler's, is left out of the judgement)
    for b_us in ([70, 15_000, 72, 71, 73], [70, 15_000, 15_940, 73]):
        summary, text, page = compared(tmp_path, [70, 71, 72, 70, 73], b_us)
        verdict = one_verdict(summary, text, page)
        assert not summary["cpu"]["judged"] and summary["cpu"]["inside_noise"]
        assert verdict.startswith("CPU per step: cannot tell which run is faster: B's steps vary")
        assert "15.00 ms" in verdict and "too noisy" in verdict
        assert "x A's" not in text and "every A step is faster" not in text
        assert re.search(r"median [\d.]+ µs [\d.]+ [µm]s \?", text)  # no ratio of medians in the table


def test_two_clean_runs_clearly_apart_get_their_ratio(tmp_path):
    summary, text, page = compared(tmp_path, [2000, 2040, 2080, 2040], [1200, 1220, 1240, 1220], control_us=1000)
    verdict = one_verdict(summary, text, page)
    cpu = summary["cpu"]
    assert cpu["judged"] and not cpu["inside_noise"] and round(cpu["ratio"], 2) == 0.6
    assert verdict.startswith("CPU per step: B's median is 0.60x A's (2.04 ms vs 1.22 ms), and every B step is faster")
    assert ("control: 1 op common to both, with the same ops inside (aten::mul) took 1.00x as long in B "
            "(1.00 ms vs 1.00 ms per step): the machine's drift explains B/A from 0.95x to 1.05x, not 0.60x") in verdict
    assert "median 2.04 ms 1.22 ms 0.60x" in text


def test_overlap_or_a_gap_inside_the_spread_cannot_tell(tmp_path):
    summary, text, page = compared(tmp_path, [90, 100, 110, 120], [85, 95, 105, 115])
    verdict = one_verdict(summary, text, page)
    assert not summary["cpu"]["judged"]
    assert "cannot tell which run is faster: the ranges overlap (A 100 µs-120 µs, B 95 µs-115 µs)" in verdict
    # apart in every step, but by less than WIDER_MIN_US (5 µs): no verdict either
    summary, text, page = compared(tmp_path, [90, 100, 130, 140], [150, 143, 160, 190])
    verdict = one_verdict(summary, text, page)
    assert not summary["cpu"]["judged"] and "the ranges lie only 3.0 µs apart" in verdict




def test_compare_builds_only_the_steps_it_reads(tmp_path, monkeypatch):
    """Issue 39: ``--compare`` reads each run's steps, header and model, so it builds those
    (:func:`common.report.facts.steps.run_steps`) and no theme's facts: a comparison with every other table's
    builder broken still answers, and gives what the full tables give."""
    from common.report.__main__ import run
    from common.report.compare.judge import compare
    from common.report.facts import tables
    from common.report.pipeline import steps_of, tables_of

    a, b = steps_trace(tmp_path / "a.json", [100.0] * 5), steps_trace(tmp_path / "b.json", [300.0] * 5)
    whole = compare(tables_of(a), tables_of(b))

    def no_tables(m):
        raise AssertionError("--compare built every table")

    monkeypatch.setattr(tables, "build_tables", no_tables)
    assert compare(steps_of(a), steps_of(b)) == whole
    assert run(["--compare", str(a), str(b), "--json", "-o", str(tmp_path / "c.json")]) == 0
    assert json.loads((tmp_path / "c.json").read_text()) == json.loads(json.dumps(whole))
