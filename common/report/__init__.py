"""The trace report: reads any exported Kineto/Chrome trace and prints the patterns it finds.

    uv run -m common.report TRACE [TRACE ...]          # rich report, one per trace
    uv run -m common.report TRACE --short              # the compact form the lessons print
    uv run -m common.report TRACE --json               # JSON on stdout (--json FILE writes FILE)
    uv run -m common.report --compare A B [--json]     # two traces side by side (eager vs compile)

A pipeline read front to back: :mod:`.load` (bytes -> the few fields needed, msgspec structs)
-> :mod:`.model` (steps, CPU call tree, device lanes, correlation, intervals; every number; and
:mod:`.phases`, one row per annotation name) -> :mod:`.rules` (the cheatsheet, one function per
row) -> :mod:`.render` (rich, JSON; the JSON keys are documented there) and :mod:`.compare`.

Importing this package is cheap (no torch, no numpy): the pipeline loads on first use.
"""

from __future__ import annotations


def analyze(path, graveyard=None, parallel=False):
    """(model, findings) for one trace file; bad input raises :class:`common.errors.BadInput`.

    ``graveyard`` and ``parallel`` are for the command line (see :func:`common.report.model.analyze`).
    """
    from common.report.model import analyze as _analyze
    from common.report.rules import run_rules

    m = _analyze(path, graveyard, parallel)
    return m, run_rules(m)


def report_json(path) -> dict:
    """The report of one trace as the JSON-ready dict that ``--json`` writes."""
    from common.report.render import to_json

    m, findings = analyze(path)
    return to_json(m, findings)


def print_short_report(path, console=None) -> None:
    """Print the compact report (header, headline numbers, findings; ~10-20 lines) of one trace.

    The numbered scripts call this after exporting their trace. A trace the report cannot read
    prints one line instead of raising.
    """
    from rich.console import Console

    from common.errors import BadInput
    from common.report.render import render_short

    console = console or Console()
    try:
        m, findings = analyze(path)
    except BadInput as exc:
        console.print(f"[red]trace report unavailable[/]: {exc}")
        return
    render_short(m, findings, console)


def main(argv=None) -> int:
    from common.report.__main__ import main as _main

    return _main(argv)


__all__ = ["analyze", "report_json", "print_short_report", "main"]
