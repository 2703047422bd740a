"""Memory-bound kernels by bytes per second, against the card's memory bandwidth
(:mod:`common.report.facts.bandwidth`'s numbers)."""

from __future__ import annotations

from common.report.facts.bandwidth import MemoryRate
from common.report.facts.tables import Tables
from common.report.findings import Finding
from common.report.model import names as trace_names
from common.report.rates import fmt_gbs, fmt_pct
from common.report.units import fmt_us, rounded
from common.amounts import fmt_bytes_decimal

SHOWN_FROM = 0.05  # a row holding this share of the steps' device time or more is said
NEAR_PCT = 80.0  # at this share of the bandwidth or more, a pass is as fast as its bytes allow
SMALL_BYTES = 1e6  # a call moving less cannot keep the memory busy: its time is the kernel's start and end
MOST = 5  # rows said at most
SOURCES = {"record_shapes": "by the recorded shapes", "count": "by the workload's count", "knobs": "by the lesson's knobs",
           "copy": "a copy's own bytes, read and written"}


def _row(r: MemoryRate) -> str:
    """``masked_fill_kernel(BFloat16, bool) · elementwise_kernel (aten::masked_fill_) 1.38 TB/s, 41.1% (538 MB
    a call in 390 µs)``."""
    name = trace_names.short_name(r.kernel, 60) + (f" and {r.kernels - 1} more" if r.kernels > 1 else "")
    op = r.op if r.source != "copy" else f"by {r.op}"
    share = f", {fmt_pct(r.pct_of_bandwidth)}" if r.pct_of_bandwidth is not None else ""
    per_call = r.bytes / r.events
    small = ": too little a call to keep the memory busy" if per_call < SMALL_BYTES else ""
    return (f"{name} ({op}{', ' + r.annotation if r.annotation else ''}) {fmt_gbs(r.gbs)}{share} "
            f"({fmt_bytes_decimal(per_call, figures=3)} a call in {fmt_us(r.time_us / r.events)}{small})")


def memory_bandwidth(t: Tables):
    """On a GPU, each memory-bound kernel holding 5% of the steps' device time or more (copies, fills, elementwise,
    softmax: ``common/report/facts/bandwidth.py``) in bytes per second: the least bytes of the op it serves (each
    input read once and each output written once, by its recorded shapes (``--record-shapes``), else by the
    workload's count, or by the lesson's knobs for a trace written before the count; a device-to-device copy's own
    bytes, read and written) over the kernel's time, a lower bound, and its share of the card's memory bandwidth
    (``peaks.py``); near it (80% or more) a pass is as fast as its bytes allow, far under it the kernel is slow for
    its bytes, and a call under 1 MB is set by the kernel's start and end.

    A memory-bound kernel is judged by bytes per second, not FLOP/s: near the bandwidth, fewer passes or bytes is
    what is left."""
    device_us, bandwidth = t.bandwidth.device_us, t.bandwidth.bandwidth_gbs
    if not t.has_gpu or device_us <= 0:
        return None
    rows = [r for r in t.bandwidth.rows if r.time_us >= SHOWN_FROM * device_us][:MOST]
    if not rows:
        return None
    sources = "; ".join(dict.fromkeys(SOURCES[r.source] for r in rows))
    card = f" against the {t.bandwidth.card}'s {fmt_gbs(bandwidth)}" if bandwidth else ""
    covered = sum(r.time_us for r in rows)
    msg = (f"memory-bound kernels in bytes per second{card} (a lower bound: the least bytes of each op, its inputs "
           f"read once and its output written once, {sources}; over the kernels' time): "
           + "; ".join(_row(r) for r in rows) + f"; these are {100 * covered / device_us:.0f}% of the steps' device time")
    return Finding("memory_bandwidth", msg, _hint(rows, bandwidth),
                   dict(bandwidth_gbs=bandwidth, card=t.bandwidth.card, rows=[_evidence(r) for r in rows],
                        memory_pct=rounded(100 * t.bandwidth.memory_us / device_us)))


def _hint(rows: list, bandwidth) -> str:
    """What each kind of row leaves to do: near the bandwidth, fewer passes; far under it, a better kernel;
    small calls, fewer and larger ones."""
    small = [r for r in rows if r.bytes / r.events < SMALL_BYTES]
    said = [f"{_ops(small)} move under {fmt_bytes_decimal(SMALL_BYTES, figures=3)} a call: their time is each kernel's start and end, "
            "not their bytes: fewer, larger calls"] if small else []
    if not bandwidth:
        return "; ".join(said + ["no memory bandwidth is known for this device: the rates alone"])
    large = [r for r in rows if r not in small]
    near = [r for r in large if r.pct_of_bandwidth >= NEAR_PCT]
    far = [r for r in large if r.pct_of_bandwidth < NEAR_PCT]
    if near:
        said.append(f"{_ops(near)} at {NEAR_PCT:.0f}% of the bandwidth or more: as fast as their bytes allow; only "
                    "fewer passes over memory (fused, or left out) make them cheaper")
    if far:
        said.append(f"{_ops(far)} under it: slow for the bytes they must move; a better kernel, or one fused pass, "
                    "gains most there")
    return "; ".join(said)


def _ops(rows: list) -> str:
    return ", ".join(dict.fromkeys(r.op if r.source != "copy" else "the copy" for r in rows))


def _evidence(r: MemoryRate) -> dict:
    return dict(kernel=r.kernel, kernels=r.kernels, op=r.op, annotation=r.annotation, source=r.source, events=r.events,
                bytes=r.bytes, time_us=rounded(r.time_us), gb_per_s=rounded(r.gbs),
                pct_of_bandwidth=rounded(r.pct_of_bandwidth, 2))
