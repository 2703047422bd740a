"""The overhead theme's numbers (:mod:`common.report.rules.overhead`) that the general tables do not hold:
the op at the top of the op table and its heaviest child. One record, :class:`OverheadFacts` (``t.overhead``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.model.build import STEP_RE, Model


@dataclass(frozen=True)
class OverheadFacts:
    """What the overhead rules read besides the general tables."""

    top_op_children: Optional[TopOpChildren]  # the top op of the op table and its heaviest child


def overhead_facts(m: Model, ops: tuple) -> OverheadFacts:
    """The overhead theme's record of one model; ``ops`` is the op table (:class:`~.rows.OpRow`, by CPU total)."""
    return OverheadFacts(top_op_children=top_op_children(m, ops))


@dataclass(frozen=True)
class TopOpChildren:
    """The op at the top of the op table (by CPU total) and its heaviest child (None: it has none)."""

    op: str
    heaviest: Optional[str]
    heaviest_us: float


def top_op_children(m: Model, ops: tuple) -> Optional[TopOpChildren]:
    """For the first op row (not ProfilerStep#N, CPU total > 0): the child name whose calls (under any
    event of that name) take the most time."""
    top = next((o for o in ops if o.kind == "op" and not STEP_RE.match(o.name) and o.cpu_total_us > 0), None)
    if top is None:
        return None
    cpu = m.cpu
    par = np.flatnonzero(cpu.name == m.names.index(top.name))
    kids = np.flatnonzero(np.isin(cpu.parent, par))
    if not kids.size:
        return TopOpChildren(top.name, None, 0.0)
    tot = np.bincount(cpu.name[kids], weights=cpu.dur[kids])
    c = int(np.argmax(tot))
    return TopOpChildren(top.name, m.names[c], float(tot[c]))
