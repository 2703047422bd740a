"""How a lesson script is built (issue 29): it parses its flags once and hands the lesson helper plain
values, the warm-up count has one source, the knobs are labelled once, and the profiler block stays
literal in every script, as the posts write it."""

from __future__ import annotations

import ast
import dataclasses
import gzip
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

SCRIPTS = sorted(REPO.glob("[0-9][0-9]_*.py"))  # the lessons, by their numbered names
PROFILER_KNOBS = {"activities", "schedule", "record_shapes", "profile_memory", "with_stack"}


def _tree(path) -> ast.Module:
    return ast.parse(path.read_text())


def _calls(tree, attr: str) -> list[ast.Call]:
    """Every call of ``something.attr(...)`` or ``attr(...)``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name == attr:
                out.append(node)
    return out


def _setup_call(tree) -> ast.Call:
    calls = _calls(tree, "setup") + _calls(tree, "setup_ddp")
    assert len(calls) == 1, [ast.unparse(c)[:80] for c in calls]
    return calls[0]


def test_every_lesson_script_is_checked():
    """Every script at the top level is a lesson (the top level holds the lessons, DESIGN.md), and each is one
    of SCRIPTS: a lesson named outside the pattern would escape every check below."""
    top = sorted(REPO.glob("*.py"))
    assert SCRIPTS and top == SCRIPTS, [p.name for p in top if p not in SCRIPTS]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_setup_takes_the_parsed_flags_and_plain_values(path):
    """No lambda over the Namespace (nor any lambda) in setup's call, and no parser: the parsed args."""
    call = _setup_call(_tree(path))
    lambdas = [ast.unparse(n) for n in ast.walk(call) if isinstance(n, ast.Lambda)]
    assert not lambdas, lambdas
    assert [ast.unparse(a) for a in call.args] == ["args"], ast.unparse(call)[:120]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_the_script_parses_once_under_main_and_main_takes_the_flags(path):
    tree = _tree(path)
    parses = _calls(tree, "parse_args")
    assert len(parses) == 1, [ast.unparse(c) for c in parses]
    guards = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    assert any(ast.unparse(parses[0]) in ast.unparse(g) for g in guards), "parse_args runs only as a script"
    mains = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"]
    assert len(mains) == 1 and [a.arg for a in mains[0].args.args] == ["args"]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_no_warm_up_loop_counts_for_itself(path):
    """The warm-up count has one source (WARMUP_CALLS, the trace's warmup_calls): no ``for _ in range(3)``."""
    tree = _tree(path)
    literal = [ast.unparse(n.iter) for n in ast.walk(tree) if isinstance(n, ast.For)
               and isinstance(n.iter, ast.Call) and any(isinstance(a, ast.Constant) for a in n.iter.args)]
    assert not literal, literal
    warm = _calls(tree, "warm_up")
    assert len(warm) == 1 and ast.unparse(warm[0].args[0]) == "step", [ast.unparse(c) for c in warm]


def _profile_block(tree) -> ast.With:
    blocks = [n for n in ast.walk(tree) if isinstance(n, ast.With)
              and any(ast.unparse(item.context_expr).startswith("torch.profiler.profile(") for item in n.items)]
    assert len(blocks) == 1, len(blocks)
    return blocks[0]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_the_profiler_block_is_literal_and_labelled_once(path):
    """``with torch.profiler.profile(activities=..., schedule=torch.profiler.schedule(...), ...) as prof:``,
    then ``lesson.label(prof)`` once, then ``for _ in range(s.steps): ... step() ... prof.step()``."""
    block = _profile_block(_tree(path))
    (item,) = block.items
    call = item.context_expr
    assert {k.arg for k in call.keywords} == PROFILER_KNOBS, ast.unparse(call)
    assert ast.unparse(next(k.value for k in call.keywords if k.arg == "schedule")).startswith(
        "torch.profiler.schedule(wait=s.wait, warmup=s.warmup, active=s.active, repeat=s.repeat)")
    assert ast.unparse(item.optional_vars) == "prof"
    first, loop = block.body
    assert ast.unparse(first) == "lesson.label(prof)"
    assert isinstance(loop, ast.For) and ast.unparse(loop.iter) == "range(s.steps)"
    body = [ast.unparse(s) for s in loop.body]
    assert body[-1] == "prof.step()" and any("step()" in line for line in body[:-1]), body
    assert not [c for c in _calls(loop, "label")], "label runs once, not every step"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_export_is_literal_after_the_block(path):
    """DESIGN.md: the export is among the lines the reader studies; the lesson only makes the two files
    appear together (``lesson.writing()``)."""
    tree = _tree(path)
    assert [ast.unparse(c) for c in _calls(tree, "export_chrome_trace")] == ["prof.export_chrome_trace(str(trace_path))"]
    table = [ast.unparse(c) for c in _calls(tree, "table")]
    assert table == ["prof.key_averages().table(sort_by=lesson.sort_by, row_limit=args.row_limit)"], table
    assert [ast.unparse(c) for c in _calls(tree, "writing")] == ["lesson.writing()"]


