"""The short report is a bonus: any failure in it is one printed line, and the lesson still exits 0."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

import common.report as report
import common.report.cli.lesson as lesson_console
from common.errors import BadInput
from conftest import CPU_DTYPE, run_script


def short_report_lines(monkeypatch, exc: Exception) -> list[str]:
    def analyze(path):
        raise exc

    monkeypatch.setattr(lesson_console, "analyze", analyze)  # the name the lesson console calls
    buf = io.StringIO()
    report.print_short_report("trace.json", Console(file=buf, width=200))
    return buf.getvalue().splitlines()


@pytest.mark.parametrize("exc, line", [
    (BadInput("trace.json: not JSON"), "trace report unavailable: trace.json: not JSON"),
    (ImportError("No module named 'msgspec'"), "trace report unavailable: No module named 'msgspec' (the report "
                                               "needs msgspec and numpy: uv sync, or pip install msgspec numpy)"),
    (ValueError("odd [bold]trace[/]\nsecond line"), "trace report unavailable: ValueError: odd [bold]trace[/]"),
])
def test_any_failure_is_one_line(monkeypatch, exc, line):
    assert short_report_lines(monkeypatch, exc) == [line]


def test_interrupt_still_stops(monkeypatch):
    with pytest.raises(KeyboardInterrupt):
        short_report_lines(monkeypatch, KeyboardInterrupt())


def test_lesson_without_msgspec_exits_0_with_its_files(tmp_path):
    shim = tmp_path / "shim"
    (shim / "msgspec").mkdir(parents=True)
    (shim / "msgspec" / "__init__.py").write_text("raise ImportError(\"No module named 'msgspec' (test shim)\")\n")
    run = run_script("01_matmul_add.py", "--size", "16", "--device", "cpu", trace_dir=tmp_path / "out",
                     env={"PYTHONPATH": str(shim)})
    assert run.returncode == 0, run.stderr
    assert run.files() == [f"16_{CPU_DTYPE}_cold_eager.json", f"16_{CPU_DTYPE}_cold_eager.txt"]
    lines = [x for x in run.stdout.splitlines() if "trace report unavailable" in x]
    assert len(lines) == 1 and "No module named 'msgspec' (test shim)" in lines[0], run.stdout
    assert "Traceback" not in run.stderr
