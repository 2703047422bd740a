"""The straggler: the rank the other ranks wait for, named only where the run's evidence carries it.

The rank that waits least is named when the others wait at least a tenth of a step more (50 µs at
least) and

- its lead is beyond the ranks' step-to-step noise (the widest range of one rank's step times);
- it leads in every profiled step the ranks share, each time by that tenth of a step (a lead that
  comes and goes, or passes from rank to rank, is the machine's timing, not a rank's work);
- its lag is its own: an annotation only it runs in its steps (``06_ddp.py --straggler``'s
  ``straggler_delay``: the verdict then says how long it takes, beside the wait), or more work than
  the others (CPU ops per step). On a CPU trace, a rank that runs the same ops as the others, only
  slower (that slower compute at least half its lead), was slowed by the machine it shares (other
  processes on its core), not by the job; one that was idle longer, in no annotation of its own, may
  have been the machine's too: "cannot tell", both. On a GPU the same kernels slower on one device
  is a slow device, and it is named.

Otherwise "cannot tell", and why, with the numbers.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.job.result import RankSummary
from common.report.model.build import ANNOTATION, OP, STEP_RE, Model
from common.report.units import fmt_us

STRAGGLER_SHARE = 0.10  # the others wait at least this share of a step more than the straggler
STRAGGLER_MIN_US = 50.0


@dataclass(frozen=True)
class RankWork:
    """What one rank ran in each profiled step: its CPU ops, and its top-level annotations' time."""

    numbers: tuple  # the ProfilerStep numbers
    ops: tuple[int, ...]
    annotations: tuple[dict, ...]  # per step: annotation name -> µs inside the step


@dataclass(frozen=True)
class Lead:
    slow: int  # index of the rank that waits least (medians)
    behind_us: float  # the others' mean wait minus its own (medians per step)
    least_us: float  # the least lead that counts: a tenth of a step, 50 µs at least


@dataclass(frozen=True)
class Verdict:
    lead: Optional[Lead]  # the rank named (None: no straggler, or cannot tell)
    cannot_tell: Optional[str]
    annotation: Optional[str] = None  # the straggler's own annotation that the others do not run ...
    annotation_us: Optional[float] = None  # ... and its time per step (median)


def top_annotations(m: Model):
    """The annotations right under each ProfilerStep (forward, backward, ...): (starts, ends, names)."""
    cpu = m.cpu
    is_step = m.name_mask(lambda s: bool(STEP_RE.match(s)))
    parent = cpu.parent
    top = (cpu.kind == ANNOTATION) & (parent >= 0)
    top &= is_step[cpu.name[np.maximum(parent, 0)]] & ~is_step[cpu.name]
    idx = np.flatnonzero(top)
    idx = idx[np.argsort(cpu.ts[idx], kind="stable")]
    return cpu.ts[idx], cpu.end[idx], [m.names[i] for i in cpu.name[idx].tolist()]


def work_of(m: Model) -> RankWork:
    cpu = m.cpu
    starts, ends, names = top_annotations(m)
    ops, annotations = [], []
    for s in m.steps:
        ops.append(int(((cpu.kind == OP) & (cpu.ts >= s.start) & (cpu.ts < s.end)).sum()))
        inside: dict = {}
        for a, b, name in zip(starts.tolist(), ends.tolist(), names):
            if s.start <= a < s.end:
                inside[name] = inside.get(name, 0.0) + min(b, s.end) - a
        annotations.append(inside)
    return RankWork(tuple(s.number for s in m.steps), tuple(ops), tuple(annotations))


def lead_of(ranks: list[RankSummary]) -> Optional[Lead]:
    """The rank that waits least and by how much (medians per step); None with one rank."""
    if len(ranks) < 2:
        return None
    slow = min(range(len(ranks)), key=lambda i: ranks[i].wait_us)
    behind = statistics.fmean(r.wait_us for i, r in enumerate(ranks) if i != slow) - ranks[slow].wait_us
    step = statistics.median(r.step_us for r in ranks)
    return Lead(slow, behind, max(STRAGGLER_SHARE * step, STRAGGLER_MIN_US))


def step_spread(ranks: list[RankSummary]) -> tuple[float, Optional[RankSummary]]:
    """The run's step-to-step noise: the widest range of one rank's step times, and that rank."""
    widths = [(max(s.wall_us for s in r.steps) - min(s.wall_us for s in r.steps), r) for r in ranks if r.steps]
    return max(widths, key=lambda w: w[0]) if widths else (0.0, None)


def _inside_noise(ranks: list[RankSummary], lead: Lead) -> Optional[str]:
    spread, widest = step_spread(ranks)
    if lead.behind_us > spread or spread < lead.least_us:
        return None
    low, high = (f(s.wall_us for s in widest.steps) for f in (min, max))
    return (f"the others wait {fmt_us(lead.behind_us)} per step more than rank {ranks[lead.slow].rank}, no more than "
            f"the ranks' steps vary from step to step ({fmt_us(spread)}: rank {widest.rank}'s steps take "
            f"{fmt_us(low)} to {fmt_us(high)})")


