"""Is a difference in timings real, or inside the step-to-step noise?

A busy 2-core CPU runs the same 64x64 matmul in 40 µs one step and 11 ms the next; three steps are
few. Before a rule calls the first step "cold" or a comparison calls one run faster, the
difference must stand clear of the spread the steps themselves show. When it does not, the
report says the timings are too noisy to judge rather than give advice.

The profiler's first recorded step is often wider, warmed up or not (1.4-3.2x on an H100,
2-3x on a CPU; not in every run): it is the first step with the profiler's callbacks on, so each event is recorded
for the first time. It is a cold start only when it is also the workload's first call
(:func:`first_recorded`). Steadiness is judged on the steps after it (:func:`steady`), and on a
GPU run on the device time per step: a wider first step there is host-side.

Pure functions over lists of durations (µs); no trace, no model.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

from common.report.units import fmt_us

WIDER_RATIO = 1.5  # the first step must be at least this many times the others' median...
WIDER_MIN_US = 5.0  # ...and this many µs longer, to count as wider at all
NOISY_RATIO = 2.0  # steps whose max/min exceeds this are noisy (when the spread is also over NOISY_MIN_US)
NOISY_MIN_US = 20.0


@dataclass(frozen=True)
class Spread:
    """The median and range of a few durations."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(median(self.values)) if self.values else 0.0

    @property
    def low(self) -> float:
        return min(self.values) if self.values else 0.0

    @property
    def high(self) -> float:
        return max(self.values) if self.values else 0.0

    @property
    def width(self) -> float:
        return self.high - self.low

    def vary_text(self) -> str:
        """``vary 3.2x (1.00 ms-3.20 ms)``, or ``vary from 0.0 µs to 289 µs`` where the fastest is under
        1 µs (a ratio over a step of nothing is no figure)."""
        if self.low < 1.0:
            return f"vary from {fmt_us(self.low)} to {fmt_us(self.high)}"
        return f"vary {self.high / self.low:.1f}x ({fmt_us(self.low)}-{fmt_us(self.high)})"

    @property
    def noisy(self) -> bool:
        """max/min over NOISY_RATIO (and more than NOISY_MIN_US apart): too noisy to read small differences."""
        return len(self.values) >= 2 and self.width > NOISY_MIN_US and self.high > NOISY_RATIO * max(self.low, 1e-9)


@dataclass(frozen=True)
class FirstVsRest:
    """The first of a series of durations against the others (the cold-start question)."""

    first: float
    rest: Spread

    @property
    def ratio(self) -> float:
        return self.first / self.rest.median if self.rest.median > 0 else float("inf")

    @property
    def wider(self) -> bool:
        """The first is clearly longer than the others' median (1.5x and 5 µs)."""
        return bool(self.rest.values) and self.first >= WIDER_RATIO * self.rest.median and \
            self.first - self.rest.median >= WIDER_MIN_US

    @property
    def others(self) -> Spread:
        """The others the first is judged against: :func:`typical` (with five or more, all but their
        slowest: one stalled step, a busy machine's time slice, is an outlier, not their noise)."""
        return typical(self.rest)

    @property
    def beyond_noise(self) -> bool:
        """Wider, and longer than the slowest of the (typical) others by more than their own spread."""
        others = self.others
        return self.wider and self.first - others.high > max(others.width, WIDER_MIN_US)

    @property
    def stall(self) -> float | None:
        """The others' slowest, where it alone hides the first's width: left out of :attr:`others`, and
        the first is beyond their noise only without it (a message names it)."""
        if not self.beyond_noise or self.first - self.rest.high > max(self.rest.width, WIDER_MIN_US):
            return None
        return self.rest.high


def first_vs_rest(durations: list[float]) -> FirstVsRest | None:
    if len(durations) < 2:
        return None
    return FirstVsRest(float(durations[0]), Spread(tuple(float(d) for d in durations[1:])))


COLD, PROFILER, UNKNOWN = "cold start", "profiler's first step", "cannot tell"


