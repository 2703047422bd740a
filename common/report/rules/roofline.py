"""The roofline: the GEMMs' and attention's achieved rate against the device's datasheet peak."""

from __future__ import annotations

from common.report.rates import fmt_flops, fmt_pct, fmt_tflops
from common.report.roofline import KNOBS_OP, Judged, row_json
from common.report.rules import Finding
from common.report.tables import Tables
from common.report.units import rounded

SMALL_SHARE_PCT = 10.0  # under this share of its roof an op is far from what its bound allows


def roofline(t: Tables):
    """Part 1's "from overhead bound to compute bound" as a number: the op with the most time among the
    GEMMs and attention, its FLOPs, its achieved rate and, on a GPU of known peak, its share of the
    datasheet's dense peak and the roof (compute or memory bandwidth) its arithmetic intensity puts it
    under. On the CPU, or a GPU not in the peaks table, achieved rates only: no share without a peak."""
    r = t.roofline
    if r is None or not r.rows:
        return None
    top: Judged = r.rows[0]
    row = top.row
    what = (f"{row.op} {row.shape} ({row.dtype})" if row.op != KNOBS_OP else
            f"the GEMMs and attention of one step ({fmt_flops(row.flops)} by the lesson's knobs, {row.dtype})")
    calls = f"{row.calls:,} call{'s' if row.calls != 1 else ''}" if row.op != KNOBS_OP else f"{row.calls} steps"
    intensity = f", {row.intensity:,.1f} FLOP/byte" if row.intensity is not None else ""
    steps = (f"; over the steps' wall time (dispatch and the other ops included) {fmt_tflops(r.step_tflops)}"
             if r.step_tflops is not None else "")
    ev = dict(device=r.device, source=r.source, timed_on=r.timed_on, note=r.note,
              step_gflops=rounded(r.step_tflops * 1e3, 3) if r.step_tflops is not None else None,
              gflops=rounded(row.tflops * 1e3, 3) if row.tflops is not None else None,
              rows=[row_json(j) for j in r.rows[:5]])
    if top.impossible is not None:
        return Finding("roofline", f"{what}: its numbers cannot be true ({calls}): {top.impossible}; its rate and "
                       "share of peak: cannot tell", "check the trace's Input Dims (record_shapes) and kernel times",
                       ev, level="warn")
    if top.pct_of_peak is None:
        why = r.note if r.peak is None else top.peak_unit
        bytes_hint = "; --record-shapes gives bytes and intensity" if r.source == "knobs" else ""
        on = "its own CPU time" if r.timed_on == "cpu" else "its kernels' time"
        return Finding("roofline", f"{what} ran at {fmt_tflops(row.tflops)} over {on} ({calls}{intensity})"
                       f"{steps}; share of peak: cannot tell ({why})",
                       "where the steps' rate is far under the op's own, the time goes around the op, not in it"
                       + bytes_hint, ev)
    share = f"{fmt_pct(top.pct_of_peak)} of the {top.peak_unit} peak ({top.peak_tflops:g} TFLOP/s dense)"
    if top.bound is not None:
        side, roof = ("below", "memory-bandwidth roof") if top.bound == "memory" else ("above", "compute roof")
        bound = (f"; intensity {row.intensity:,.1f} FLOP/byte, {side} the ridge point ({top.ridge:,.0f}): under "
                 f"the {roof}, at {fmt_pct(top.pct_of_roof)} of it")
    elif row.intensity is None:
        bound = "; which roof bounds it: cannot tell without its bytes (--record-shapes)"
    else:
        bound = f"{intensity}; which roof bounds it: cannot tell (no memory bandwidth for this device)"
    far = top.pct_of_roof is not None and top.pct_of_roof < SMALL_SHARE_PCT
    hint = ("far under its roof: each call is too small to keep the GPU busy (overhead-bound: bigger work per "
            "call raises the share)" if far else
            "share of peak = achieved / the datasheet's dense peak; below the ridge point memory bandwidth bounds "
            "an op, above it compute")
    return Finding("roofline", f"on {r.device}: {what} ran at {fmt_tflops(row.tflops)} ({calls}), "
                   f"{share}{bound}{steps}", hint,
                   dict(ev, pct_of_peak=rounded(top.pct_of_peak, 4), bound=top.bound), level="info")
