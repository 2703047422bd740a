"""What a lesson prints about the trace it wrote, on its console: the short report, the page and the
annotated copy (:func:`lesson_report`), and for a job the compact report over every rank
(:func:`print_short_job_report`). The report is a bonus there: any failure in it (a trace it cannot read,
msgspec or numpy missing, a bug) prints one line instead of raising, so the lesson still exits 0 with its
files written."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from common.report.pipeline import analyze
from common.commands import display_path, uv_run
from common.errors import BadInput


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

        console = console or Console()
    except ImportError as exc:  # no rich: one plain line
        print(f"trace report unavailable: {_one_line(exc)}")
        return
    try:
        tables, findings = analyze(path)
        if short:
            from common.report.render.text import render_short  # lazy: 12 ms that a job's report does without

            render_short(tables, findings, console)
        if html is not None:
            from common.report.render.html import write_html  # lazy: 16 ms, only with --html

            write_html(tables, findings, html, job_verdict=job_verdict, timeline_trace=annotated)
            console.print(f"[bold]wrote[/] {_shown(html)}  (the report as a page of plots; open it in a browser)")
        if annotated is not None:


            from common.report.render.annotate import write_annotated  # lazy: 8 ms, only with --annotate

            slices = write_annotated(path, tables, findings, annotated)
            console.print(f"[bold]wrote[/] {_shown(annotated)}  (the trace with a Findings track of {slices} "
                          "slices, for Perfetto)")
            console.print(f"  open it: [cyan]{escape(uv_run('-m', 'common.view', Path(annotated)))}[/]", soft_wrap=True)
    except Exception as exc:  # noqa: BLE001 - the report must never cost the lesson its exit status

        console.print(f"[red]trace report unavailable[/]: {escape(_one_line(exc))}")


def _shown(path) -> str:
    return escape(display_path(path))


def print_short_job_report(paths, console=None) -> None:
    """Print the compact report over every rank's trace of one job (06_ddp.py calls this on rank 0).
    Like :func:`print_short_report`, any failure prints one line instead of raising."""
    console = console or Console()
    try:
        from common.report.job.ranks import read_ranks  # lazy: 40 ms with render.job, only for a job (06_ddp)
        from common.report.render.job import render_job_short  # lazy: 40 ms with job.ranks, only for a job (06_ddp)

        render_job_short(read_ranks(list(paths)), console)
    except Exception as exc:  # noqa: BLE001 - the report must never cost the lesson its exit status

        console.print(f"[red]job report unavailable[/]: {escape(_one_line(exc))}")


def job_verdict(paths) -> str | None:
    """The job report's straggler line over every rank's trace (what each rank's page shows under its
    steps); None where the job cannot be read (its short report has said why)."""
    try:
        from common.report.job.ranks import read_ranks  # lazy: 40 ms with render.job, only for a job (06_ddp)
        from common.report.render.job import straggler_text  # lazy: 40 ms with job.ranks, only for a job (06_ddp)

        return straggler_text(read_ranks(list(paths)))
    except Exception:  # noqa: BLE001 - the page goes without it, as the lesson goes without its report
        return None


def _one_line(exc: Exception) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    if isinstance(exc, BadInput):
        return text
    if isinstance(exc, ImportError):
        return f"{text} (the report needs msgspec and numpy: uv sync, or pip install msgspec numpy)"
    return f"{type(exc).__name__}: {text}"
