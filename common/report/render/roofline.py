"""The roofline (:mod:`common.report.facts.roofline`) for people: a rich table for the text report, and for the HTML page a
log-log plot of arithmetic intensity against achieved rate, with the device's roofs where its peak is
known (matplotlib, inline SVG, through :mod:`.plots`), and the same table."""

from __future__ import annotations

import re
from typing import Optional

from rich import box
from rich.markup import escape
from rich.table import Table

from common.report.render.plots import WIDTH_IN, Plot, load_pyplot, to_svg
from common.report.rates import compact, fmt_pct, fmt_tflops
from common.report.facts.knob_work import ATTENTION, GEMMS
from common.report.facts.roofline import KNOB_ROWS, Roofline, row_json

HEAD = ("op", "shape", "calls", "FLOP", "bytes", "FLOP/B", "FLOP/s", "B/s", "% peak", "bound")
TOP = 12


KNOB_LABELS = {GEMMS: "GEMMs", ATTENTION: "attn"}


def _short(op: str) -> str:
    return KNOB_LABELS.get(op, "per step") if op in KNOB_ROWS else op.removeprefix("aten::")


def _names_only(shape: str) -> str:
    """The knobs' GEMMs by name only (``q@k.T, scores@v``; a count's ``decode: mm, addmm``): their shapes are
    in the finding and the JSON."""
    first, _, after = shape.partition(" ")
    head, rest = (f"{first} ", after) if first.endswith(":") else ("", shape)
    return head + ", ".join(dict.fromkeys(part.split(" ")[0] for part in rest.split(", ")))


def table_rows(r: Roofline) -> list[list[str]]:
    """One row of text per judged row (the top ones by time): the columns of :data:`HEAD`."""
    out = []
    for j in r.rows[:TOP]:
        row = j.row
        shape = _names_only(row.shape) if row.op == GEMMS else row.shape  # "a @ b", "q, k, v causal": words
        out.append([_short(row.op), shape, f"{row.calls:,}",
                    compact(row.flops), compact(row.bytes), compact(row.intensity),
                    compact(row.tflops * 1e12 if row.tflops is not None else None),
                    compact(row.gbs * 1e9 if row.gbs is not None else None), fmt_pct(j.pct_of_peak) if j.pct_of_peak is not None else "-",
                    "wrong" if j.impossible else j.bound or ("neither" if j.roof_tflops is not None else "-")])  # wrong: flagged impossible (the caption says why)
    return out


def caption(r: Roofline) -> str:
    source = {"record_shapes": "FLOP and bytes per call from record_shapes (bytes: inputs and output once)",
              "count": "FLOP and bytes per step from the workload's own count, made before profiling (bytes: "
                       "inputs and output once)"}.get(
        r.source, "FLOP and bytes per step from the shapes in the lesson's knobs (bytes: inputs and output once)")
    timed = "kernel time on the device" if r.timed_on == "device" else "the op's CPU time"
    convention = (f"; {CONVENTION}" if any(j.row.op == ATTENTION for j in r.rows) else "")
    return f"{source}; rates over {timed}{convention}; {r.note}"


CONVENTION = ("rows from the knobs are per step; attn, the attention forward: one FLOP count for every variant (causal: the unmasked half, "
              "2·B·H·S²·D) over all the device work of the step; GEMMs: what the GEMM kernels "
              "execute (the hand-written attention's the masked half too), at their kernels' dtype")


def roofline_table(r: Optional[Roofline], width: int = 80):
    """The rich table, or None when no GEMM or attention was counted. At ``width`` columns every header and
    number stays whole: the op and shape cells wrap (an op's name after an ``_``, a shape at its spaces),
    never inside a word, and the table drops its edges, then narrows its gaps, where that is what it takes
    (:func:`fit_cells`)."""
    if r is None or not r.rows:
        return None

    rows, edge, gap = fit_cells(table_rows(r), width)
    table = Table(title="Roofline (GEMMs and attention, per op and shape)", caption=escape(caption(r)),
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, show_edge=edge, padding=(0, gap))
    for col in HEAD:
        table.add_column(col, justify="left" if col in ("op", "shape", "bound") else "right", no_wrap=True)
    for cells in rows:
        table.add_row(*[escape(c) for c in cells])
    return table


LAYOUTS = ((True, 1), (False, 1), (False, 0))  # (edges, padding): gaps of 2 with edges, 2 without, then 1


def _spacing(edge: bool, gap: int) -> int:
    """The columns a table of HEAD's columns takes beyond its cells: between two columns 2 (padding 1) or 1
    (padding 0), and 1 at each edge where it shows them."""
    return (2 if gap else 1) * (len(HEAD) - 1) + (2 if edge else 0)


