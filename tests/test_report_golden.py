"""Issue 29: a move of code changes no byte of the report's JSON. Each case of :mod:`golden` (every real
trace, every lesson's CPU trace, two comparisons and a job) is read by the command line as it is now and
held against the JSON written before the report was rearranged (``tests/data/golden/``)."""

from __future__ import annotations

import gzip

import pytest

import golden

CASES = golden.cases()


def test_every_case_has_its_golden_json_and_no_golden_json_is_orphaned():
    """Every trace the suite holds (the real ones, the H100 runs, the lessons' CPU runs) is read by a case, and each
    case has its JSON."""
    named = {golden.REPO / arg for args in CASES.values() for arg in args if arg != "TEXT" and not arg.startswith("-")}
    read = {p for path in named for p in ([path] if path.is_file() else path.rglob("*.json.gz"))}
    held = {p for folder in ("traces", "h100/runs", "lessons_cpu") for p in (golden.DATA / folder).rglob("*.json.gz")}
    assert held and held <= read, sorted(held - read)
    assert {p.name.removesuffix(".json.gz") for p in golden.GOLDEN.glob("*.json.gz")} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_report_json_is_unchanged(name):
    want = gzip.decompress(golden.golden_path(name).read_bytes()).decode()
    got = golden.report_json(CASES[name])
    assert got.startswith("exit 0\n"), got[:300]
    assert got == want, golden.first_difference(want, got)