def test_the_lesson_is_frozen():
    from common.distributed import DdpLesson
    from common.lesson import Lesson

    for cls in (Lesson, DdpLesson):
        assert cls.__dataclass_params__.frozen, cls
    assert all(not f.name.startswith("_") for f in dataclasses.fields(Lesson)), "no hidden per-step state"


# A lesson run with argparse and torch.matmul counted, and the warm-up count set to 2 at its source.
COUNTED = """
import argparse, atexit, runpy, sys
import torch

counts = {"parse_args": 0, "matmul": 0}
parse, matmul = argparse.ArgumentParser.parse_args, torch.matmul

def counted_parse(self, *a, **k):
    counts["parse_args"] += 1
    return parse(self, *a, **k)

def counted_matmul(*a, **k):
    from torch._subclasses.fake_tensor import FakeTensor

    out = matmul(*a, **k)
    counts["matmul"] += not isinstance(out, FakeTensor)  # the lesson's count of its work runs on fake tensors
    return out

argparse.ArgumentParser.parse_args = counted_parse
torch.matmul = counted_matmul
import common.lesson
for name in ("common.flags", "common.lesson"):
    if name in sys.modules and hasattr(sys.modules[name], "WARMUP_CALLS"):
        sys.modules[name].WARMUP_CALLS = 2
atexit.register(lambda: print("COUNTS", counts["parse_args"], counts["matmul"]))
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_one_parse_and_as_many_warm_up_calls_as_the_trace_says(tmp_path):
    """01_matmul_add.py at size 64, warmed up, two recorded cycles (wait=0, warmup=0: recording from the
    first step): argparse parses once; the workload ran the trace's warmup_calls plus the schedule's steps;
    the trace carries the knobs."""
    cmd = [sys.executable, "-c", COUNTED, str(REPO / "01_matmul_add.py"), "--size", "64", "--warmup",
           "--schedule", "0,0,1,2", "--gzip", "--no-report", "--trace_dir", str(tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    run = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    parses, matmuls = map(int, run.stdout.rsplit("COUNTS", 1)[1].split())
    assert parses == 1
    (trace,) = tmp_path.glob("*.json.gz")
    with gzip.open(trace, "rt") as f:
        knobs = json.load(f)["lesson"]
    assert knobs["warmup"] is True and knobs["warmup_calls"] == 2
    assert knobs["schedule"] == {"wait": 0, "warmup": 0, "active": 1, "repeat": 2}
    assert matmuls == knobs["warmup_calls"] + 2  # the warm-up, then the schedule's (0 + 0 + 1) * 2 steps


# -- docs/lessons.md, "How a lesson is built" ------------------------------------------------------------------------

def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_to_lessons_md_sections_resolve():
    """README's "how a lesson is built" (and any link into docs/lessons.md) names a heading that exists."""
    lessons = REPO / "docs" / "lessons.md"
    anchors = {_slug(line.lstrip("#")) for line in lessons.read_text().splitlines() if line.startswith("#")}
    links = [(doc.name, anchor) for doc in [REPO / "README.md", *(REPO / "docs").glob("*.md")]
             for anchor in re.findall(r"\((?:docs/)?lessons\.md#([\w-]+)\)", doc.read_text())]
    links += [(lessons.name, anchor) for anchor in re.findall(r"\(#([\w-]+)\)", lessons.read_text())]
    assert ("README.md", "how-a-lesson-is-built") in links
    assert not [(name, a) for name, a in links if a not in anchors], anchors


def _code(line: str) -> str:
    return line.split("  #", 1)[0].strip()


def test_how_a_lesson_is_built_shows_the_script_as_it_is():
    """Every line of the section's sketch (bar the elided ones, ``...``) is a line of 03_simple_mlp.py."""
    text = (REPO / "docs" / "lessons.md").read_text()
    section = text.split("## How a lesson is built", 1)[1].split("\n## ", 1)[0]
    sketch = section.split("```python\n", 1)[1].split("```", 1)[0]
    script = {_code(line) for line in (REPO / "03_simple_mlp.py").read_text().splitlines()}
    shown = [_code(line) for line in sketch.splitlines() if _code(line) and not _code(line).endswith("...")]
    assert len(shown) > 25
    assert not [line for line in shown if line not in script]
    for helper in ("common/flags.py", "common/lesson.py", "common/device.py", "common/output.py",
                   "common/distributed.py", "Lesson.warm_up", "Lesson.label", "Lesson.writing", "Lesson.finish"):
        assert helper in section, helper
