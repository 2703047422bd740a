"""The control of a comparison: two runs made at different moments, on a machine that may have got
busier in between, differ in what changed and in the machine. Work that did not change between them
measures the machine: how much longer it took in B says how much of a difference the machine alone
explains, and only a difference beyond that is the code's.

- Device time: every kernel, memcpy and memset that ran under the same name, as many times per step,
  in both runs (their summed time per step).
- CPU time: every op that ran in both runs as many times per step with the same ops inside it
  (:mod:`.same_work`), by its own CPU time, if together they take MIN_US["op"] (1 ms) a step or more: a
  shorter piece of work mostly runs between the scheduler's time slices and misses a busier machine.
  Else the machine probe, when both runs timed the same one (:mod:`common.machine`: a fixed loop timed
  before the profiler started, written in the knobs).
- No ops when the lessons' knobs say the runs had different shapes (or dtype, or device): then the
  same name is not the same work (the probe still is).

What the control explains (:attr:`Control.explains`): every B/A ratio between 1 and the control's own
ratio at its extremes (its fastest step in one run against its slowest in the other), widened by
CONTROL_MARGIN. A run's steps judge the result when every step of one run is faster than every step of
the other (:func:`_why_not`) and the ratio lies outside what the control explains: a 5x difference is a
result though the control moved 1.2x, and a 6 % difference is not when the machine moved 10 %.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from common.report.model import names as trace_names
from common.report.compare.alike import workload_differences
from common.report.compare.rows import device_series
from common.report.compare.same_work import same_work_series
from common.report.facts.steadiness import WIDER_MIN_US, Spread, TwoRuns
from common.report.facts.steps import RunSteps
from common.report.units import fmt_us

CONTROL_TOLERANCE = 1.15  # the control "moved" when its median took more than 15 % more or less time in B
CONTROL_MARGIN = 1.05  # a control's own timing varies a few percent between runs on an idle machine
MIN_US = {"device event": 10.0,  # unchanged device work must take this long per step to be a control
          "op": 1000.0,  # ... unchanged CPU work this long: a few of the scheduler's time slices
          "probe": 0.0}
SHORT_SAID_US = 10.0  # unchanged ops too short to be the control are said beside the probe from this long a step


@dataclass(frozen=True)
class Control:
    """The unchanged work of two runs and its summed time in each judged step (or each probe sample)."""

    unit: str  # "device event" | "op" | "probe"
    names: tuple  # the unchanged kernels or ops, heaviest first; the probe's work
    a: Spread
    b: Spread
    too_short: "Control | None" = None  # beside the probe: the unchanged ops, too short to measure the machine
    after: int = 0  # the probe: how many of A's samples were timed after its profiled steps (0: none, or not in both)

    @property
    def measures(self) -> bool:
        """Long enough in both runs (MIN_US of its unit a step) to measure the machine."""
        return min(self.a.median, self.b.median) >= MIN_US[self.unit]

    @property
    def ratio(self) -> float:
        return self.b.median / self.a.median if self.a.median > 0 else float("inf")

    @property
    def moved(self) -> bool:
        return not 1 / CONTROL_TOLERANCE <= self.ratio <= CONTROL_TOLERANCE

    @property
    def explains(self) -> tuple[float, float]:
        """The B/A ratios a change of machine this large explains: from 1 to the control's own ratio at its
        extremes (B's fastest over A's slowest, B's slowest over A's fastest), widened by CONTROL_MARGIN."""
        low = self.b.low / self.a.high if self.a.high > 0 else 0.0
        high = self.b.high / self.a.low if self.a.low > 0 else float("inf")
        return min(1.0, low) / CONTROL_MARGIN, max(1.0, high) * CONTROL_MARGIN

    def explained(self, ratio: float) -> bool:
        low, high = self.explains
        return low <= ratio <= high

    def text(self) -> str:
        """``5 device events common to both (softmax_warp_forward<…>, nvjet_… and 3 more) took 1.00x as
        long in B (1.08 ms vs 1.08 ms per step)``, or the probe's ``the machine probe (…) took …``."""
        if self.unit == "probe":
            beside = f"; {self.too_short.short_text()}" if self.too_short is not None else ""
            before = len(self.a.values) - self.after
            when = (f"{before}x before and {self.after}x after each run's profiled steps" if self.after
                    else f"{before}x before each run's profiler started")
            return (f"the machine probe ({self.names[0]}, timed {when}) took {self.ratio:.2f}x as long in B "
                    f"({fmt_us(self.a.median)} vs {fmt_us(self.b.median)} a sample{beside})")
        return (f"{self._counted()} ({self._shown()}) took {self.ratio:.2f}x as long in B "
                f"({fmt_us(self.a.median)} vs {fmt_us(self.b.median)} per step)")

    def short_text(self) -> str:
        """``the 1 op common to both, with the same ops inside (aten::addmm), takes 109 µs a step: too short
        to measure the machine``."""
        verb = "takes" if len(self.names) == 1 else "take"
        return (f"the {self._counted()} ({self._shown()}) {verb} {fmt_us(min(self.a.median, self.b.median))} a "
                f"step: too short to measure the machine")

    def _counted(self) -> str:
        plural = "s" if len(self.names) > 1 else ""
        inside = ", with the same ops inside" if self.unit == "op" else ""
        return f"{len(self.names)} {self.unit}{plural} common to both{inside}"

    def _shown(self) -> str:
        """The two heaviest names, and how many more."""
        shown = list(dict.fromkeys(trace_names.short_name(n, 34) if self.unit != "op" else
                                   n if len(n) <= 50 else n[:49] + "…" for n in self.names))
        return ", ".join(shown[:2]) + (f" and {len(self.names) - 2} more" if len(self.names) > 2 else "")

    def to_json(self) -> dict:
        low, high = self.explains
        return dict(unit=self.unit, names=list(self.names), a_median_us=self.a.median, b_median_us=self.b.median,
                    ratio=self.ratio, moved=self.moved, measures=self.measures, explains=[low, high],
                    too_short=self.too_short.to_json() if self.too_short is not None else None,
                    **({"samples_after": self.after} if self.unit == "probe" else {}))


