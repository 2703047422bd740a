"""The GPU falling behind the host across the window (:mod:`common.report.facts.lag`'s numbers)."""

from __future__ import annotations

from common.report.facts.tables import Tables
from common.report.findings import Finding
from common.report.units import fmt_us, rounded

SAID_STEPS = 6  # step ends said one by one, at most


def gpu_behind_host(t: Tables):
    """On a GPU, where the device work the steps launched runs on a whole host step or more after the host's last
    step (``common/report/facts/lag.py``): how far the GPU was behind the host at the window's start (work queued
    before it), at each step's end and at the window's end (the latest end of the device work launched by then, less
    that instant), and, where it grows every step, by how much a step (each step's device work outlasts the host's
    step: the host queues ahead); the steps table's caption gives the start and the end side by side.

    Where the lag grows every step, the host's step times are not what the steps cost."""
    if not t.has_gpu or not t.lag.behind:
        return None
    ends = t.lag.at_step_ends_us
    shown = " → ".join(fmt_us(x) for x in ends[:SAID_STEPS]) + (" → ..." if len(ends) > SAID_STEPS else "")
    if t.lag.growing:
        trend = (f"+{fmt_us(t.lag.growth_us)} a step: each step's device work ({fmt_us(t.lag.device_us)}, median) "
                 f"outlasts the host's step ({fmt_us(t.lag.host_wall_us)}), so the host queues ahead")
    else:
        trend = "not growing every step: the host's steps and the GPU's keep about the same pace"
    start = (f"{fmt_us(t.lag.at_start_us)} behind at the window's start (work queued before it)"
             if t.lag.at_start_us >= 0.05 else "level with it at the window's start")
    msg = (f"the GPU runs behind the host: {start}, {fmt_us(t.lag.at_end_us)} behind at its end; at each step's "
           f"end {shown} ({trend})")
    hint = (f"time the steps by their device time (the steps table), not the host's wall; the GPU finishes the "
            f"window's work {fmt_us(t.lag.at_end_us)} after the host's last step")
    if t.lag.growing:
        hint += "; in a longer loop the lag grows until the host waits (a full launch queue, a sync, a .item())"
    return Finding("gpu_behind_host", msg, hint,
                   dict(at_start_us=rounded(t.lag.at_start_us), at_end_us=rounded(t.lag.at_end_us),
                        at_step_ends_us=[rounded(x) for x in ends], growth_us_per_step=rounded(t.lag.growth_us),
                        growing=t.lag.growing, host_wall_us=rounded(t.lag.host_wall_us),
                        device_us=rounded(t.lag.device_us)))
