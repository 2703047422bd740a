"""The report as one self-contained HTML page, for a browser: header numbers, plots (inline SVG), tables, findings.

It opens offline: no script, no stylesheet or font from a network, nothing to fetch. The plots are
matplotlib's (:mod:`common.report.render.plots`); the interactive timeline stays Perfetto's job. Every plot
sits in a ``<figure id=... data-plot=...>`` whose attribute holds the numbers drawn, so a program
can check a picture against the JSON report.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from common.report.model import names as trace_names
from common.report.facts.tables import Tables
from common.report.render.plots import Plot, grouped_steps, horizontal_bars, spread, stacked_steps, memory_curve
from common.report.findings import Finding
from common.report.render.step_series import breakdown_series, pair_series, spread_series, spread_title
from common.report.render.timeline_links import view_command
from common.report.units import fmt_us
from common.amounts import fmt_bytes_binary
from common.commands import display_path
from common.output import write_file
from common.report.render.compare import device_work_rows, left_out_line, op_rows
from common.report.render.roofline import HEAD, caption, roofline_plot, table_rows
from common.report.render.text import header_facts, headline_lines
from common.report.render.generated_code import generated_code_section

TOP = 12  # bars in a top-N plot
# the findings that judge what a plot shows, printed under it as well as among the findings: the regime
# (or why it cannot be told) under the steps' breakdown, the steps' noise and a cold first step under the spread
VERDICTS_UNDER = {"breakdown": ("overhead_bound", "compute_bound", "device_bound", "regime_cannot_tell"),
                  "spread": ("noisy_steps", "cold_first_step", "first_recorded_step")}
STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 980px;
       padding: 1.2em; color: #222; }
h1 { font-size: 1.35em; margin-bottom: .2em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
.path { font-family: ui-monospace, monospace; color: #555; word-break: break-all; }
ul.numbers { padding-left: 1.2em; } figure { margin: 1em 0; } figcaption { font-weight: 600; }
figure svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: .92em; } td, th { padding: .2em .6em; border-bottom: 1px solid #ddd; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.finding, p.verdict { margin: .5em 0; } .warn { color: #a15c00; } .note { color: #246; } .info { color: #265c26; }
.hint, .caption { color: #555; } details pre { white-space: pre-wrap; font-size: .85em; background: #f6f6f6; padding: .5em; }
"""


def _figure(plot: Plot, verdicts: str = "") -> str:
    """The plot in its figure; ``verdicts``: the report's judgement of what it shows, under the picture."""
    data = html.escape(json.dumps(plot.data, separators=(",", ":")), quote=True)
    caption = f'<div class="caption">{html.escape(plot.caption)}</div>' if plot.caption else ""
    return (f'<figure id="{plot.id}" data-plot="{data}"><figcaption>{html.escape(plot.title)}</figcaption>'
            f"{plot.svg}{caption}{verdicts}</figure>")


def _verdict(rule: str, level: str, text: str, *, named: bool = True) -> str:
    """One verdict line as the console prints it (``named``: after its rule's name, as a finding)."""
    name = f"<b>{html.escape(rule)}</b>: " if named else ""
    return f'<p class="verdict {level}" data-rule="{html.escape(rule)}">{name}{html.escape(text)}</p>'


