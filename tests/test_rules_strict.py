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
    """Every file under tests/data/traces is one of DATA_TRACE_FILES, a companion named after one (another
    tool's figures for it: ``v100_resnet50_train.tb_memory.json``) or a text (README, ORACLE, a licence): a
    trace saved as plain ``.json`` would escape the test above."""
    stems = {p.name.removesuffix(".json.gz") + "." for p in DATA_TRACE_FILES}
    other = [p for p in DATA_TRACES.rglob("*") if p.is_file() and p not in DATA_TRACE_FILES
             and not p.name.startswith(tuple(stems)) and not p.name.endswith(".md") and not p.name.startswith("LICENSE")]
    assert DATA_TRACE_FILES and not other, other


def test_every_rule_on_every_lesson_trace(runs):
    for run in runs.values():  # every run the session made (trace_of: it exited 0 and wrote its trace)
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
