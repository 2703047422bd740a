"""Per-step series for the HTML page's plots: which steps a plot can draw, and at most a few thousand
points of them.

A trace of 20,000 steps would draw 20,000 stacked bars and 20,000 tick labels: minutes of
matplotlib and a page no browser scrolls. Past :data:`MAX_POINTS` steps, consecutive steps are
grouped into buckets of equal size (the last may be shorter), and each bucket is drawn by its
mean and its extremes (min and max), so that one slow step still shows as a spike. The plot says
so in its caption (:attr:`Buckets.caption`). Every number is computed here from :class:`Tables`;
the plots only draw them.

- :func:`breakdown_series`: the steps' time breakdown. On a GPU trace it is TensorBoard's, over the
  steps TensorBoard keeps (it drops trailing steps not wholly captured: those have no breakdown
  and are left out here, said in the caption); on a CPU-only trace, compute vs dispatch per step.
- :func:`spread_series`: per-step times of the steps (wall) and of the top kernels, for the
  spread plot; mean and median always over every step, the points drawn per bucket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.model.build import BREAKDOWN_KEYS
from common.report.model.names import short_name
from common.report.facts.tables import Tables

MAX_POINTS = 2000  # per series: past this many steps, buckets of consecutive steps
SPREAD_KERNELS = 6  # top kernels in the spread plot


@dataclass(frozen=True)
class Buckets:
    """``steps`` consecutive steps in buckets of ``size`` (1: every step its own point); bucket ``i``
    starts at step ``starts[i]``."""

    steps: int
    size: int
    starts: np.ndarray  # int, first step index of each bucket
    drawn: str = "mean, and min–max per bucket"  # what a bucket's points are

    @property
    def count(self) -> int:
        return int(self.starts.size)

    @property
    def caption(self) -> Optional[str]:
        """What the plot draws, when it is not every step."""
        if self.size == 1:
            return None
        return (f"{self.steps:,} steps drawn as {self.count:,} buckets of {self.size:,} consecutive steps "
                f"({self.drawn})")


def buckets_of(steps: int, max_points: int = MAX_POINTS, drawn: str = Buckets.drawn) -> Buckets:
    size = max(1, -(-steps // max_points))
    return Buckets(steps, size, np.arange(0, steps, size, dtype=np.int64), drawn)


@dataclass(frozen=True)
class Reduced:
    """A per-step series, per bucket: its mean, min and max (each one per bucket)."""

    mean: tuple
    low: tuple
    high: tuple


def reduce(values, buckets: Buckets) -> Reduced:
    v = np.asarray(values, dtype=np.float64)
    if not v.size:
        return Reduced((), (), ())
    counts = np.diff(np.append(buckets.starts, v.size))
    mean = np.add.reduceat(v, buckets.starts) / counts
    return Reduced(tuple(mean.tolist()), tuple(np.minimum.reduceat(v, buckets.starts).tolist()),
                   tuple(np.maximum.reduceat(v, buckets.starts).tolist()))


@dataclass(frozen=True)
class BreakdownSeries:
    """The steps' breakdown, ready to draw: one point per step (``buckets.size`` 1) or per bucket."""

    title: str
    labels: tuple  # per point: the step's label, or the bucket's first and last ("#0–#9")
    parts: dict  # {part: per point, µs (the mean over the bucket)}
    totals: Reduced  # the stacked total per point: mean, min, max
    buckets: Buckets
    left_out: tuple  # names of the steps that have no breakdown (TensorBoard dropped them)

    @property
    def caption(self) -> Optional[str]:
        said = [c for c in (self.buckets.caption, self._left_out_note()) if c]
        return "; ".join(said) or None

    def _left_out_note(self) -> Optional[str]:
        if not self.left_out:
            return None
        names = ", ".join(self.left_out[:3]) + (f" and {len(self.left_out) - 3:,} more" if len(self.left_out) > 3 else "")
        return f"{names} left out: not all its GPU work was captured (TensorBoard drops it too)"


def breakdown_series(t: Tables) -> BreakdownSeries:
    """Per step: TensorBoard's breakdown on a GPU trace; compute vs dispatch on a CPU-only one."""
    if t.has_gpu or t.cpu_work is None:
        rows = [r for r in t.step_rows if r.breakdown is not None]
        kept = {id(r) for r in rows}
        left_out = tuple(r.name for r in t.step_rows if id(r) not in kept)
        labels = [t.step_label(i) for i, r in enumerate(t.step_rows) if id(r) in kept]
        per_step = {k: [getattr(r.breakdown, k) for r in rows] for k in BREAKDOWN_KEYS}
        title = "step time breakdown (kernel > memcpy > memset > runtime > dataloader > CPU exec > other)"
    else:
        work = t.cpu_work.steps
        labels = [t.step_label(i) for i in range(len(work))]
        per_step = {"compute": [s.compute_us for s in work],
                    "dispatch": [s.dispatch_us for s in work]}
        left_out = ()
        title = "step time: the compute ops' own work vs the dispatch around them (CPU)"
    buckets = buckets_of(len(labels))
    totals = np.sum([np.asarray(v, dtype=np.float64) for v in per_step.values()], axis=0) if labels else []
    parts = {k: reduce(v, buckets).mean for k, v in per_step.items()}
    return BreakdownSeries(title, _labels(labels, buckets), parts, reduce(totals, buckets), buckets, left_out)