def _table(head: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(
        f'<td class="num">{html.escape(c)}</td>' if i >= numeric_from else f"<td>{html.escape(c)}</td>"
        for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _page(title: str, parts: list[str]) -> str:
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")


# ----------------------------------------------------------------------------- one trace


def breakdown_plot(t: Tables) -> Plot:
    """Per step (or per bucket of steps, past a few thousand): the breakdown of :mod:`.step_series`."""
    b = breakdown_series(t)
    spikes = (list(b.totals.low), list(b.totals.high)) if b.buckets.size > 1 else None
    return stacked_steps("breakdown", b.title, list(b.labels), {k: list(v) for k, v in b.parts.items()}, spikes,
                         b.caption)


def gpu_plots(t: Tables) -> list[Plot]:
    if not t.has_gpu:
        return []
    cats = [(c.label, c.label, c.time_us) for c in t.categories]
    kernels = [(trace_names.short_name(k.name, 48), k.name, k.total_us) for k in t.kernels[:TOP]]
    return [horizontal_bars("categories", "GPU time by kernel category", cats, "GPU time"),
            horizontal_bars("kernels", f"top {len(kernels)} kernels by total time", kernels, "total time")]


def ops_plot(t: Tables) -> Plot | None:
    ops = t.ops_by_self_time[:TOP]
    if not any(us for _, us in ops):
        return None
    rows = [(trace_names.short_name(o.name, 48), o.name, us) for o, us in ops]
    return horizontal_bars("ops", f"top {len(rows)} ops by {t.op_self_time}", rows, t.op_self_time)


def spread_plot(t: Tables) -> Plot | None:
    """The steps' wall times and, on a GPU trace, each top kernel's time per step: mean vs median."""
    rows = spread_series(t)
    if not rows:
        return None
    captions = {r.buckets.caption for r in rows if r.buckets.caption}
    return spread("spread", spread_title(rows),
                  [(r.label, r.name, list(r.drawn_us), r.mean_us, r.median_us, r.steps) for r in rows],
                  "; ".join(sorted(captions)) or None)


def _header(t: Tables) -> str:
    items = "".join(f"<li>{html.escape(x)}</li>" for x in header_facts(t) + headline_lines(t))
    return (f'<h1>Trace report</h1><div class="path">{html.escape(display_path(t.model.path))}</div>'
            f'<ul class="numbers">{items}</ul>')


def _steps_table(t: Tables) -> str:
    rows = []
    for r in t.step_rows:
        row = [r.name, fmt_us(r.wall_us), f"{r.ops:,}"]
        if t.has_gpu:
            row += [f"{r.kernels:,}", fmt_us(r.device_us), f"{r.gpu_busy_pct:.1f}%"]
        rows.append(row)
    head = ["step", "wall", "ops"] + (["kernels", "device time", "GPU busy"] if t.has_gpu else [])
    outside = f"<p>{html.escape(t.launched_outside.said())}</p>" if t.launched_outside is not None else ""
    lag = f"<p>{html.escape(t.lag.said())}</p>" if t.lag.said() else ""
    return "<h2>Steps</h2>" + _table(head, rows) + outside + lag


def _phases_table(t: Tables) -> str:
    """The per-annotation table: what one call of each annotated phase costs and dispatches."""
    if not t.phases:
        return ""
    rows = []
    for p in t.phases:
        device = [fmt_us(p.device_median_us) if p.device_median_us is not None else "-"] if t.has_gpu else []
        row = [p.name, f"{p.calls:,}", *device, fmt_us(p.mean_us), f"{p.ops_per_call:,.0f}"]
        if t.has_gpu:
            row += [f"{p.kernels_per_call:,.0f}", f"{p.gpu_busy_pct:.1f}%" if p.gpu_busy_pct is not None else "-"]
        rows.append(row)
    head = ["annotation", "calls"] + (["device time per call (median call)"] if t.has_gpu else []) + [
        "CPU wall per call (mean)", "ops per call"] + (["kernels per call", "GPU busy"] if t.has_gpu else [])
    return "<h2>Annotations (per call)</h2>" + _table(head, rows)


def _roofline_plot(t: Tables) -> list:
    return [roofline_plot(t.roofline)]


def _roofline_table(t: Tables) -> str:
    """The roofline's table under its plot (:mod:`.roofline`)."""
    r = t.roofline
    if r is None or not r.rows:
        return ""
    return ('<h2 id="roofline-table">Roofline</h2>' + _table(list(HEAD[:-1]) + [HEAD[-1]], table_rows(r), 2)
            + f'<p class="hint">{html.escape(caption(r))}</p>')


def findings_html(findings: list[Finding], t: Tables | None = None, timeline_trace=None) -> str:
    """The findings, each with the command that opens the timeline where it points (on ``timeline_trace``,
    the annotated copy, where the report wrote one; else on the trace it read)."""
    out = [f"<h2>Findings ({len(findings)})</h2>"]
    for f in findings:
        evidence = html.escape(json.dumps(f.evidence, indent=1, default=str))
        hint = f'<div class="hint">→ {html.escape(f.hint)}</div>' if f.hint else ""
        command = view_command(t, f, timeline_trace) if t is not None else None
        if command:  # the timeline, offline, on the window the finding points at
            hint += f'<div class="hint timeline">see it on the timeline: <code>{html.escape(command)}</code></div>'
        out.append(f'<div class="finding" id="finding-{html.escape(f.rule)}"><span class="{f.level}"><b>'
                   f"{html.escape(f.rule)}</b></span>: {html.escape(f.message)}{hint}"
                   f"<details><summary>evidence</summary><pre>{evidence}</pre></details></div>")
    return "\n".join(out)


def memory_plot(t: Tables) -> Plot | None:
    """The memory curve (allocated bytes over time per device), when the trace holds [memory] events."""
    if t.memory is None:
        return None

    reconstructed = any(d.totals == "reconstructed" for d in t.memory.devices)
    return memory_curve("memory-curve", "memory allocated over time" + (
        " (above the level at the profiler's start: the trace records no totals)" if reconstructed else ""),
        {d.device: list(d.curve) for d in t.memory.devices},
        {d.device: (d.peak_at_us, d.peak_allocated_bytes, f"peak {fmt_bytes_binary(d.peak_allocated_bytes)}")
         for d in t.memory.devices})


def render_html(t: Tables, findings: list[Finding], extra_sections: list[str] = (),
                job_verdict: str | None = None, timeline_trace=None, page_dir=None) -> str:
    """The whole page for one trace. ``extra_sections`` are HTML blocks to add before the findings;
    ``job_verdict``: for one rank of a job, the job report's straggler line, shown under the steps;
    ``page_dir``: the folder the page is written to (its links to the generated code are relative to it)."""
    plots = [breakdown_plot(t), *gpu_plots(t), ops_plot(t), spread_plot(t), memory_plot(t), *_roofline_plot(t)]
    under = {plot_id: "".join(_verdict(f.rule, f.level, f.message) for f in findings if f.rule in rules)
             for plot_id, rules in VERDICTS_UNDER.items()}
    if job_verdict:
        under["breakdown"] += _verdict("straggler", "note", job_verdict)
    parts = [_header(t)] + [_figure(p, under.get(p.id, "")) for p in plots if p is not None]
    parts += [_steps_table(t), _phases_table(t), _roofline_table(t), generated_code_section(t, page_dir), *extra_sections,
              findings_html(findings, t, timeline_trace)]
    parts += [f"<p class=\"hint\">note: {html.escape(n)}</p>" for n in t.model.notes]
    return _page(f"Trace report: {t.model.path}", parts)


# ----------------------------------------------------------------------------- two traces


def _side_verdict(side: dict | None) -> str:
    """The compare's verdict on one side (CPU or device), under its plot: the console's line."""
    if not side:
        return ""
    return _verdict("compare", "info" if side["judged"] else "note", side["verdict"], named=False)


def render_compare_html(c: dict) -> str:
    """``--compare A B`` as a page: per-step CPU and device time side by side, the kernels."""
    steps = c["steps"]
    summary = c["summary"]
    cpu = grouped_steps("compare-cpu", "CPU (wall) time per step, A vs B",
                        pair_series([s["a_cpu_us"] for s in steps if s["a_cpu_us"] is not None],
                                    [s["b_cpu_us"] for s in steps if s["b_cpu_us"] is not None]), "wall time")
    parts = [f'<h1>Compare</h1><div class="path">A = {html.escape(str(c["a"]))}<br>B = {html.escape(str(c["b"]))}'
             "</div>", _figure(cpu, _side_verdict(summary["cpu"]))]
    if summary["device"] is not None:
        parts.append(_figure(grouped_steps("compare-device", "device time per step, A vs B",
                                           pair_series([s["a_device_us"] for s in steps if s["a_device_us"] is not None],
                                                       [s["b_device_us"] for s in steps if s["b_device_us"] is not None]),
                                           "device time"), _side_verdict(summary["device"])))

    with_device = summary["device"] is not None
    left = left_out_line(summary)
    if left:
        parts.insert(1, f'<p class="hint">The medians, the verdicts and every per-step figure {html.escape(left, quote=False)}.</p>')
    if summary.get("unlike"):
        parts.insert(1, f'<p class="hint"><b>Unlike runs:</b> {html.escape(summary["unlike"], quote=False)}.</p>')
    rows = device_work_rows(c, width=70)
    parts.append("<h2>Device work per step (median)</h2>" + (
        _table(["", "kernel / memcpy / memset", "calls per step", "A", "B", "change"], rows, 2) if rows
        else "<p>none in either trace (no device lane)</p>"))
    rows = op_rows(c, with_device, most=50)
    head = ["op", "calls per step", "CPU A", "CPU B"] + (["device A", "device B"] if with_device else [])
    parts.append("<h2>Ops whose calls" + (" or device time" if with_device else "") + " changed, per step (median)</h2>"
                 + (_table(head, rows) if rows else "<p>none: the same ops, as many calls per step</p>"))
    return _page("Compare two traces", parts)


def write_html(tables, findings, dest, *, flag: str | None = None, job_verdict: str | None = None,
               timeline_trace=None) -> int:
    """Write the report page of one trace (its tables and findings) to ``dest`` (whole or not at all,
    :func:`common.output.write_file`; ``flag`` names it in an error line); returns its size in bytes.
    ``job_verdict``: the job report's straggler line, for one rank's page; ``timeline_trace``: the
    annotated copy the findings' timeline commands open (default: the trace read)."""
    page = render_html(tables, findings, job_verdict=job_verdict, timeline_trace=timeline_trace,
                       page_dir=Path(dest).parent)
    return write_file(dest, page.encode(), flag=flag, what="the page")
