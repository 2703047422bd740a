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

Shared by every stage: :mod:`.findings` (``Finding``, ``Span``), :mod:`.units` and :mod:`.rates` (how
numbers are written).

Importing this package is cheap (no torch, no numpy): the pipeline loads on first use.
"""

from __future__ import annotations


def tables_of(path, *, parallel: bool = False, max_bytes: int | None = None):
    """The :class:`~common.report.facts.tables.Tables` of one trace file (its model and every number; no
    findings): load -> model -> tables; bad input raises :class:`common.errors.BadInput`. With ``parallel``, a big plain-JSON file is decoded by two
    processes (a fork: the command line uses it, a library caller inside a torch program does not);
    ``max_bytes`` caps the JSON text read (default: 4 GiB)."""
    from common.report.load.inputs import DEFAULT_MAX_BYTES
    from common.report.load.reader import load
    from common.report.model.build import build
    from common.report.facts.tables import build_tables

    return build_tables(build(load(path, parallel=parallel, max_bytes=max_bytes or DEFAULT_MAX_BYTES)))


def analyze(path, *, parallel: bool = False, max_bytes: int | None = None):
    """(tables, findings) for one trace file; bad input raises :class:`common.errors.BadInput`."""
    from common.report.rules import run_rules

    tables = tables_of(path, parallel=parallel, max_bytes=max_bytes)
    return tables, run_rules(tables)


def report_json(path) -> dict:
    """The report of one trace as the JSON-ready dict that ``--json`` writes."""
    from common.report.render.json import to_json

    tables, findings = analyze(path)
    return to_json(tables, findings)


def print_short_report(path, console=None) -> None:
    """Print the compact report (header, headline numbers, findings; ~10-20 lines) of one trace.

    The numbered scripts call this after exporting their trace. The report is a bonus: any failure
    in it (a trace it cannot read, msgspec or numpy missing, a bug) prints one line instead of
    raising, so the lesson still exits 0 with its files written.
    """
    lesson_report(path, console, short=True)


def lesson_report(path, console=None, *, short: bool = True, html=None, annotated=None,
                  job_verdict: str | None = None) -> None:
    """What a lesson says about the trace it wrote: the short report (``short``), the HTML page
    (``html``: its path; ``job_verdict``: for one rank of a job, the job's straggler line, shown under
    its steps) and the annotated copy of the trace (``annotated``: its path), from one reading of the
    trace. Like :func:`print_short_report`, a failure is one printed line."""
    try:
        from rich.console import Console

        console = console or Console()
    except ImportError as exc:  # no rich: one plain line
        print(f"trace report unavailable: {_one_line(exc)}")
        return
    try:
        tables, findings = analyze(path)
        if short:
            from common.report.render.text import render_short

            render_short(tables, findings, console)
        if html is not None:
            write_html(tables, findings, html, job_verdict=job_verdict, timeline_trace=annotated)
            console.print(f"[bold]wrote[/] {_shown(html)}  (the report as a page of plots; open it in a browser)")
        if annotated is not None:
            from pathlib import Path

            from rich.markup import escape

            from common.commands import uv_run
            from common.report.render.annotate import write_annotated

            slices = write_annotated(path, tables, findings, annotated)
            console.print(f"[bold]wrote[/] {_shown(annotated)}  (the trace with a Findings track of {slices} "
                          "slices, for Perfetto)")
            console.print(f"  open it: [cyan]{escape(uv_run('-m', 'common.view', Path(annotated)))}[/]", soft_wrap=True)
    except Exception as exc:  # noqa: BLE001 - the report must never cost the lesson its exit status
        from rich.markup import escape

        console.print(f"[red]trace report unavailable[/]: {escape(_one_line(exc))}")


def write_html(tables, findings, dest, *, flag: str | None = None, job_verdict: str | None = None,
               timeline_trace=None) -> int:
    """Write the report page of one trace (its tables and findings) to ``dest`` (whole or not at all,
    :func:`common.output.write_file`; ``flag`` names it in an error line); returns its size in bytes.
    ``job_verdict``: the job report's straggler line, for one rank's page; ``timeline_trace``: the
    annotated copy the findings' timeline commands open (default: the trace read)."""
    from common.output import write_file
    from common.report.render.html import render_html

    page = render_html(tables, findings, job_verdict=job_verdict, timeline_trace=timeline_trace)
    return write_file(dest, page.encode(), flag=flag, what="the page")


def _shown(path) -> str:
    from rich.markup import escape

    from common.commands import display_path

    return escape(display_path(path))


def print_short_job_report(paths, console=None) -> None:
    """Print the compact report over every rank's trace of one job (06_ddp.py calls this on rank 0).
    Like :func:`print_short_report`, any failure prints one line instead of raising."""
    from rich.console import Console

    console = console or Console()
    try:
        from common.report.job.ranks import read_ranks
        from common.report.render.job import render_job_short

        render_job_short(read_ranks(list(paths)), console)
    except Exception as exc:  # noqa: BLE001 - the report must never cost the lesson its exit status
        from rich.markup import escape

        console.print(f"[red]job report unavailable[/]: {escape(_one_line(exc))}")


def job_verdict(paths) -> str | None:
    """The job report's straggler line over every rank's trace (what each rank's page shows under its
    steps); None where the job cannot be read (its short report has said why)."""
    try:
        from common.report.job.ranks import read_ranks
        from common.report.render.job import straggler_text

        return straggler_text(read_ranks(list(paths)))
    except Exception:  # noqa: BLE001 - the page goes without it, as the lesson goes without its report
        return None


def _one_line(exc: Exception) -> str:
    from common.errors import BadInput

    text = (str(exc).strip().splitlines() or [""])[0]
    if isinstance(exc, BadInput):
        return text
    if isinstance(exc, ImportError):
        return f"{text} (the report needs msgspec and numpy: uv sync, or pip install msgspec numpy)"
    return f"{type(exc).__name__}: {text}"


__all__ = ["analyze", "tables_of", "report_json", "print_short_report", "lesson_report", "write_html",
           "print_short_job_report", "job_verdict"]
