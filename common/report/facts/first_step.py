"""What the first recorded step holds that the others do not.

The first recorded step is often wider, warmed up or not: the profiler switches to recording at its start, and
the extra is spread over every op and the gaps between them (seen on the CPU and on an H100, warmed
up or not; the trace shows where the time goes, not the profiler's mechanism). When that step is also
the workload's first call (``--schedule 0,0,N`` without ``--warmup``), its one-time work adds to it:
one op's own time many times its usual, and events that appear in no other step (on a GPU: module
loading, ``cudaFuncSetAttribute``, the first ``cudaFree``). This table says which, from the trace:
the ops whose own time grew most, and the events only the first step has. The first_step theme
(:mod:`common.report.rules.first_step`) reads one record, :class:`FirstStepFacts` (``t.first_step``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.model.build import STEP_RE, Model

SHOWN = 4  # ops and one-time events kept, largest first


@dataclass(frozen=True)
class FirstStepFacts:
    """What the first_step rules read."""

    parts: Optional[FirstStepParts]  # where the first step's extra time went (None: fewer than three ProfilerSteps)


def first_step_facts(m: Model) -> FirstStepFacts:
    """The first_step theme's record of one model."""
    return FirstStepFacts(parts=first_step_parts(m))


@dataclass(frozen=True)
class OwnTime:
    """One name's own time in the first step against its median over the other steps."""

    name: str
    first_us: float
    others_median_us: float

    @property
    def extra_us(self) -> float:
        return self.first_us - self.others_median_us


@dataclass(frozen=True)
class FirstStepParts:
    """Where the first step's extra time went (µs over the other steps' median)."""

    extra_us: float  # the first step's wall time less the others' median
    grown: tuple[OwnTime, ...]  # names on the step's thread whose own time grew most, largest extra first
    only_first: tuple[tuple[str, float], ...]  # (name, µs) of events that no other step has, heaviest first
    grown_total_us: float  # the extra own time of every event the other steps also have (not only ``grown``)


def first_step_parts(m: Model) -> Optional[FirstStepParts]:
    """The split for a trace of ProfilerSteps (None with fewer than three steps: the others need a median)."""
    steps = m.steps
    if m.window_source != "ProfilerStep" or len(steps) < 3:
        return None
    cpu = m.cpu
    own = np.array([s.tid if s.tid is not None else -1 for s in steps] + [-1])  # the step's thread (lane index)
    sel = np.flatnonzero((cpu.step >= 0) & (own[cpu.step] == cpu.thread))
    names = len(m.names)
    per = np.zeros((len(steps), names))
    np.add.at(per, (cpu.step[sel], cpu.name[sel]), cpu.self_us[sel])
    seen = np.zeros((len(steps), names), dtype=bool)
    seen[cpu.step[sel], cpu.name[sel]] = True
    skip = np.array([bool(STEP_RE.match(n)) for n in m.names], dtype=bool)
    others_median = np.median(per[1:], axis=0)
    in_others = seen[1:].any(axis=0)
    common = seen[0] & in_others & ~skip
    extra = np.where(common, per[0] - others_median, 0.0)
    order = [int(i) for i in np.argsort(-extra) if extra[i] > 0][:SHOWN]
    grown = tuple(OwnTime(m.names[i], float(per[0, i]), float(others_median[i])) for i in order)
    once = [(m.names[i], float(per[0, i])) for i in np.flatnonzero(seen[0] & ~in_others & ~skip)]
    once += _overheads_only_first(m)
    walls = [s.dur for s in steps]
    return FirstStepParts(float(walls[0] - np.median(walls[1:])), grown,
                          tuple(sorted(once, key=lambda x: -x[1])[:SHOWN]), float(extra[extra > 0].sum()))


def _overheads_only_first(m: Model) -> list:
    """The profiler's overhead events (module loading, buffer requests) inside the first step and in no other."""
    first, rest = m.steps[0], m.steps[1:]

    def inside(step, start):
        return step.start <= start < step.end

    out: dict[str, float] = {}
    for name, start, dur, *_ in m.overheads:
        if inside(first, start):
            out[name] = out.get(name, 0.0) + float(dur)
    for name, start, dur, *_ in m.overheads:
        if name in out and any(inside(s, start) for s in rest):
            out.pop(name)
    return list(out.items())
