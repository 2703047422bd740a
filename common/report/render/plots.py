"""Plots for the HTML page: matplotlib figures rendered to inline SVG (no JavaScript, no network).

Each function takes plain numbers (already computed by the model) and returns a :class:`Plot`:
the SVG text and the numbers it draws, which the page also writes into a ``data-plot`` attribute
so that a program (or a test) can read what a picture shows. Bars carry ``<title>`` elements, so a
browser shows the full name of a kernel or op on hover.
"""

from __future__ import annotations

import html
import io
import os
import re
import stat
import sys
import tempfile
import warnings
from dataclasses import dataclass, field

from common.amounts import BINARY_UNITS

BARS_MAX = 120  # steps drawn as bars, one each; past this, stacked areas
HOVER_VALUES = 50  # per-step values listed in a hover title
WIDTH_IN = 7.5  # inches at 96 dpi: about 720 px, a laptop screen's column
BAR_COLORS = {
    "kernel": "#4C72B0", "memcpy": "#DD8452", "memset": "#937860", "runtime": "#C44E52",
    "dataloader": "#8172B3", "cpu_exec": "#55A868", "other": "#BBBBBB",
    "compute": "#4C72B0", "dispatch": "#C44E52", "A": "#4C72B0", "B": "#DD8452",
}


@dataclass
class Plot:
    id: str
    title: str
    svg: str
    data: dict = field(default_factory=dict)
    caption: str | None = None  # what the picture leaves out or sums up (steps drawn as buckets)


def _writable_config_dir() -> None:
    """Matplotlib keeps its settings and font cache in ``$XDG_CONFIG_HOME/matplotlib`` (``~/.config/matplotlib``;
    ``~/.matplotlib`` on macOS); where that cannot be made or written (a read-only or missing HOME) it prints
    two lines of warning on import. Point ``MPLCONFIGDIR`` at a folder of this user's under the system's
    temporary folder instead (one per user, kept: the font cache is built once), and say nothing."""
    if os.environ.get("MPLCONFIGDIR"):
        return
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    default = os.path.join(os.path.expanduser("~"), ".matplotlib") if sys.platform == "darwin" else \
        os.path.join(xdg, "matplotlib")
    try:
        os.makedirs(default, exist_ok=True)
        if os.access(default, os.W_OK | os.X_OK):
            return
    except OSError:
        pass
    mine = os.path.join(tempfile.gettempdir(), f"common-report-matplotlib-{os.getuid()}")
    try:
        os.makedirs(mine, mode=0o700, exist_ok=True)
        info = os.lstat(mine)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():  # someone else's, or a link: not ours
            mine = tempfile.mkdtemp(prefix="common-report-matplotlib-")
    except OSError:
        mine = tempfile.mkdtemp(prefix="common-report-matplotlib-")
    os.environ["MPLCONFIGDIR"] = mine


def load_pyplot():
    _writable_config_dir()
    import matplotlib  # lazy: matplotlib, about 1 s: only a page (--html) draws

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt  # lazy: matplotlib, about 1 s: only a page (--html) draws

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
                         "axes.spines.right": False, "svg.hashsalt": "common.report"})
    return plt


def to_svg(fig, titles: dict[str, str]) -> str:
    """The figure as an inline SVG that scales to its container, with hover titles on named bars."""
    plt = load_pyplot()
    buf = io.StringIO()
    with warnings.catch_warnings():  # the SVG keeps text as text (svg.fonttype none): the browser's fonts draw it
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r'(<svg[^>]*?) width="[\d.]+pt" height="[\d.]+pt"', r'\1 width="100%"', svg, count=1)
    for gid, text in titles.items():
        svg = svg.replace(f'<g id="{gid}">', f'<g id="{gid}"><title>{html.escape(text)}</title>', 1)
    return svg


def _ms_or_us(values: list[float]) -> tuple[float, str]:
    top = max(values, default=0.0)
    return (1e3, "ms") if top >= 2e3 else (1.0, "µs")


