"""The roofline: the GEMMs' and attention's achieved rate against the device's datasheet peak."""

from __future__ import annotations

from common.amounts import fmt_flops
from common.report.rates import fmt_gbs, fmt_pct, fmt_tflops
from common.report.facts.knob_work import ATTENTION, GEMMS
from common.report.facts.roofline import KNOB_ROWS, KNOBS_OP, LOW_INTENSITY, NEAR_ROOF_PCT, Judged, row_json
from common.report.findings import Finding
from common.report.facts.regime import neither_roof_text
from common.report.facts.tables import Tables
from common.report.units import rounded

SMALL_SHARE_PCT = 10.0  # under this share of its roof an op is far from what its bound allows


def _what(row, source: str | None) -> str:
    """The row in words: an op call, the step's GEMMs or attention forward from the workload's count or the
    knobs, or the knobs' FLOPs."""
    by = "the workload's count" if source == "count" else "the lesson's knobs"
    if row.op == ATTENTION:
        causal = CAUSAL_WORDS if row.causal is not False else "not causal: every score counts"
        return f"the attention forward ({fmt_flops(row.flops)} per step by {by}, {row.shape}, {row.dtype}; {causal})"
    if row.op == GEMMS:
        part = _label(row)  # one part of a step (``backward's GEMMs``), or all its GEMMs
        name = "the step's GEMMs" if part == "the GEMMs" else part
        return f"{name} ({row.shape}: {fmt_flops(row.flops)} by {by}, {row.dtype})"
    if row.op == KNOBS_OP:
        return f"the GEMMs and attention of one step ({fmt_flops(row.flops)} by the lesson's knobs, {row.dtype})"
    return f"{row.op} {row.shape} ({row.dtype})"


CAUSAL_WORDS = "causal: the unmasked half, one FLOP count whichever variant runs it"
TIMED = {("device", ATTENTION): "over all the step's device work", ("device", GEMMS): "over their kernels' time",
         ("cpu", ATTENTION): "over the steps' wall time", ("cpu", GEMMS): "over their ops' CPU time"}


def _gemms_text(r) -> str:
    """Beside the attention forward, what its GEMMs execute and which roof holds them."""
    gemms = next((j for j in r.rows if j.row.op == GEMMS), None)
    if gemms is None or r.rows[0].row.op != ATTENTION or gemms.row.tflops is None:
        return ""
    bound = (f", {gemms.row.intensity:,.0f} FLOP/byte: under the {'memory-bandwidth' if gemms.bound == 'memory' else 'compute'} "
             f"roof at {fmt_pct(gemms.pct_of_roof)} of it" if gemms.bound is not None else "")
    return (f"; its GEMMs execute {fmt_flops(gemms.row.flops)} per step (the masked half too), "
            f"{fmt_tflops(gemms.row.tflops)} ({gemms.peak_unit}){bound}")


def _by_intensity(r) -> str:
    """Without a peak, what the intensities alone say: a row under :data:`LOW_INTENSITY` is memory-bound on any
    machine (the LLM's decode: each weight read once per token); rows of one step's count compared."""
    counted = [j.row for j in r.rows if j.row.op in (GEMMS, ATTENTION) and j.row.intensity is not None]
    low = [row for row in counted if row.intensity < LOW_INTENSITY]
    if not low:
        return ""
    said = ", ".join(f"{_label(row)} at {row.intensity:.2g} FLOP/byte" for row in low)
    others = ", ".join(f"{_label(row)} at {row.intensity:,.3g}" for row in counted if row not in low)
    return (f"; by intensity alone, {said}: memory-bound on any CPU or GPU (every ridge point lies above "
            f"{LOW_INTENSITY:g} FLOP/byte: each byte moved serves under {LOW_INTENSITY:g} FLOPs)"
            + (f"; {others} FLOP/byte lie above that line: which roof holds them depends on the machine's "
               "ridge point" if others else ""))