@dataclass(frozen=True)
class FirstRecorded:
    """What the first recorded step is, from what ran before it: ``number`` is its ProfilerStep#N
    (the schedule's unrecorded wait and warmup steps ran the workload N times before it);
    ``warmup_calls`` the un-profiled calls the lesson made before the profiler (None: the trace
    does not say)."""

    number: int | None
    warmup_calls: int | None

    @property
    def calls_before(self) -> int | None:
        """How many times the workload ran before the first recorded step (None: cannot tell)."""
        if self.number is None:
            return None
        if self.warmup_calls is None:
            return self.number if self.number > 0 else None
        return self.number + self.warmup_calls

    @property
    def kind(self) -> str:
        """COLD: the first recorded step is also the workload's first call (its one-time costs are in
        it, with the profiler's own start); PROFILER: the workload ran before it, so its first call's
        costs fell outside the window and a wider step is the profiler's first recorded one;
        UNKNOWN: step #0 of a trace that does not say whether anything ran before the profiler."""
        before = self.calls_before
        return UNKNOWN if before is None else COLD if before == 0 else PROFILER


def first_recorded(number: int | None, warmup_calls: int | None) -> FirstRecorded:
    return FirstRecorded(number, warmup_calls)


def steady(durations) -> Spread:
    """The steps to judge steadiness (or compare runs) on: every step after the first recorded one,
    which the profiler often makes wider (all the steps when there are fewer than three).
    A comparison of two runs reads ``steady(a)`` against ``steady(b)`` (on GPU runs, the device
    time per step), so neither run's profiler step reads as noise or as a slower run."""
    values = tuple(float(d) for d in durations)
    return Spread(values[1:] if len(values) >= 3 else values)


def typical(spread: Spread) -> Spread:
    """The steps that say whether a run is noisy: with five or more, all but the slowest (one slow
    step moves neither the median nor the verdict; it is an outlier, not noise), else all of them."""
    values = sorted(spread.values)
    return Spread(tuple(values[:-1]) if len(values) >= 5 else tuple(values))


@dataclass(frozen=True)
class TwoRuns:
    """Step times of run A against run B: medians, ranges, and whether the gap is inside the noise."""

    a: Spread
    b: Spread

    @property
    def ratio(self) -> float | None:
        """B's median over A's (0.5: B takes half the time)."""
        return self.b.median / self.a.median if self.a.median > 0 else None

    @property
    def overlap(self) -> bool:
        """The two ranges overlap: some step of the faster run was as slow as a step of the slower one."""
        return self.a.low <= self.b.high and self.b.low <= self.a.high

    @property
    def gap(self) -> float:
        """How far apart the two ranges lie (µs between the faster run's slowest step and the slower
        run's fastest); negative when they overlap."""
        return max(self.a.low, self.b.low) - min(self.a.high, self.b.high)

    @property
    def why_not_apart(self) -> str | None:
        """Why the steps cannot carry a verdict on which run is faster (None when they can): too few
        steps, a run too noisy on its own, ranges that overlap, or a gap no wider than the runs' own
        spread. Judged only when every step of one run is faster than every step of the other by more
        than either run varies from step to step (and by WIDER_MIN_US at least)."""
        for name, side in (("A", self.a), ("B", self.b)):
            if len(side.values) < 2:
                return f"{name} has {len(side.values)} step, no measure of its spread"
        for name, side in (("A", self.a), ("B", self.b)):
            if side.noisy:
                return (f"{name}'s steps {side.vary_text()}: "
                        "too noisy to compare")
        ranges = f"A {_range(self.a)}, B {_range(self.b)}"
        if self.overlap:
            return f"the ranges overlap ({ranges}): the difference is inside the step-to-step noise"
        spread = max(self.a.width, self.b.width, WIDER_MIN_US)
        if self.gap <= spread:
            return (f"the ranges lie {fmt_us(self.gap)} apart ({ranges}), no more than the runs' own "
                    f"spread of {fmt_us(spread)}")
        return None

    @property
    def inside_noise(self) -> bool:
        """The difference cannot be told from the noise (why_not_apart says why)."""
        return self.why_not_apart is not None


def _range(s: Spread) -> str:
    """``73 µs-15.94 ms``: a run's fastest and slowest step."""
    return f"{fmt_us(s.low)}-{fmt_us(s.high)}"