def stacked_steps(plot_id: str, title: str, steps: list[str], parts: dict[str, list[float]],
                  spikes: tuple[list[float], list[float]] | None = None, caption: str | None = None) -> Plot:
    """One bar per step, stacked by part (the breakdown's categories, or compute vs dispatch). Past
    :data:`BARS_MAX` points (``steps`` are then buckets of steps), stacked areas instead of bars and,
    with ``spikes`` (each point's lowest and highest total), the range between them as a band."""
    plt = load_pyplot()
    totals = [sum(vals[i] for vals in parts.values()) for i in range(len(steps))]
    scale, unit = _ms_or_us(list(spikes[1]) if spikes else totals)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 2.6))
    if len(steps) <= BARS_MAX:
        bottom = [0.0] * len(steps)
        for name, vals in parts.items():
            if not any(vals):
                continue
            ax.bar(steps, [v / scale for v in vals], bottom=bottom, label=name, color=BAR_COLORS.get(name))
            bottom = [b + v / scale for b, v in zip(bottom, vals)]
    else:
        _stacked_areas(ax, steps, parts, scale, spikes)
    ax.set_ylabel(f"time per step ({unit})")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    data = dict(steps=steps, parts=parts, totals_us=totals)
    if spikes:
        data.update(low_us=list(spikes[0]), high_us=list(spikes[1]))
    return Plot(plot_id, title, to_svg(fig, {}), data, caption)


def _stacked_areas(ax, steps: list[str], parts: dict, scale: float, spikes) -> None:
    xs = list(range(len(steps)))
    shown = {name: [v / scale for v in vals] for name, vals in parts.items() if any(vals)}
    if shown:
        ax.stackplot(xs, *shown.values(), labels=list(shown), colors=[BAR_COLORS.get(n) for n in shown],
                     linewidth=0)
    if spikes:
        ax.fill_between(xs, [v / scale for v in spikes[0]], [v / scale for v in spikes[1]], color="#222222",
                        alpha=0.25, linewidth=0, label="min–max")
    ticks = xs[::max(1, len(xs) // 6)]
    ax.set_xticks(ticks, [steps[i] for i in ticks], fontsize=7)
    ax.set_xlim(0, max(len(xs) - 1, 1))


def horizontal_bars(plot_id: str, title: str, rows: list[tuple[str, str, float]], xlabel: str) -> Plot:
    """Named bars, longest on top: ``rows`` of (short label, full name for the hover, µs)."""
    plt = load_pyplot()
    rows = rows[::-1]
    scale, unit = _ms_or_us([r[2] for r in rows])
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.32 * len(rows) + 0.8))
    # numeric positions: two kernels may share a short name, and each keeps its own bar
    bars = ax.barh(range(len(rows)), [r[2] / scale for r in rows], color="#4C72B0")
    ax.set_yticks(range(len(rows)), [r[0] for r in rows])
    titles = {}
    for i, (bar, row) in enumerate(zip(bars, rows)):
        bar.set_gid(f"{plot_id}-bar-{i}")
        titles[f"{plot_id}-bar-{i}"] = f"{row[1]}: {row[2]:,.1f} µs"
    ax.set_xlabel(f"{xlabel} ({unit})")
    data = dict(labels=[r[0] for r in rows[::-1]], names=[r[1] for r in rows[::-1]],
                values_us=[r[2] for r in rows[::-1]])
    return Plot(plot_id, title, to_svg(fig, titles), data)


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def spread(plot_id: str, title: str, series: list[tuple[str, str, list[float], float, float, int]],
           caption: str | None = None) -> Plot:
    """Per-step values of a few series (the steps' wall times, a kernel's time in each step), each
    relative to its own median so that series of any size share one axis; the mean of each is the
    dashed mark: far from 1.0 when one step is an outlier (the spread the posts warn about). A series
    is (label, full name, the values drawn, mean, median, steps): the values drawn are every step's,
    or the min and max of each bucket of steps (said in ``caption``)."""
    plt = load_pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 0.45 * len(series) + 0.9))
    data, titles = [], {}
    for row, (label, full, vals, mean, median, steps) in enumerate(series):
        rel = [v / median if median > 0 else 0.0 for v in vals]
        dots = ax.scatter(rel, [row] * len(rel), s=18, color="#4C72B0", zorder=3)
        dots.set_gid(f"{plot_id}-row-{row}")
        shown = ", ".join(f"{v:,.1f}" for v in vals[:HOVER_VALUES]) + (", …" if len(vals) > HOVER_VALUES else "")
        titles[f"{plot_id}-row-{row}"] = (f"{full}: median {median:,.1f} µs, mean {mean:,.1f} µs over {steps:,} steps, "
                                          f"{'per step' if len(vals) == steps else 'min and max per bucket'} {shown}")
        ax.plot([mean / median] * 2 if median > 0 else [0, 0], [row - 0.3, row + 0.3], "--", color="#C44E52",
                label="mean" if row == 0 else None)
        data.append(dict(label=label, name=full, values_us=list(vals), mean_us=mean, median_us=median, steps=steps))
    ax.axvline(1.0, color="#55A868", linewidth=1, label="median")
    if max((v / d["median_us"] for d in data for v in d["values_us"] if d["median_us"] > 0), default=1.0) > 20:
        ax.set_xscale("log")  # a cold first step 100x the others: keep the others readable
    ax.set_yticks(range(len(series)), [s[0] for s in series])
    ax.set_xlabel("time in each step / its median")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return Plot(plot_id, title, to_svg(fig, titles), dict(series=data), caption)