def _labels(labels: list, buckets: Buckets) -> tuple:
    if buckets.size == 1:
        return tuple(labels)
    ends = np.append(buckets.starts[1:], len(labels)) - 1
    return tuple(f"{labels[a]}–{labels[b]}" for a, b in zip(buckets.starts.tolist(), ends.tolist()))


@dataclass(frozen=True)
class SpreadRow:
    """One series of the spread plot: per-step times, their mean and median over every step, and the
    points drawn (every step, or each bucket's min and max)."""

    label: str  # short, for the axis
    name: str  # whole, for the hover
    steps: int
    mean_us: float
    median_us: float
    drawn_us: tuple  # the values drawn
    buckets: Buckets


def spread_series(t: Tables) -> tuple:
    """The steps' wall times (two steps or more) and each top kernel's time in the steps it ran in."""
    series = []
    if len(t.step_rows) >= 2:
        series.append(("steps (wall)", "ProfilerStep wall time", [r.wall_us for r in t.step_rows]))
    for k in t.kernels[:SPREAD_KERNELS]:
        calls = k.detail.per_step_calls if k.detail is not None else ()
        if sum(1 for c in calls if c) >= 2:
            series.append((short_name(k.name, 40), k.name, [us for us, c in zip(k.detail.per_step_us, calls) if c]))
    return tuple(_spread_row(*s) for s in series)


MEAN_AWAY = 1.2  # a mean this far from the median (either way): a few steps pull it away


def spread_title(rows) -> str:
    """The spread plot's title, as the series show it: which series a few slow steps pull the mean
    (dashed) away from the median, or that mean and median agree (steps at 0.96/1.00/1.08 of their
    median pull nothing)."""
    def apart(values) -> bool:
        mid = float(np.median(values)) if len(values) else 0.0
        return mid > 0 and not 1 / MEAN_AWAY <= float(np.mean(values)) / mid <= MEAN_AWAY

    away = [r.label + (" (its first step alone)"
                       if r.buckets.size == 1 and len(r.drawn_us) > 2 and not apart(r.drawn_us[1:]) else "")
            for r in rows if apart(r.drawn_us) if r.buckets.size == 1] + \
        [r.label for r in rows if r.buckets.size > 1 and r.median_us > 0
         and not 1 / MEAN_AWAY <= r.mean_us / r.median_us <= MEAN_AWAY]
    if away:
        return (f"per-step times against their median: slow steps pull the mean (dashed) away from the median in "
                f"{', '.join(away)}")
    worst = max((abs(r.mean_us / r.median_us - 1) for r in rows if r.median_us > 0), default=0.0)
    return f"per-step times against their median: the mean (dashed) is within {100 * worst:.0f}% of the median"


def _spread_row(label: str, name: str, values: list) -> SpreadRow:
    v = np.asarray(values, dtype=np.float64)
    buckets = buckets_of(v.size, MAX_POINTS // 2, "min and max per bucket")  # two points per bucket
    if buckets.size == 1:
        drawn = tuple(v.tolist())
    else:
        r = reduce(v, buckets)
        drawn = tuple(x for pair in zip(r.low, r.high) for x in pair)
    return SpreadRow(label, name, int(v.size), float(v.mean()), float(np.median(v)), drawn, buckets)


@dataclass(frozen=True)
class PairSeries:
    """Two runs' per-step values for the compare page, step by step in order: per point (a step, or a
    bucket of consecutive steps) each run's mean, min and max. A run shorter than the other has no
    points past its end."""

    a: Reduced
    b: Reduced
    buckets: Buckets

    @property
    def caption(self) -> Optional[str]:
        return self.buckets.caption


def pair_series(a: list, b: list) -> PairSeries:
    """``a`` and ``b`` (µs per step) in the same buckets, at most :data:`MAX_POINTS` points each."""
    buckets = buckets_of(max(len(a), len(b)))

    def mine(values: list) -> Reduced:
        starts = buckets.starts[buckets.starts < len(values)]
        return reduce(values, Buckets(len(values), buckets.size, starts, buckets.drawn))

    return PairSeries(mine(a), mine(b), buckets)
