"""What the CPU was doing while the GPU sat idle between two pieces of device work.

The device event after the gap was launched by a runtime call (its correlation id). When that launch
began after the gap opened, the GPU waited for the CPU: the op the launch sits in, and the CPU events
that ran on the launching thread during the gap (the deepest ones, longest first), say what held it.
When the launch came before the gap opened, the work was queued and the GPU idled on its own side (a
profiler buffer request, a dependency on another stream): the trace names what overlaps, if anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.model import Model

SHOWN = 3  # CPU events named, longest overlap first


@dataclass(frozen=True)
class GapCause:
    """The launch of the device event after a gap, and the CPU events during the gap on its thread."""

    next_event: str  # the device event the gap ends with
    launch: Optional[str]  # its runtime call (None: no launch in the trace)
    launch_start_us: Optional[float]
    launch_us: Optional[float]  # how long the launch call itself took
    op: Optional[str]  # the op (else annotation) the launch sits in
    op_start_us: Optional[float]
    op_us: Optional[float]
    late_us: float  # how far into the gap the launch began (0: launched before the gap opened)
    busy: tuple[tuple[str, float], ...]  # (name, µs inside the gap) of the deepest CPU events on the thread

    @property
    def cpu_late(self) -> bool:
        """The GPU waited for the CPU: the launch began inside the gap."""
        return self.launch is not None and self.late_us > 0


def gap_cause(m: Model, start: float, end: float) -> Optional[GapCause]:
    """The cause of the gap [start, end] on the device lane (None: no device event starts at its end)."""
    dev, cpu = m.dev, m.cpu
    after = np.flatnonzero(np.isclose(dev.ts, end, atol=1e-3))
    if not after.size:
        return None
    k = int(after[0])
    name = m.names[int(dev.name[k])]
    launch, op = int(dev.launch[k]), int(dev.op[k])
    if launch < 0:
        return GapCause(name, None, None, None, None, None, None, 0.0, ())
    l0, ldur = float(cpu.ts[launch]), float(cpu.dur[launch])
    o = (m.names[int(cpu.name[op])], float(cpu.ts[op]), float(cpu.dur[op])) if op >= 0 else (None, None, None)
    return GapCause(name, m.names[int(cpu.name[launch])], l0, ldur, *o, max(l0 - start, 0.0),
                    _busy(m, int(cpu.thread[launch]), start, end))


def _busy(m: Model, thread: int, start: float, end: float) -> tuple:
    """The deepest CPU events on ``thread`` that overlap [start, end], by their overlap, longest first
    (an event with a child overlapping the gap is left for the child, unless its own part is longer)."""
    cpu = m.cpu
    sel = np.flatnonzero((cpu.thread == thread) & (cpu.ts < end) & (cpu.end > start))
    if not sel.size:
        return ()
    overlap = np.minimum(cpu.end[sel], end) - np.maximum(cpu.ts[sel], start)
    inside = dict(zip(sel.tolist(), overlap.tolist()))
    child_overlap: dict[int, float] = {}
    for i in sel.tolist():
        p = int(cpu.parent[i])
        if p in inside:
            child_overlap[p] = child_overlap.get(p, 0.0) + inside[i]
    own = {i: inside[i] - child_overlap.get(i, 0.0) for i in inside}
    named: dict[str, float] = {}
    for i, us in own.items():
        if us > 0.0:
            key = m.names[int(cpu.name[i])]
            named[key] = named.get(key, 0.0) + us
    return tuple(sorted(((n, float(us)) for n, us in named.items()), key=lambda x: -x[1])[:SHOWN])