def control_of(unit: str, sa: dict, sb: dict) -> Control | None:
    """The names in both with as many calls per step (the median over the judged steps), summed per step;
    None when there are none. Whether they are long enough to measure the machine: :attr:`Control.measures`."""
    same = [n for n in sa if n in sb and sa[n].calls_per_step == sb[n].calls_per_step > 0]
    if not same:
        return None
    same.sort(key=lambda n: -sa[n].us_per_step)
    a = Spread(tuple(float(x) for x in np.sum([sa[n].time_us for n in same], axis=0)))
    b = Spread(tuple(float(x) for x in np.sum([sb[n].time_us for n in same], axis=0)))
    names = tuple(n[0] if isinstance(n, tuple) else n for n in same)  # a same-work key is (op name, subtree)
    return Control(unit, names, a, b)


def probe_control(pa: dict | None, pb: dict | None) -> Control | None:
    """The machine probe of both runs, when both timed the same one (the knobs' ``probe``): its samples
    before the profiler and, where both runs have them, after it (a machine busier during the steps than
    before them shows there)."""
    if pa is None or pb is None or pa["work"] != pb["work"]:
        return None
    around = "after" in pa and "after" in pb  # both bracketed their steps: the samples from both sides count
    samples = [tuple(p["us"]) + (tuple(p["after"]) if around else ()) for p in (pa, pb)]
    return Control("probe", (pa["work"],), Spread(samples[0]), Spread(samples[1]),
                   after=len(pa["after"]) if around else 0)


def same_workload(a: RunSteps, b: RunSteps) -> bool:
    """Whether the same op or kernel name can be the same work in both runs: not when the lessons' knobs
    say the runs had different shapes, dtypes or devices (:func:`.alike.workload_differences`; a trace
    without knobs cannot tell: its names count)."""
    return not workload_differences(a, b)


def device_control(a: RunSteps, b: RunSteps) -> Control | None:
    """The kernels, memcpys and memsets that ran unchanged in both runs (None: none)."""
    if not (a.has_gpu and b.has_gpu and same_workload(a, b)):
        return None
    return control_of("device event", {n: s for n, (_, s) in device_series(a).items()},
                      {n: s for n, (_, s) in device_series(b).items()})


def probe_of(t: RunSteps) -> dict | None:
    return t.knobs.probe if t.knobs is not None else None


def cpu_control(a: RunSteps, b: RunSteps) -> Control | None:
    """The ops that ran unchanged in both runs, by their own CPU time, else the machine probe."""
    return cpu_control_between(same_work_series(a), same_work_series(b), same_workload(a, b),
                               probe_of(a), probe_of(b))