def _shared_steps(ranks: list[RankSummary]) -> list:
    """The step numbers every rank profiled, in order."""
    numbers = [set(s.number for s in r.steps) for r in ranks]
    return sorted(set.intersection(*numbers), key=lambda n: (n is None, n))


def _not_every_step(ranks: list[RankSummary], lead: Lead) -> Optional[str]:
    """Why the lead is not the same rank's in every step, by a tenth of a step each time (None when it is)."""
    leads = []
    for number in _shared_steps(ranks):
        waits = [next(s.wait_us for s in r.steps if s.number == number) for r in ranks]
        least = min(range(len(ranks)), key=lambda i: waits[i])
        ahead = statistics.fmean(w for i, w in enumerate(waits) if i != least) - waits[least]
        leads.append((number, least, ahead))
    if all(least == lead.slow and ahead >= lead.least_us for _, least, ahead in leads):
        return None
    each = ", ".join(f"#{n}: rank {ranks[least].rank} by {fmt_us(ahead)}" for n, least, ahead in leads)
    return (f"the others wait {fmt_us(lead.behind_us)} per step more than rank {ranks[lead.slow].rank} (medians), "
            f"but not in every step, by a tenth of a step ({fmt_us(lead.least_us)}) each time: the least waiting "
            f"rank and its lead per step: {each}")


def _own_annotation(work: list[RankWork], slow: int) -> tuple[Optional[str], float]:
    """The annotation only the slow rank runs in its steps, with the most time (median per step)."""
    others = set().union(*(set(a) for i, w in enumerate(work) if i != slow for a in w.annotations))
    times: dict = {}
    for step in work[slow].annotations:
        for name in set().union(*work[slow].annotations) - others:
            times.setdefault(name, []).append(step.get(name, 0.0))
    if not times:
        return None, 0.0
    name = max(times, key=lambda n: statistics.median(times[n]))
    return name, float(statistics.median(times[name]))


def _more_work(work: list[RankWork], slow: int) -> bool:
    """Whether the slow rank ran more CPU ops than every other rank in each step."""
    steps = len(work[slow].ops)
    return steps > 0 and all(len(w.ops) == steps for w in work) and all(
        work[slow].ops[i] > max(w.ops[i] for k, w in enumerate(work) if k != slow) for i in range(steps))


def _its_ops(work: list[RankWork], slow: int) -> str:
    if len({w.ops for w in work}) == 1:
        return f"ran the same ops as every rank ({'/'.join(map(str, sorted(set(work[slow].ops))))} per step)"
    return "ran no more ops than the others"


def _same_work_slower(ranks: list[RankSummary], work: list[RankWork], lead: Lead) -> Optional[str]:
    """On a CPU: the slow rank ran no more ops than the others, only slower, and that slower compute is
    at least half its lead."""
    slow = ranks[lead.slow]
    others = statistics.fmean(r.compute_us for i, r in enumerate(ranks) if i != lead.slow)
    if slow.compute_us - others < 0.5 * lead.behind_us:
        return None
    return (f"the others wait {fmt_us(lead.behind_us)} per step for rank {slow.rank}, but it {_its_ops(work, lead.slow)}, "
            f"only slower (compute {fmt_us(slow.compute_us)} per step vs {fmt_us(others)}): on a CPU shared with other "
            "work that is the machine (another process on its core), not the job")


def _idle_lag(ranks: list[RankSummary], work: list[RankWork], lead: Lead) -> str:
    """On a CPU: the slow rank ran no more ops than the others, and was idle longer, with nothing to say why."""
    slow = ranks[lead.slow]
    others = statistics.fmean(r.idle_us for i, r in enumerate(ranks) if i != lead.slow)
    return (f"the others wait {fmt_us(lead.behind_us)} per step for rank {slow.rank}, which {_its_ops(work, lead.slow)} "
            f"and was idle longer (neither computing nor communicating: {fmt_us(slow.idle_us)} per step vs "
            f"{fmt_us(others)}), in no annotation of its own: on a CPU shared with other work that may be the "
            "machine (the OS not running it) as well as the job")


def judge(ranks: list[RankSummary], work: list[RankWork], on_gpu: bool) -> Verdict:
    """The straggler, or why the run cannot name one (see the module's docstring)."""
    lead = lead_of(ranks)
    if lead is None:
        return Verdict(None, None)
    noise = _inside_noise(ranks, lead)  # steps that vary as much as a lead that would count: even a small lead
    if noise is not None or lead.behind_us < lead.least_us:
        return Verdict(None, noise)
    why = _not_every_step(ranks, lead)
    if why is not None:
        return Verdict(None, why)
    name, own_us = _own_annotation(work, lead.slow)
    if name is not None and own_us >= lead.least_us:
        return Verdict(lead, None, name, own_us)
    if on_gpu or _more_work(work, lead.slow):  # a slow device, or more work: the rank's own
        return Verdict(lead, None)
    return Verdict(None, _same_work_slower(ranks, work, lead) or _idle_lag(ranks, work, lead))
