"""The trace report: reads any exported Kineto/Chrome trace and prints the patterns it finds.

    uv run -m common.report TRACE [TRACE ...]          # rich report, one per trace
    uv run -m common.report TRACE --short              # the compact form the lessons print
    uv run -m common.report --json TRACE               # JSON on stdout (-o FILE writes FILE)
    uv run -m common.report --compare A B [--json]     # two traces side by side (eager vs compile)
    uv run -m common.report DIR | RANK_TRACES...       # one job, every rank (common.report.job.ranks)

A pipeline read front to back, one folder per stage, each a frozen, typed result made from the previous
one only (each folder's ``__init__`` says what comes in and what goes out):

    load/     a file -> Loaded (the events as numpy columns, the metadata, the run's knobs)
    model/    Loaded -> Model (steps, CPU call tree, device lanes, kernel <-> launch correlation)
    facts/    Model -> Tables (every number, once, in typed rows; one module per theme)
    rules/    Tables -> [Finding] (the cheatsheet, one function per row)
    render/   Tables and findings -> rich text, JSON, HTML, the annotated trace, the glance table
    compare/  two runs' Tables -> what changed, with a control;  job/  every rank of one job

Shared by every stage: :mod:`.findings` (``Finding``, ``Span``); :mod:`.units`, :mod:`.rates` and
:mod:`common.amounts` (how numbers are written).

The ways in, one way round (they call the stages; no stage calls them): :mod:`.pipeline` runs one trace
through the stages (``tables_of``, ``analyze``, ``report_json``); :mod:`.cli` is the command line
(``__main__`` calls :func:`.cli.main.main`) and what a lesson prints (:mod:`.cli.lesson`). This module only
names them for callers: ``from common.report import analyze``.

Importing this package is cheap (no torch, no numpy): each name loads its module on first use.
"""

from __future__ import annotations

from importlib import import_module

# The names callers import from here (common/lesson.py, common/distributed.py, tests), and where each lives.
_HOME = {
    "tables_of": "common.report.pipeline",
    "analyze": "common.report.pipeline",
    "report_json": "common.report.pipeline",
    "write_html": "common.report.render.html",
    "print_short_report": "common.report.cli.lesson",
    "lesson_report": "common.report.cli.lesson",
    "print_short_job_report": "common.report.cli.lesson",
    "job_verdict": "common.report.cli.lesson",
}
__all__ = list(_HOME)


def __getattr__(name: str):
    """``common.report.analyze`` and the others: imported from their module when first asked for."""
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    return getattr(import_module(_HOME[name]), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