def fit_cells(rows: list[list[str]], width: int) -> tuple[list[list[str]], bool, int]:
    """(the rows with their op and shape cells wrapped, lines joined by newlines; the table's edges; its
    padding) so that the table fits ``width`` columns: the number columns keep their width (their header or
    widest cell); the op and shape columns share the rest, the wider narrowed first, down to their longest
    unbreakable piece; where even that does not fit, the table drops its edges, then its gaps narrow to one
    space (past that it is wider than ``width``: a word is never cut)."""
    fixed = sum(max(len(HEAD[i]), *(len(row[i]) for row in rows)) for i in range(2, len(HEAD)))
    pieces = [[_op_pieces(row[0]), row[1].split(" ")] for row in rows]
    glue = ("", " ")
    natural = [max(len(HEAD[i]), *(len(glue[i].join(p[i])) for p in pieces)) for i in (0, 1)]
    least = [max(len(HEAD[i]), *(len(x) for p in pieces for x in p[i])) for i in (0, 1)]
    edge, gap = next(((e, g) for e, g in LAYOUTS if fixed + sum(least) + _spacing(e, g) <= width), LAYOUTS[-1])
    room = width - _spacing(edge, gap) - fixed
    widths = list(natural)
    while sum(widths) > room:
        i = 0 if widths[0] - least[0] > widths[1] - least[1] else 1
        if widths[i] <= least[i]:
            break
        widths[i] -= 1
    return ([[_wrapped(p[0], "", widths[0]), _wrapped(p[1], " ", widths[1]), *row[2:]] for p, row in zip(pieces, rows)],
            edge, gap)


def _op_pieces(name: str) -> list[str]:
    """``_scaled_dot_product_flash_attention`` -> ``_``, ``scaled_``, ``dot_``...: where an op's name may wrap."""
    return [piece for piece in re.findall(r"[^_]*_|[^_]+$", name) if piece] or [name]


def _wrapped(pieces: list[str], glue: str, width: int) -> str:
    """The pieces joined by ``glue``, a new line before a piece that would pass ``width`` (none is cut)."""
    lines = [pieces[0]]
    for piece in pieces[1:]:
        if len(lines[-1]) + len(glue) + len(piece) <= width:
            lines[-1] += glue + piece
        else:
            lines.append(piece)
    return "\n".join(lines)


def roofline_plot(r: Optional[Roofline]) -> Optional[Plot]:
    """Arithmetic intensity (FLOP/byte) against achieved TFLOP/s, log-log, one point per row with an
    intensity; the roofs (memory: intensity x bandwidth, compute: the peak) where the peak is known."""
    if r is None:
        return None
    points = [j for j in r.rows[:TOP] if j.row.intensity and j.row.tflops and not j.impossible]
    if not points:
        return None
    plt = load_pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 3.4))
    titles, roofs = {}, []
    xs = [j.row.intensity for j in points]
    lo, hi = min(xs) / 4, max(xs) * 4
    for unit in sorted({j.peak_unit for j in points if j.peak_tflops}):
        peak = next(j.peak_tflops for j in points if j.peak_unit == unit)
        bandwidth = r.peak.memory_gbs if r.peak else None
        if bandwidth:
            ridge = peak * 1e3 / bandwidth
            lo, hi = min(lo, ridge / 4), max(hi, ridge * 4)
            ax.plot([lo, ridge, hi], [lo * bandwidth / 1e3, peak, peak], color="#C44E52", linewidth=1.2)
        else:
            ax.axhline(peak, color="#C44E52", linewidth=1.2)
        ax.annotate(f"{unit} peak {peak:g} TFLOP/s", (hi, peak), ha="right", va="bottom", fontsize=8)
        roofs.append(dict(unit=unit, peak_tflops=peak, memory_gbs=bandwidth))
    for i, j in enumerate(points):
        dot = ax.scatter([j.row.intensity], [j.row.tflops], s=28, color="#4C72B0", zorder=3)
        dot.set_gid(f"roofline-point-{i}")
        titles[f"roofline-point-{i}"] = (f"{j.row.op} {j.row.shape} ({j.row.dtype}): {j.row.intensity:,.1f} FLOP/B, "
                                         f"{fmt_tflops(j.row.tflops)}"
                                         + (f", {fmt_pct(j.pct_of_peak)} of peak" if j.pct_of_peak is not None else ""))
        ax.annotate(_short(j.row.op), (j.row.intensity, j.row.tflops), textcoords="offset points", xytext=(4, 4),
                    fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per ideal byte)")
    ax.set_ylabel("achieved TFLOP/s")
    title = ("roofline: achieved rate against arithmetic intensity" +
             (f", with the {r.peak.device}'s roofs (datasheet, dense)" if roofs else
              f" ({r.device}: peak unknown, no roofs)"))
    data = dict(device=r.device, roofs=roofs, points=[row_json(j) for j in points])
    return Plot("roofline", title, to_svg(fig, titles), data)