def cpu_control_between(sa: dict, sb: dict, same: bool, pa: dict | None, pb: dict | None) -> Control | None:
    """:func:`cpu_control` over two runs' :func:`~.same_work.same_work_series` (``same``: the same workload)
    and machine probes: the unchanged ops when they measure the machine, else the probe (with the ops
    beside it), else the ops, too short (the verdict names them), else None."""
    ops = control_of("op", sa, sb) if same else None
    if ops is not None and ops.measures:
        return ops
    probe = probe_control(pa, pb)
    if probe is None:
        return ops
    worth_saying = ops is not None and min(ops.a.median, ops.b.median) >= SHORT_SAID_US
    return replace(probe, too_short=ops if worth_saying else None)


def judge(what: str, a: Spread, b: Spread, control: Control | None, *, needs_control: bool,
          other_work: str = "") -> dict:
    """Medians, ranges, the ratio of medians, whether it is judged, why not, and the verdict line.
    ``needs_control``: without a control the difference is not judged (the CPU's time follows the
    host's load; a device's does not wait on it). ``other_work``: what makes a step of A other work than a
    step of B (:mod:`.alike`): then no verdict at all."""
    two = TwoRuns(a, b)
    side = dict(a_median_us=a.median, b_median_us=b.median, a_range_us=[a.low, a.high], b_range_us=[b.low, b.high],
                ratio=two.ratio, control=control.to_json() if control else None)  # the JSON names a short one too
    why = (f"the runs ran other work ({other_work}): a step of one is not a step of the other" if other_work
           else _why_not(two))
    short = control if control is not None and not control.measures else None
    control = None if short is not None else control
    told = _told_ratio(two)
    if why is None and control is not None and control.explained(told):
        low, high = control.explains
        why = (f"the difference is within the machine's drift: {control.text()}, and a machine that much busier "
               f"or idler (or other work under the same names) explains B/A from {low:.2f}x to {high:.2f}x; "
               f"the steps' B/A is {told:.2f}x")
    if why is None and control is None and needs_control:
        unchanged = (short.short_text() if short is not None else
                     "no work ran unchanged in both runs (the same op with the same ops inside it, as many calls "
                     "per step)")
        why = (f"{unchanged}, and the runs timed no machine probe: nothing tells a change in the code from a "
               "busier machine")
    medians = f"{fmt_us(a.median)} vs {fmt_us(b.median)}"
    if why is not None:
        verdict = f"{what} per step: cannot tell which run is faster: {why} (medians A vs B: {medians})"
    else:
        faster = "B" if two.ratio < 1 else "A"
        if control is not None:
            low, high = control.explains
            checked = (f"control: {control.text()}: the machine's drift explains B/A from {low:.2f}x to "
                       f"{high:.2f}x, not {told:.2f}x")
        elif short is not None:
            checked = f"no control for the machine: {short.short_text()}"
        else:
            checked = "no kernel ran unchanged in both runs to control for the machine"
        ranges = f"(A {fmt_us(a.low)}-{fmt_us(a.high)}, B {fmt_us(b.low)}-{fmt_us(b.high)})"
        if told != two.ratio:  # a noisy run: its median rests on a slow step; the nearest steps' ratio holds
            noisy = next(f"{name}'s steps {s.vary_text()}" for name, s in (("A", a), ("B", b)) if s.noisy)
            verdict = (f"{what} per step: every {faster} step is faster than every step of the other {ranges}, "
                       f"B/A {told:.2f}x at the nearest ({noisy}: no median ratio from so few, so noisy steps; "
                       f"medians A vs B: {medians}); {checked}")
        else:
            verdict = (f"{what} per step: B's median is {two.ratio:.2f}x A's ({medians}), and every {faster} step is "
                       f"faster than every step of the other {ranges}; {checked}")
    judged = why is None
    return dict(side, ratio=told if judged else two.ratio, at_least=judged and told != two.ratio,
                inside_noise=not judged, judged=judged, why_not=why, verdict=verdict)


def _told_ratio(two: TwoRuns) -> float | None:
    """The ratio a verdict gives: the medians' where both runs are steady; where one is noisy (steps that
    vary 2x or more), the nearest steps' (the slower run's fastest over the faster run's slowest): with three
    steps, one stall carries a median, and every step shows at least this ratio."""
    r = two.ratio
    if r is None or not (two.a.noisy or two.b.noisy):
        return r
    return two.b.low / two.a.high if r > 1 else two.b.high / two.a.low


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
    noisy = next((f"{name}'s steps {s.vary_text()}: "
                  "too noisy to compare, and " for name, s in (("A", two.a), ("B", two.b)) if s.noisy), "")
    if two.overlap:
        return f"{noisy}the ranges overlap ({ranges}): the difference is inside the step-to-step noise"
    return f"{noisy}the ranges lie only {fmt_us(two.gap)} apart ({ranges})"