def _label(row) -> str:
    """A counted row in a few words: ``decode's GEMMs``, ``the attention``."""
    what = "GEMMs" if row.op == GEMMS else "attention"
    head = row.shape.split(" ")[0]
    return f"{head[:-1]}'s {what}" if head.endswith(":") else f"the {what}"


def _steps_text(r) -> str:
    """The steps' own rate, and which FLOPs it divides: the top row's alone, or (where the count has several
    rows: forward and backward, prefill and decode) every row's together, named, so no sentence mixes counts."""
    if r.step_tflops is None or (r.timed_on == "cpu" and r.rows[0].row.op == ATTENTION):
        return ""  # (an attention forward on the CPU is timed over the steps' wall time already)
    counted = [j.row for j in r.rows if j.row.op in (GEMMS, ATTENTION)]
    work = (f"all of a step's counted work ({', '.join(_label(row) for row in counted)}) " if len(counted) > 1
            else "")
    return f"; {work}over the steps' wall time (dispatch and the other ops included) {fmt_tflops(r.step_tflops)}"


FILLS_THE_GPU_PCT = 90.0  # kernels whose blocks cover this share of the SMs over their time are not too small...
SHORT_CALL_US = 10.0  # ... unless a call's kernels take less than this: launch and ramp-up are most of it


def _far_hint(t: Tables, row) -> str:
    """Why a row is near neither roof: too little work per call where the GPU idles and its kernels' blocks
    leave SMs empty (the kernel-time-weighted SM efficiency under FILLS_THE_GPU_PCT: a 64x64 GEMM's 8 blocks on
    132 SMs) or a call's kernels take a few µs (SHORT_CALL_US); not where they fill the SMs for longer (cuDNN's
    attention kernel, one block per SM for 57 µs: the rate, over kernel time, leaves the host's dispatch out,
    and the kernels' own limits hold it); where it is busy, the
    step's kernels doing mostly memory work the operation does not need (a row timed by all the step's device
    work, device_bound's verdict), else the kernels' own limits."""
    r = t.regime
    filled = t.numbers.efficiency.kernel_weighted_sm_efficiency_pct
    small = filled is None or filled < FILLS_THE_GPU_PCT or row.time_us < SHORT_CALL_US * max(row.calls, 1)
    if (r is None or r.pace == "overhead") and small:
        return ("far under its roof: each call is too small to keep the GPU busy (overhead-bound: bigger work per "
                "call raises the share)")
    if r is not None and r.pace == "overhead":  # the kernels fill the SMs: the idle host time is not in this rate
        return (f"its kernels fill the SMs ({filled:.0f}% SM efficiency over their time), and the GPU's idle time "
                "between calls (overhead_bound) is not in this rate: read the kernels' own limits: the launch "
                "estimates table (occupancy, blocks per SM)")
    if row.op == ATTENTION and r.bound == "memory":
        return (f"the step's kernels are mostly memory work ({r.pct(r.memory_us):.0f}% of the device time: "
                "device_bound): passes over the scores the operation itself does not need")
    return "read the kernels' own limits: the launch estimates table (occupancy, blocks per SM)"


