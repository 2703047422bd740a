"""The roofline (:mod:`common.report.facts.roofline`) for people: a rich table for the text report, and for the HTML page a
log-log plot of arithmetic intensity against achieved rate, with the device's roofs where its peak is
known (matplotlib, inline SVG, through :mod:`.plots`), and the same table."""

from __future__ import annotations

from typing import Optional

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
        shape = (_names_only(row.shape) if row.op == GEMMS else row.shape if row.op in KNOB_ROWS
                 else row.shape.replace(" ", ""))  # "[64, 64]" -> "[64,64]"; words stay
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


def roofline_table(r: Optional[Roofline]):
    """The rich table, or None when no GEMM or attention was counted."""
    if r is None or not r.rows:
        return None
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Roofline (GEMMs and attention, per op and shape)", caption=escape(caption(r)),
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in HEAD:
        table.add_column(col, justify="left" if col in ("op", "shape", "bound") else "right", overflow="fold",
                         no_wrap=col != "shape", min_width=8 if col == "shape" else None)
    for cells in table_rows(r):
        table.add_row(*[escape(c) for c in cells])
    return table


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
