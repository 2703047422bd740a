"""One trace file through the stages, the calls every way in makes (the command line, the lessons, tests):
:func:`tables_of` (load -> model -> facts), :func:`steps_of` (load -> model -> the steps alone, what a
comparison reads), :func:`analyze` (and the rules' findings), :func:`report_json` (and the JSON). Cheap to
import: each stage loads on first use."""

from __future__ import annotations


def tables_of(path, *, parallel: bool = False, max_bytes: int | None = None):
    """The :class:`~common.report.facts.tables.Tables` of one trace file (its model and every number; no
    findings): load -> model -> tables; bad input raises :class:`common.errors.BadInput`. With ``parallel``, a big plain-JSON file is decoded by two
    processes (a fork: the command line uses it, a library caller inside a torch program does not);
    ``max_bytes`` caps the JSON text read (default: 4 GiB)."""
    from common.report.load.inputs import DEFAULT_MAX_BYTES  # lazy: numpy and the stages (300 ms): importing common.report stays cheap
    from common.report.load.reader import load  # lazy: numpy and the stages (300 ms): importing common.report stays cheap
    from common.report.model.build import build  # lazy: numpy and the stages (300 ms): importing common.report stays cheap
    from common.report.facts.tables import build_tables  # lazy: numpy and the stages (300 ms): importing common.report stays cheap

    return build_tables(build(load(path, parallel=parallel, max_bytes=max_bytes or DEFAULT_MAX_BYTES)))


def steps_of(path, *, parallel: bool = False, max_bytes: int | None = None):
    """The :class:`~common.report.facts.steps.RunSteps` of one trace file (its model, step rows and header: what
    ``--compare`` reads, and no other number): load -> model -> steps; bad input as :func:`tables_of`."""
    from common.report.load.inputs import DEFAULT_MAX_BYTES  # lazy: numpy and the stages (300 ms): importing common.report stays cheap
    from common.report.load.reader import load  # lazy: numpy and the stages (300 ms): importing common.report stays cheap
    from common.report.model.build import build  # lazy: numpy and the stages (300 ms): importing common.report stays cheap
    from common.report.facts.steps import run_steps  # lazy: numpy and the stages (300 ms): importing common.report stays cheap

    return run_steps(build(load(path, parallel=parallel, max_bytes=max_bytes or DEFAULT_MAX_BYTES)))


def analyze(path, *, parallel: bool = False, max_bytes: int | None = None):
    """(tables, findings) for one trace file; bad input raises :class:`common.errors.BadInput`."""
    from common.report.rules.registry import run_rules  # lazy: numpy and the stages (300 ms): importing common.report stays cheap

    tables = tables_of(path, parallel=parallel, max_bytes=max_bytes)
    return tables, run_rules(tables)


def report_json(path) -> dict:
    """The report of one trace as the JSON-ready dict that ``--json`` writes."""
    from common.report.render.json import to_json  # lazy: numpy and the stages (300 ms): importing common.report stays cheap

    tables, findings = analyze(path)
    return to_json(tables, findings)