def roofline(t: Tables):
    """Part 1's headline as a number: each GEMM and attention op's achieved rate, and on a GPU with a known
    datasheet peak its share of peak and its roof (size 64: a tiny share, under the memory roof; size 4096: a large
    one, under the compute roof); on the CPU achieved rates only, the op's own and the steps'.

    Part 1's "from overhead bound to compute bound": the op with the most time among the GEMMs and attention, its
    FLOPs, its achieved rate and the roof (compute or memory bandwidth) its arithmetic intensity puts it under. From
    the lesson's knobs without record_shapes: the step's GEMMs (FLOPs and bytes of their shapes) and an attention
    lesson's forward, one FLOP count for every variant. A GPU not in the peaks table: achieved rates only, no share
    without a peak."""
    r = t.roofline
    if r is None or not r.rows:
        return None
    top: Judged = r.rows[0]
    row = top.row
    what = _what(row, r.source)
    calls = f"{row.calls:,} call{'s' if row.calls != 1 else ''}" if row.op not in KNOB_ROWS else f"{row.calls} steps"
    intensity = f", {row.intensity:,.1f} FLOP/byte" if row.intensity is not None else ""
    steps = _steps_text(r)
    ev = dict(device=r.device, source=r.source, timed_on=r.timed_on, note=r.note,
              step_gflops=rounded(r.step_tflops * 1e3, 3) if r.step_tflops is not None else None,
              gflops=rounded(row.tflops * 1e3, 3) if row.tflops is not None else None,
              rows=[row_json(j) for j in r.rows[:5]])
    if top.impossible is not None:
        return Finding("roofline", f"{what}: its numbers cannot be true ({calls}): {top.impossible}; its rate and "
                       "share of peak: cannot tell", "check the trace's Input Dims (record_shapes) and kernel times",
                       ev, level="warn")
    if top.pct_of_peak is None:
        # on the CPU the roofline table's caption says why, once: the finding names it only
        why = ("the CPU has no peak to set it against" if r.timed_on == "cpu" else
               r.note if r.peak is None else top.peak_unit)
        on = "its own CPU time" if r.timed_on == "cpu" else "its kernels' time"
        return Finding("roofline", f"{what} ran at {fmt_tflops(row.tflops)} {TIMED.get((r.timed_on, row.op), 'over ' + on)} "
                       f"({calls}{intensity}){steps}; share of peak: cannot tell ({why}){_by_intensity(r)}",
                       "where the steps' rate is far under the op's own, the time goes around the op, not in it", ev)
    share = f"{fmt_pct(top.pct_of_peak)} of the {top.peak_unit} peak ({top.peak_tflops:g} TFLOP/s dense)"
    far_under = top.bound == "memory" and top.pct_of_roof is not None and top.pct_of_roof < NEAR_ROOF_PCT
    if far_under:  # under LOW_INTENSITY: memory-bound on any card, however slow its kernels
        bound = (f"; intensity {row.intensity:.3g} FLOP/byte, under every GPU's ridge point (this one's: "
                 f"{top.ridge:,.0f}): memory-bound, moving its operation's bytes at {fmt_gbs(row.gbs)}, "
                 f"{fmt_pct(top.pct_of_bandwidth)} of the {fmt_gbs(r.peak.memory_gbs)} bandwidth")
    elif top.bound is not None:
        side, roof = ("below", "memory-bandwidth roof") if top.bound == "memory" else ("above", "compute roof")
        bound = (f"; intensity {row.intensity:,.1f} FLOP/byte, {side} the ridge point ({top.ridge:,.0f}): under "
                 f"the {roof}, at {fmt_pct(top.pct_of_roof)} of it")
    elif top.roof_tflops is not None:
        bound = f"; it {neither_roof_text(top, peak_said=True)}"
    elif row.intensity is None:
        bound = "; which roof bounds it: cannot tell without its bytes (--record-shapes)"
    else:
        bound = f"{intensity}; which roof bounds it: cannot tell (no memory bandwidth for this device)"
    far = top.roof_tflops is not None and (top.bound is None or far_under)
    hint = _far_hint(t, row) if far else ("share of peak = achieved / the datasheet's dense peak; below the ridge "
                                          "point memory bandwidth bounds an op, above it compute")
    timed = f" {TIMED[(r.timed_on, row.op)]}" if (r.timed_on, row.op) in TIMED else ""
    return Finding("roofline", f"on {r.device}: {what} ran at {fmt_tflops(row.tflops)}{timed} ({calls}), "
                   f"{share}{bound}{_gemms_text(r)}{steps}", hint,
                   dict(ev, pct_of_peak=rounded(top.pct_of_peak, 4), bound=top.bound), level="info")
