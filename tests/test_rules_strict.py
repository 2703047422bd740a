"""Every rule on every trace we hold, strictly: a rule that crashes fails here, instead of hiding as a
`rule_error` finding that a negative assertion would let pass. conftest.py sets REPORT_STRICT_RULES=1 for
the whole suite (and every command it starts); the user's report keeps its safety net."""

from __future__ import annotations

import pytest

from common.report import tables_of
from common.report.findings import Finding
from common.report.rules.registry import RULES, STRICT_ENV, run_rules
from conftest import DATA_TRACE_FILES, DATA_TRACES, trace_of


def _every_rule(path) -> list[Finding]:
    tables = tables_of(path)
    for rule in RULES:  # one by one, so a failure names its rule
        rule(tables)
    findings = run_rules(tables)
    assert all(f.rule != "rule_error" and f.message for f in findings)
    return findings


@pytest.mark.parametrize("path", DATA_TRACE_FILES, ids=lambda p: str(p.relative_to(DATA_TRACES)))
def test_every_rule_on_every_shared_trace(path):
    _every_rule(path)


def test_every_shared_trace_is_tested():
    assert len(DATA_TRACE_FILES) == 7


def test_every_rule_on_every_lesson_trace(runs):
    assert len(runs) == 12
    for run in runs.values():
        _every_rule(trace_of(run))


@pytest.fixture
def broken_rule(monkeypatch):
    def broken(tables):
        raise ValueError("a bug")

    monkeypatch.setattr("common.report.rules.registry.RULES", [broken])


def test_the_users_safety_net_stays(broken_rule, monkeypatch):
    """Without the strict switch (a user's run), a crashing rule is one finding and the report goes on."""
    monkeypatch.setenv(STRICT_ENV, "0")
    (finding,) = run_rules(tables_of(DATA_TRACE_FILES[0]))
    assert finding.rule == "rule_error" and "ValueError: a bug" in finding.message


def test_the_suite_is_strict(broken_rule):
    with pytest.raises(ValueError, match="a bug"):
        run_rules(tables_of(DATA_TRACE_FILES[0]))
