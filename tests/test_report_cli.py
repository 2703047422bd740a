"""The report's command line: --json is a flag, -o FILE (never one of the inputs), flags a mode ignores,
usage errors, and answers that come before anything heavy is imported."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from common.commands import display_path  # paths as the commands print them (run from REPO)

from conftest import DATA_TRACES, REPO, event, module_command, report_json, run_module, write_trace

MI250 = DATA_TRACES / "hta" / "mi250_rocm_minitoy.json.gz"
CPU_ONLY = DATA_TRACES / "hta" / "cpu_only_rank34.json.gz"


def report(*args, **kw) -> subprocess.CompletedProcess:
    return run_module("common.report", *args, **kw)


def one_error_line(proc: subprocess.CompletedProcess, words: str) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.fixture
def small(tmp_path):
    ev = [event("ProfilerStep#1", 0, 100, cat="user_annotation"), event("aten::mm", 10, 50)]
    return write_trace(tmp_path / "small.json", ev)


def test_json_is_a_flag_before_or_after_the_trace(small):
    before, after = report("--json", small), report(small, "--json")
    assert before.returncode == after.returncode == 0, before.stderr + after.stderr
    assert json.loads(before.stdout) == json.loads(after.stdout)
    assert json.loads(before.stdout)["schema"] == "common.report/1"


def test_json_of_several_traces_is_a_list(small):
    assert [r["trace"]["events"] for r in report_json(small, MI250)] == [2, 220]


def test_output_file_says_what_it_wrote(small, tmp_path):
    out = tmp_path / "report.json"
    proc = report("--json", small, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {display_path(out, start=REPO)}") and "of JSON)" in proc.stdout
    assert json.loads(out.read_text())["schema"] == "common.report/1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "small.json"]  # no temporary file left
    proc = report("--json", small, "--output", "-")
    assert proc.returncode == 0 and json.loads(proc.stdout)["schema"] == "common.report/1"


def test_output_to_a_device_is_refused(small):
    """-o writes files (or - for standard output): a device is not one (to discard the JSON, redirect stdout)."""
    one_error_line(report("--json", small, "-o", os.devnull), "not a regular file")


@pytest.mark.parametrize("alias", ["same", "symlink", "hardlink", "dotted", "contents"])
def test_output_that_is_an_input_is_refused(tmp_path, alias):
    """Whatever its name or contents, an output that is one of the traces read is refused, the trace untouched."""
    trace = tmp_path / "t.json"
    # a key spelled with an escape and placed after a 2 MB key: no text test would see "traceEvents"
    trace.write_text('{"pad": "' + "x" * (2 << 20) + '", "trace\\u0045vents": '
                     + json.dumps([event("aten::mm", 0, 5)]) + "}")
    before = trace.read_bytes()
    dest = {"same": trace, "symlink": tmp_path / "link.json", "hardlink": tmp_path / "hard.json",
            "dotted": tmp_path / "." / "x" / ".." / "t.json", "contents": trace}[alias]
    if alias == "symlink":
        dest.symlink_to(trace)
    if alias == "hardlink":
        os.link(trace, dest)
    if alias == "dotted":
        (tmp_path / "x").mkdir()
    one_error_line(report("--json", trace, "-o", dest), "(the same file)")
    assert trace.read_bytes() == before


def test_output_that_is_standard_input_is_refused(tmp_path, small):
    with small.open("rb") as stdin:
        one_error_line(report("--json", "-", "-o", small, stdin=stdin), "that is standard input")


def test_output_is_for_json_only(small, tmp_path):
    one_error_line(report(small, "-o", tmp_path / "x.json"), "add --json")
    one_error_line(report("--json", small, "-o", tmp_path), "is a directory")


@pytest.mark.parametrize("args, line", [
    (["--json", "--short"], "note: --short has no effect with --json (the JSON holds everything)"),
    (["--json", "--top", "5"], "note: --top has no effect with --json (the JSON lists every kernel)"),
    (["--short", "--top", "5"], "note: --top has no effect with --short (it shows no kernel table)"),
])
def test_flags_a_mode_ignores_are_named(small, args, line):
    proc = report(small, *args)
    assert proc.returncode == 0 and proc.stderr.strip() == line, proc.stderr


def test_compare_names_what_it_ignores(small):
    proc = report("--compare", small, small, "--short", "--top", "3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines() == ["note: --short has no effect with --compare",
                                                "note: --top has no effect with --compare"]


@pytest.mark.parametrize("args, words", [
    ([], "give at least one TRACE"),
    (["--top", "0", "x.json"], "--top must be 1 or more"),
    (["--top", "many", "x.json"], "is not a whole number"),
    (["--max-size", "lots", "x.json"], "is not a size"),
    (["--bogus", "x.json"], "unrecognized arguments: --bogus"),
    (["a.json", "--compare", "b.json", "c.json"], "not both"),
    (["-", "-"], "standard input (-) can be read once"),
])
def test_bad_usage_is_one_line_exit_2(args, words):
    one_error_line(report(*args), words)


def test_reads_standard_input(small):
    plain = report("--json", "-", stdin=small.read_bytes())
    gzipped = report("--json", "-", stdin=MI250.read_bytes())
    assert plain.returncode == gzipped.returncode == 0, plain.stderr + gzipped.stderr
    assert json.loads(plain.stdout)["trace"]["events"] == 2 and json.loads(gzipped.stdout)["trace"]["events"] == 220


def test_max_size_is_an_option(small):
    one_error_line(report(small, "--max-size", "100"), "the limit (raise it with --max-size)")
    assert report("--json", small, "--max-size", "1M").returncode == 0


def test_import_is_cheap():
    code = "import sys, common.report, common.report.__main__; print('torch' in sys.modules, 'numpy' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert p.stdout.split() == ["False", "False"], p.stderr


def _seconds(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, capture_output=True, timeout=120)
    return time.perf_counter() - start


LESSONS = sorted(p.name for p in REPO.glob("0[0-9]_*.py"))


@pytest.mark.parametrize("cmd", [
    *([sys.executable, lesson, "--help"] for lesson in LESSONS),
    [sys.executable, "01_matmul_add.py", "--size", "0"],
    [sys.executable, "03_simple_mlp.py", "--dtype", "int8"],
    [sys.executable, "02_linear.py", "--schedule", "1,1"],
    module_command("common.report", "--help"),
    module_command("common.view", "--bogus"),
], ids=[*(f"{lesson} --help" for lesson in LESSONS), "lesson --size 0", "lesson bad dtype", "lesson bad schedule", "report --help",
        "view bad flag"])
def test_help_and_bad_flags_answer_before_torch(cmd):
    """No torch, no numpy for these: they answer within 1.5 s of a bare interpreter start (the best of three,
    this machine is shared)."""
    probe = [*cmd[:1], "-X", "importtime", *cmd[1:]]
    imported = subprocess.run(probe, cwd=REPO, capture_output=True, text=True, timeout=120).stderr
    assert not re.search(r"\|\s+(torch|numpy)$", imported, re.M), imported[-2000:]
    bare = min(_seconds([sys.executable, "-c", "pass"]) for _ in range(3))
    assert min(_seconds(cmd) for _ in range(3)) < bare + 1.5
