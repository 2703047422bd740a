"""Where a finding points, as a command that opens the timeline there: ``uv run -m common.view TRACE
--at START,END`` serves the trace with Perfetto's UI from this machine and opens it on that window
(:mod:`common.view_ui`). The window is the finding's spans, a little wider so what lies around them
shows too, kept inside the report's window; in the trace's own µs (``ts``), as ``--at`` reads them."""

from __future__ import annotations

import math
from pathlib import Path

from common.commands import uv_run
from common.report.findings import Finding
from common.report.tables import Tables

MARGIN = 0.1  # of the spans' extent, on each side
EDGE_US = 0.002  # kept this far inside the window: the UI ignores a window that leaves the trace by a ns


def finding_window(t: Tables, f: Finding) -> tuple[float, float] | None:
    """(start, end) in the trace's µs around every span of ``f``, or None when it has none."""
    if not f.spans:
        return None
    start = min(s.start_us for s in f.spans)
    end = max(s.start_us + s.dur_us for s in f.spans)
    pad = max((end - start) * MARGIN, 1.0)
    w0, w1 = t.model.window
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
    return uv_run("-m", "common.view", Path(trace or t.model.path), "--at", f"{window[0]:.3f},{window[1]:.3f}")