def grouped_steps(plot_id: str, title: str, series, ylabel: str) -> Plot:
    """Two runs' per-step values side by side (A and B), step by step in order (``series``: a
    :class:`~common.report.render.step_series.PairSeries`): a bar per step; past a few thousand steps, per
    bucket of consecutive steps its mean as a line and its min-max as a band, said in the caption."""
    plt = load_pyplot()
    a, b, buckets = series.a, series.b, series.buckets
    scale, unit = _ms_or_us(list(a.high) + list(b.high))
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 2.4))
    for values, shift, label in ((a, -0.2, "A"), (b, 0.2, "B")):
        if buckets.size == 1:  # every step its bar
            xs = [i + 1 + shift for i in range(len(values.mean))]
            ax.bar(xs, [v / scale for v in values.mean], width=0.4, label=label, color=BAR_COLORS[label])
            continue
        xs = list(range(1, len(values.mean) + 1))  # buckets: the mean as a line, min-max as a band (2 artists)
        ax.plot(xs, [v / scale for v in values.mean], label=f"{label} (mean)", color=BAR_COLORS[label], linewidth=0.8)
        ax.fill_between(xs, [v / scale for v in values.low], [v / scale for v in values.high], color=BAR_COLORS[label],
                        alpha=0.25, linewidth=0, label=f"{label} (min-max)")
        ax.plot(xs, [v / scale for v in values.high], color=BAR_COLORS[label], linewidth=0.4, alpha=0.7)  # spikes show
    n = buckets.count
    if n <= 40:
        ax.set_xticks(range(1, n + 1))
    ax.set_xlabel("step (in order)" if buckets.size == 1 else f"bucket of {buckets.size:,} steps (in order)")
    ax.set_ylabel(f"{ylabel} ({unit})")
    ax.legend(frameon=False, loc="upper right")
    data = dict(a_us=list(a.mean), b_us=list(b.mean), bucket_size=buckets.size, steps=buckets.steps)
    if buckets.size > 1:
        data.update(a_high_us=list(a.high), b_high_us=list(b.high))
    return Plot(plot_id, title, to_svg(fig, {}), data, buckets.caption)


def memory_curve(plot_id: str, title: str, curves: dict[str, list[tuple[float, int]]],
                 peaks: dict[str, tuple[float, int, str]]) -> Plot:
    """Allocated bytes over time, one step line per device (``curves``: device -> [(µs, bytes)]), each
    device's peak marked and labelled (``peaks``: device -> (µs, bytes, its label, "peak 5.5 KiB")): the
    most the allocator held at once, the figure the text report's Memory section gives."""
    plt = load_pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 2.6))
    top = max((b for points in curves.values() for _, b in points), default=0)
    scale, unit = next(((s, u) for u, s in BINARY_UNITS if top >= s), (1, "B"))
    t_scale, t_unit = _ms_or_us([t for points in curves.values() for t, _ in points])
    titles = {}
    for i, (device, points) in enumerate(curves.items()):
        line, = ax.step([t / t_scale for t, _ in points], [b / scale for _, b in points], where="post", label=device)
        if device in peaks:
            at, peak, label = peaks[device]
            mark = ax.annotate(f"{device} {label}" if len(curves) > 1 else label, (at / t_scale, peak / scale),
                               xytext=(4, 4), textcoords="offset points", fontsize=8, color=line.get_color())
            mark.set_gid(f"{plot_id}-peak-{i}")
            ax.plot([at / t_scale], [peak / scale], "o", markersize=4, color=line.get_color())
            titles[f"{plot_id}-peak-{i}"] = f"{device}: {label} at {at / t_scale:,.1f} {t_unit}"
    ax.set_ylim(0, top / scale * 1.15 if top else 1)  # room above the highest peak for its label
    ax.set_xlabel(f"time from the window's start ({t_unit})")
    ax.set_ylabel(f"allocated ({unit})")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    data = dict(curves={d: [list(p) for p in pts] for d, pts in curves.items()}, unit=unit,
                peaks={d: dict(at_us=at, bytes=b, label=label) for d, (at, b, label) in peaks.items()})
    return Plot(plot_id, title, to_svg(fig, titles), data)
