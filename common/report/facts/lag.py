"""How far the GPU runs behind the host: at the window's start, at each host step's end, at the window's end.

The host launches work and goes on; the GPU runs it when it gets to it. At a host instant ``t`` the GPU is
**behind** by the device work launched by ``t`` still to finish: the latest end of a device event whose launch
(its runtime call) began at or before ``t``, less ``t`` (0 where it all ended). Work launched before the window
(the model's ``outside`` events with an id below every launch of the trace, :mod:`.outside`) counts as launched
at its start. Device events with no launch time (replayed by a graph launch that carries no id, or from a call
the trace did not record) are left out.

Where each step's device work outlasts its host wall, the lag grows by the difference every step (the host
queues ahead); :attr:`LagFacts.growth_us` is that growth, from the first step's end to the last's. Numbers only
(:mod:`~common.report.rules.lag` words them; the steps table's caption gives the start and the end beside each other).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.model.build import RUNTIME, Model
from common.report.units import fmt_us


@dataclass(frozen=True)
class LagFacts:
    """The GPU's lag behind the host, µs (all 0 where it kept up); empty for a trace without steps or GPU."""

    at_start_us: float = 0.0  # at the window's start: work launched before it, still running
    at_step_ends_us: tuple = ()  # at each host step's end (the steps' order)
    host_wall_us: float = 0.0  # median host wall of a step
    device_us: float = 0.0  # median device time of the work a step launched

    @property
    def at_end_us(self) -> float:
        """At the window's end (the last host step's)."""
        return self.at_step_ends_us[-1] if self.at_step_ends_us else 0.0

    @property
    def behind(self) -> bool:
        """The GPU ends the window a whole host step behind or more: its work runs on long after the host's."""
        return len(self.at_step_ends_us) >= 2 and self.host_wall_us > 0 and self.at_end_us >= self.host_wall_us

    @property
    def growing(self) -> bool:
        """The lag grew at every step's end."""
        lags = self.at_step_ends_us
        return len(lags) >= 2 and all(b > a for a, b in zip(lags, lags[1:]))

    @property
    def growth_us(self) -> Optional[float]:
        """How much the lag grows a step (first step's end to the last's); None with one step."""
        lags = self.at_step_ends_us
        return (lags[-1] - lags[0]) / (len(lags) - 1) if len(lags) >= 2 else None

    def said(self) -> str:
        """``the GPU was 2.20 ms behind the host at the window's start and 8.66 ms behind at its end``, where it ends
        the window a host step behind or more (:attr:`behind`); "" otherwise."""
        if not self.behind:
            return ""
        start = (f"was {fmt_us(self.at_start_us)} behind the host at the window's start and"
                 if self.at_start_us >= 0.05 else "kept up with the host at the window's start and was")
        return f"the GPU {start} {fmt_us(self.at_end_us)} behind at its end"


def lag_facts(m: Model) -> LagFacts:
    """The lag of a GPU trace with ProfilerSteps; an empty record otherwise."""
    if not m.has_gpu or m.window_source != "ProfilerStep" or not m.steps:
        return LagFacts()
    cpu, dev = m.cpu, m.dev
    launches = cpu.corr[(cpu.kind == RUNTIME) & (cpu.corr >= 0)]
    first_id = launches.min() if launches.size else np.inf
    before = dev.outside & (dev.corr < first_id)
    timed = dev.launch >= 0
    launched_at = np.where(timed, cpu.ts[np.maximum(dev.launch, 0)], -np.inf)
    keep = timed | before
    order = np.argsort(launched_at[keep], kind="stable")
    at, ends = launched_at[keep][order], np.maximum.accumulate(dev.end[keep][order]) if keep.any() else np.zeros(0)

    def behind(t: float) -> float:
        n = int(np.searchsorted(at, t, side="right"))
        return max(0.0, float(ends[n - 1]) - t) if n else 0.0

    in_step = dev.step >= 0
    per_step = np.bincount(dev.step[in_step], weights=dev.dur[in_step], minlength=len(m.steps))
    return LagFacts(behind(m.window[0]), tuple(behind(s.end) for s in m.steps),
                    float(np.median([s.dur for s in m.steps])), float(np.median(per_step)))
