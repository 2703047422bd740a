"""The timeline commands, for the reader of the text report and the page: where a finding points, as a
command that opens the timeline there: ``uv run -m common.view TRACE
--at START,END`` serves the trace with Perfetto's UI from this machine and opens it on that window
(:mod:`common.view_ui`). The window is the finding's spans, a little wider so what lies around them
shows too, kept inside the report's window (to the end of the device work its steps launched); in the trace's own µs (``ts``), as ``--at`` reads them."""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from common.commands import display_path, uv_run
from common.report.findings import Finding
from common.report.facts.tables import Tables

MARGIN = 0.1  # of the spans' extent, on each side
EDGE_US = 0.002  # kept this far inside the window: the UI ignores a window that leaves the trace by a ns


def finding_window(t: Tables, f: Finding) -> tuple[float, float] | None:
    """(start, end) in the trace's µs around every span of ``f``, or None when it has none."""
    if not f.spans:
        return None
    start = min(s.start_us for s in f.spans)
    end = max(s.start_us + s.dur_us for s in f.spans)
    pad = max((end - start) * MARGIN, 1.0)
    w0, w1 = t.model.spans_window
    start, end = max(start - pad, w0 + EDGE_US), min(end + pad, w1 - EDGE_US)
    if end <= start:
        return None
    t0 = t.model.t0
    return math.ceil((t0 + start) * 1000) / 1000, math.floor((t0 + end) * 1000) / 1000


def view_command(t: Tables, f: Finding, trace: str | Path | None = None) -> str | None:
    """The command that opens ``trace`` (default: the one the report read) where ``f`` points."""
    window = finding_window(t, f)
    if window is None:
        return None
    return uv_run("-m", "common.view", Path(trace or t.model.path), "--at", at_arg(window))



def at_arg(window: tuple[float, float]) -> str:
    """``START,END`` as ``--at`` reads it."""
    return f"{window[0]:.3f},{window[1]:.3f}"


def timeline_snippet(t: Tables, findings: list[Finding], trace: str | Path | None = None, width: int = 80) -> list[str]:
    """The commands that open the timeline where each finding with spans points, as lines a shell runs
    (``trace``: the annotated copy, where the report wrote one, so its Findings track shows; default:
    the trace read): ``T=TRACE`` once, then per finding ``uv run -m common.view "$T" --at START,END``
    with ``# rule`` after it, or on the line before where the two do not fit ``width`` (and ``--at``
    on a continued line where the command alone does not). [] when no finding has spans."""
    windows = [(f.rule, w) for f in findings if (w := finding_window(t, f)) is not None]
    if not windows:
        return []
    lines = [f"T={shlex.quote(display_path(Path(trace or t.model.path)))}"]
    view = uv_run("-m", "common.view")
    for rule, window in windows:
        command = f'{view} "$T" --at {at_arg(window)}'
        one = f"{command}  # {rule}"
        if len(one) <= width:
            lines.append(one)
        else:  # the rule above it, and the window on a continued line where the command is too long
            lines += [f"# {rule}"] + ([command] if len(command) <= width else [f'{view} "$T" \\', f"  --at {at_arg(window)}"])
    return lines
