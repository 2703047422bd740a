"""Rules about the trace itself: no device lane, no steps, a trace too large to open comfortably."""

from __future__ import annotations

from common.paths import LARGE_TRACE_BYTES
from common.report.findings import Finding
from common.report.facts.tables import Tables
from common.report.units import fmt_us, rounded
from common.amounts import fmt_bytes_decimal


def no_device_lane(t: Tables):
    """A trace with no kernel, memcpy or memset: CPU only; every CPU-side rule still runs."""
    if t.has_gpu:
        return None
    return Finding("no_device_lane", "no device lane: the trace holds no kernel/memcpy/memset events (a CPU-only "
                   "run, or CUDA activity was not recorded); device-side rules are skipped, CPU-side ones still run",
                   "profile with activities=[CPU, CUDA] on a GPU to see the device lane",
                   dict(cpu_events=t.numbers.cpu.events), level="note")


def no_steps(t: Tables):
    """No ``ProfilerStep#N``: analysed as one window spanning all events."""
    if t.model.window_source == "ProfilerStep":
        return None
    return Finding("no_steps", f"no ProfilerStep in the trace: analysed as one window of {fmt_us(t.window_us)} "
                   "spanning all events", "call prof.step() at the end of every iteration (with a schedule) to get steps",
                   dict(window_us=rounded(t.window_us)), level="note")


def large_trace(t: Tables):
    """A trace over ~500 MB: Perfetto and TensorBoard render it slowly; profile fewer active steps."""
    if t.model.size_bytes <= LARGE_TRACE_BYTES:
        return None
    return Finding("large_trace", f"the trace is {fmt_bytes_decimal(t.model.size_bytes)} of JSON "
                   f"({t.model.n_events:,} events): Perfetto and TensorBoard open files this big slowly",
                   "profile fewer active steps (schedule active=1..3) or record fewer details (record_shapes, with_stack)",
                   dict(bytes=t.model.size_bytes, events=t.model.n_events), level="note")
