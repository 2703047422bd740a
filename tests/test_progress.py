"""Long work shows progress and an estimate (issue 37): the warm-up's calls and the profiled steps under one
status line, on a terminal; the profiled steps only when they are long (a redraw inside a 60 µs step would
show in its trace)."""

from __future__ import annotations

import io
import re

from rich.console import Console

from common.progress import Progress, fmt_seconds
from conftest import command_env, run_script


def terminal() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=200)


def test_the_warm_up_gives_an_estimate_after_its_first_call():
    p = Progress(terminal(), steps=5)
    assert p.warm_up_text(0, 3) == "warming up: call 1 of 3 (no estimate before the first call ends)"
    p.call_s = 2.4
    assert p.warm_up_text(1, 3, "compiling") == (
        "warming up (compiling): call 1 of 3 done, 2.40 s a call; about 17 s left with the 5 profiled steps")


def test_the_steps_are_counted_where_the_lesson_ends_them():
    p = Progress(terminal(), steps=5)
    p.call_s = 1.0  # the warm-up's pace: 5 s of steps, worth a line
    ended = []
    step = p.watch(lambda: ended.append(1))
    with p.profiling(compiling=False):
        assert p.profiling_text(False) == "profiling 5 steps; about 5.00 s at the warm-up's pace"
        step()
        step()
        assert re.fullmatch(r"profiling: step 2 of 5 done, [\d.]+ s a step; about [\d.]+ s left", p.profiling_text(False))
    assert len(ended) == 2  # prof.step itself ran each time


def test_short_steps_get_no_line():
    p = Progress(terminal(), steps=5)
    p.call_s = 0.001  # Part 1's 64: the redraws would be the trace's largest gaps
    assert not p.worth_a_line(compiling=False) and p.worth_a_line(compiling=True)
    assert Progress(terminal(), steps=5).worth_a_line(compiling=False) is False  # no warm-up: no estimate
    assert [fmt_seconds(s) for s in (0.25, 2.41, 80, 400)] == ["0.25 s", "2.41 s", "80 s", "6.7 min"]


def test_a_lesson_on_a_terminal_says_where_its_warm_up_is(tmp_path):
    """04_a at a size whose calls take a visible time (0.2 s here): the status line counts the calls and estimates."""
    run = run_script("04_a_naive_attention.py", "--batch", "2", "--heads", "4", "--seq", "1024", "--head_dim", "64",
                     "--no-report", trace_dir=tmp_path, env=command_env(FORCE_COLOR="1", COLUMNS="160"))
    assert run.returncode == 0, run.stderr
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", run.stdout)
    assert "warming up: call 1 of 3 (no estimate before the first call ends)" in plain
    assert re.search(r"warming up: call 2 of 3 done, [\d.]+ s a call; about [\d.]+ s left with the 5 profiled steps",
                     plain), plain[-2000:]
