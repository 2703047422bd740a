"""The report page's section "From each generated kernel to its code": the generated kernels by their share of
the steps' wall time, each linked to the compiled module a lesson copied beside the trace (at its line), and the
command that runs the module alone. Shows the record of :mod:`common.report.facts.generated_code`; judges nothing."""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Optional
from urllib.parse import quote

from common.report.facts.tables import Tables
from common.report.units import fmt_us

MOST = 12  # kernels in the table


def code_href(path: str, page_dir: Optional[Path]) -> str:
    """A link to a copy: relative to the page's folder where the page is written (it moves with the trace's
    folder), else a file:// URL."""
    if page_dir is not None:
        try:
            return quote(os.path.relpath(Path(path).resolve(), Path(page_dir).resolve()))
        except ValueError:  # another drive
            pass
    return Path(path).resolve().as_uri()


def generated_code_section(t: Tables, page_dir: Optional[Path] = None) -> str:
    """The section, or "" where the trace has no generated kernel and no copy of a compiled module."""
    g = t.generated_code
    if not g.rows and not g.modules:
        return ""
    out = ['<h2 id="generated-code">From each generated kernel to its code</h2>']
    if g.rows:
        device = any(r.device_pct is not None for r in g.rows)
        head = ["kernel", "share of the steps' wall", *(["share of the device time"] if device else []), "per call",
                "calls", "fuses", "code"]
        rows = []
        for r in g.rows[:MOST]:
            code = ", ".join(_link(path, line, page_dir) for path, line, _ in r.where) or (
                "not in the copies beside the trace" if g.modules else "no copy beside the trace")
            share = [f"{r.device_pct:.1f}%" if r.device_pct is not None else "-"] if device else []
            rows.append([html.escape(r.name), f"{r.wall_pct:.1f}%", *share, fmt_us(r.per_call_us),
                         f"{r.calls:,}", html.escape("+".join(r.ops)), code])
        out.append("<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"
                   + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows) + "</table>")
        out.append('<p class="hint">A kernel at s% of the steps\' wall time made 2x faster saves at most s/2% of a '
                   "step (the TorchInductor profiling guide's arithmetic).</p>")
    if g.modules:
        out.append("<p>The compiled module" + ("s" if len(g.modules) > 1 else "") + " of the run, copied beside the "
                   "trace: " + ", ".join(_link(path, None, page_dir) for path in g.modules) + "</p>")
    return "\n".join(out)


def _link(path: str, line: Optional[int], page_dir: Optional[Path]) -> str:
    name = html.escape(Path(path).name)
    at = f" line {line}" if line else ""
    return f'<a href="{html.escape(code_href(path, page_dir))}">{name}</a>{at}'
