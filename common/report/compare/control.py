"""The control of a comparison: two runs made at different moments, on a machine that may have got
busier in between, differ in what changed and in the machine. Work that did not change between them
(the same kernel, or the same op, as many calls per step in both) must keep its time before a
difference elsewhere is called a result.

- Device time: the control is every kernel, memcpy and memset that ran under the same name, as many
  times per step, in both runs (their summed time per step).
- CPU time: every op that ran in both runs as many times per step, called from the same op (its own
  CPU time, children left out, so that a changed child does not move it).
- Neither when the lessons' knobs say the runs had different shapes (or dtype, or device): then the
  same name is not the same work.

The control moved when its median per step differs by more than CONTROL_TOLERANCE between the runs:
then "cannot tell: the machine changed between the runs". A run's steps judge the result when every
step of one run is faster than every step of the other (by WIDER_MIN_US at least), even when one run
is noisy: being apart in every step is evidence. Per step: the steps compare judges
(:func:`.compare_rows.judged_steps`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from common.report.model import names as trace_names
from common.report.compare.rows import device_series, judged_steps, series_of
from common.report.model.build import OP, STEP_RE
from common.report.facts.steadiness import WIDER_MIN_US, Spread, TwoRuns
from common.report.facts.tables import Tables
from common.report.units import fmt_us

CONTROL_TOLERANCE = 1.15  # the unchanged work may take up to 15 % more or less time in B than in A
CONTROL_MIN_US = 10.0  # ... and must take this long per step to be a control at all


@dataclass(frozen=True)
class Control:
    """The unchanged work of two runs and its summed time in each judged step."""

    unit: str  # "device event" | "op"
    names: tuple  # the unchanged kernels or ops, heaviest first
    a: Spread
    b: Spread

    @property
    def ratio(self) -> float:
        return self.b.median / self.a.median if self.a.median > 0 else float("inf")

    @property
    def moved(self) -> bool:
        return not 1 / CONTROL_TOLERANCE <= self.ratio <= CONTROL_TOLERANCE

    def text(self) -> str:
        """``5 device events common to both (softmax_warp_forward<…>, nvjet_… and 3 more) took 1.00x as
        long in B (1.08 ms vs 1.08 ms per step)``: the same names, as many calls per step."""
        shown = ", ".join(trace_names.short_name(n, 34) if self.unit != "op" else n if len(n) <= 50 else n[:49] + "…"
                          for n in self.names[:2])
        more = f" and {len(self.names) - 2} more" if len(self.names) > 2 else ""
        plural = "s" if len(self.names) > 1 else ""
        return (f"{len(self.names)} {self.unit}{plural} common to both ({shown}{more}) took "
                f"{self.ratio:.2f}x as long in B ({fmt_us(self.a.median)} vs {fmt_us(self.b.median)} per step)")

    def to_json(self) -> dict:
        return dict(unit=self.unit, names=list(self.names), a_median_us=self.a.median, b_median_us=self.b.median,
                    ratio=self.ratio, moved=self.moved)


def control_of(unit: str, sa: dict, sb: dict) -> Control | None:
    """The names in both with as many calls per step (the median over the judged steps), summed per step."""
    same = [n for n in sa if n in sb and sa[n].calls_per_step == sb[n].calls_per_step > 0]
    if not same:
        return None
    same.sort(key=lambda n: -sa[n].us_per_step)
    a = Spread(tuple(float(x) for x in np.sum([sa[n].time_us for n in same], axis=0)))
    b = Spread(tuple(float(x) for x in np.sum([sb[n].time_us for n in same], axis=0)))
    if min(a.median, b.median) < CONTROL_MIN_US:
        return None
    return Control(unit, tuple(same), a, b)


def same_workload(a: Tables, b: Tables) -> bool:
    """Whether the same op or kernel name can be the same work in both runs: not when the lessons' knobs
    say the runs had different shapes, dtypes or devices (a trace without knobs cannot tell: its names count)."""
    ka, kb = a.knobs, b.knobs
    if ka is None or kb is None:
        return True
    return (tuple(ka.shape), ka.dtype, ka.device) == (tuple(kb.shape), kb.dtype, kb.device)


def device_control(a: Tables, b: Tables) -> Control | None:
    """The kernels, memcpys and memsets that ran unchanged in both runs (None: none, or too little)."""
    if not (a.has_gpu and b.has_gpu and same_workload(a, b)):
        return None
    return control_of("device event", {n: s for n, (_, s) in device_series(a).items()},
                      {n: s for n, (_, s) in device_series(b).items()})


def own_cpu(t: Tables) -> dict:
    """{"op in parent": Series} of each op's own CPU time (its children left out) in the judged steps, by
    the op it was called from (a step's top-level ops from ``ProfilerStep``): ``aten::addmm`` under
    ``aten::linear`` and under a compiled graph are not the same work."""
    m = t.model
    cpu = m.cpu
    step_name = m.name_mask(lambda s: bool(STEP_RE.match(s)))
    rows = np.flatnonzero((cpu.kind == OP) & ~step_name[cpu.name])
    parent = cpu.parent[rows]
    caller = np.where(parent >= 0, cpu.name[np.maximum(parent, 0)], -1)
    caller = np.where((caller >= 0) & step_name[np.maximum(caller, 0)], -2, caller)
    pairs, keys = np.unique(np.stack([caller, cpu.name[rows]], axis=1), axis=0, return_inverse=True)
    label = {-1: None, -2: "ProfilerStep"}
    names = [f"{m.names[op]} in {label.get(up) or m.names[up]}" if up != -1 else m.names[op]
             for up, op in pairs.tolist()]
    return series_of(keys.reshape(-1), cpu.step[rows], cpu.self_us[rows], judged_steps(t), names)


def cpu_control(a: Tables, b: Tables) -> Control | None:
    """The ops that ran in both runs as many times per step, by their own CPU time (None: none, or too little)."""
    if not same_workload(a, b):
        return None
    return control_of("op", own_cpu(a), own_cpu(b))


def judge(what: str, a: Spread, b: Spread, control: Control | None, *, needs_control: bool) -> dict:
    """Medians, ranges, the ratio of medians, whether it is judged, why not, and the verdict line.
    ``needs_control``: without a control the difference is not judged (the CPU's time follows the
    host's load; a device's does not wait on it)."""
    two = TwoRuns(a, b)
    side = dict(a_median_us=a.median, b_median_us=b.median, a_range_us=[a.low, a.high], b_range_us=[b.low, b.high],
                ratio=two.ratio, control=control.to_json() if control else None)
    why = _why_not(two)
    if why is None and control is not None and control.moved:
        why = (f"the machine changed between the runs, or the work common to both did (other shapes or dtypes "
               f"under the same names): {control.text()}")
    if why is None and control is None and needs_control:
        why = ("no work ran unchanged in both runs (the same op, as many calls per step, on the same shapes), so "
               "nothing tells a change in the code from a busier machine")
    medians = f"{fmt_us(a.median)} vs {fmt_us(b.median)}"
    if why is not None:
        verdict = f"{what} per step: cannot tell which run is faster: {why} (medians A vs B: {medians})"
    else:
        faster = "B" if two.ratio < 1 else "A"
        checked = (f"control: {control.text()}" if control is not None else
                   "no kernel ran unchanged in both runs to control for the machine")
        verdict = (f"{what} per step: B's median is {two.ratio:.2f}x A's ({medians}), and every {faster} step is "
                   f"faster than every step of the other (A {fmt_us(a.low)}-{fmt_us(a.high)}, "
                   f"B {fmt_us(b.low)}-{fmt_us(b.high)}); {checked}")
    return dict(side, inside_noise=why is not None,
                judged=why is None, why_not=why, verdict=verdict)


def _why_not(two: TwoRuns) -> str | None:
    """Why the steps alone cannot carry a verdict: too few steps, or ranges that overlap (or lie closer
    than WIDER_MIN_US); a run too noisy on its own says so first. None: apart in every step."""
    for name, side in (("A", two.a), ("B", two.b)):
        if len(side.values) < 2:
            return f"{name} has {len(side.values)} step, no measure of its spread"
    if two.ratio is None:
        return "A has no time"
    if two.gap >= WIDER_MIN_US:
        return None
    ranges = f"A {fmt_us(two.a.low)}-{fmt_us(two.a.high)}, B {fmt_us(two.b.low)}-{fmt_us(two.b.high)}"
    noisy = next((f"{name}'s steps vary {s.high / max(s.low, 1e-9):.1f}x ({fmt_us(s.low)}-{fmt_us(s.high)}): "
                  "too noisy to compare, and " for name, s in (("A", two.a), ("B", two.b)) if s.noisy), "")
    if two.overlap:
        return f"{noisy}the ranges overlap ({ranges}): the difference is inside the step-to-step noise"
    return f"{noisy}the ranges lie only {fmt_us(two.gap)} apart ({ranges})"
