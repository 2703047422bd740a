"""Device work launched outside the trace: what ran in the window that no runtime call of it launched.

A device event belongs to the runtime call with its correlation id, and through it to an op, a call
and a step (:mod:`~common.report.model.build`). Kineto keeps the device events that ran while it recorded even when their
launch came before (the warm-up step of ``schedule(warmup=1)`` queues kernels that run in the first
active step): those have an id no runtime call of the trace has. Counting them as the step they run
in would give that step work it never launched (a step "launching" 6 kernels where each launched 5,
a GEMM "2x slower" in one step). The report counts them in no step, no call and no kernel row, and
says here how many there were and how long they ran. An id below every launch of the trace was
launched before the window; any other missing id, from a thread or call the trace did not record.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.model.build import KERNEL, MEMCPY, MEMSET, RUNTIME, Model
from common.report.findings import Span
from common.report.units import fmt_us


@dataclass(frozen=True)
class LaunchedOutside:
    """The device events whose launch is not in the trace."""

    events: int
    device_us: float  # their device time, in all
    before_window: int  # of them, launched before the window (an id below every launch of the trace)
    kernels: int
    memcpys: int
    memsets: int
    names: tuple  # (name, count) of each, most first
    spans: tuple  # Span of each event

    def to_json(self) -> dict:
        return dict(events=self.events, device_us=self.device_us, before_window=self.before_window,
                    kernels=self.kernels, memcpys=self.memcpys, memsets=self.memsets,
                    names=[dict(name=n, count=c) for n, c in self.names])

    def what(self) -> str:
        """``2 kernels`` or ``3 device events (2 kernels, 1 memset)``."""
        kinds = [(n, word) for n, word in ((self.kernels, "kernel"), (self.memcpys, "memcpy"), (self.memsets, "memset"))
                 if n]
        if len(kinds) == 1:
            return f"{self.events} {kinds[0][1]}{'s' if self.events != 1 else ''}"
        return (f"{self.events} device events (" + ", ".join(f"{n} {word}{'s' if n != 1 else ''}" for n, word in kinds)
                + ")")

    @property
    def where(self) -> str:
        return ("launched before the profiled window" if self.before_window == self.events else
                "whose launch the trace does not hold (no runtime call has their correlation id)")

    def said(self) -> str:
        """``2 kernels launched before the profiled window ran inside it (403 µs): counted in no step, ...``."""
        return f"{self.what()} {self.where} ran inside it ({fmt_us(self.device_us)}): counted in no step, call or kernel row"


def launched_outside(m: Model) -> Optional[LaunchedOutside]:
    """None when every device event's launch is in the trace (or the trace ties none to a launch)."""
    dev, cpu = m.dev, m.cpu
    rows = np.flatnonzero(dev.outside) if m.has_gpu else np.empty(0, np.int64)
    if not rows.size:
        return None
    launches = cpu.corr[(cpu.kind == RUNTIME) & (cpu.corr >= 0)]
    first = launches.min() if launches.size else np.inf
    names = Counter(m.names[i] for i in dev.name[rows].tolist())
    kind = dev.kind[rows]
    return LaunchedOutside(
        events=int(rows.size), device_us=float(dev.dur[rows].sum()), before_window=int((dev.corr[rows] < first).sum()),
        kernels=int((kind == KERNEL).sum()), memcpys=int((kind == MEMCPY).sum()), memsets=int((kind == MEMSET).sum()),
        names=tuple(names.most_common()), spans=tuple(Span(float(dev.ts[i]), float(dev.dur[i])) for i in rows.tolist()))
