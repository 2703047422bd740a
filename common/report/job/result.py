"""The job report's typed result: what :mod:`.ranks` computes over a job's traces and the renderers
(:mod:`~common.report.render.job`: rich text and the JSON's ``ranks`` section) print as it is.

Times in µs, per profiled step; a rank's row holds medians over its steps.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class StepTimes:
    number: Optional[int]
    wall_us: float
    compute_us: float
    communication_us: float
    overlap_us: float
    idle_us: float


@dataclass(frozen=True)
class CollectiveCount:
    step: Optional[int]  # the ProfilerStep number
    name: str
    count: int
    bytes: Optional[int]  # the messages' total, None when the trace does not say


@dataclass(frozen=True)
class CollectiveRange:
    """One collective (by name) over a rank's profiled steps: how many per step and their message bytes
    per step, lowest and highest (bytes None when no step's size is known)."""

    name: str
    count_low: int
    count_high: int
    bytes_low: Optional[int]
    bytes_high: Optional[int]


@dataclass(frozen=True)
class StepRow(StepTimes):
    """A rank's step times with its wait in collectives, known once every rank is read."""

    wait_us: float


@dataclass(frozen=True)
class RankSummary:
    """One rank: medians over its profiled steps, each step, and its collectives per step."""

    rank: int
    path: str
    step_us: float
    compute_us: float
    communication_us: float
    overlap_us: float
    idle_us: float
    wait_us: float
    overlap_pct: Optional[float]
    steps: tuple[StepRow, ...]
    collectives: tuple[CollectiveCount, ...]

    @property
    def collective_ranges(self) -> tuple[CollectiveRange, ...]:
        """Per collective name (in the order they first appear), its count and size per step over the steps."""
        counts: dict = defaultdict(list)
        sizes: dict = defaultdict(list)
        for c in self.collectives:
            counts[c.name].append(c.count)
            if c.bytes is not None:
                sizes[c.name].append(c.bytes)
        return tuple(CollectiveRange(name, min(n), max(n), min(sizes[name], default=None),
                                     max(sizes[name], default=None)) for name, n in counts.items())


@dataclass(frozen=True)
class Straggler:
    rank: int
    behind_us: float  # the other ranks' wait per step (median; their mean) minus its own
    collective: str  # where the others waited most: the collective ...
    issued_in: Optional[str]  # ... and the annotation it was issued in
    own_annotation: Optional[str] = None  # an annotation only the straggler runs in its steps (a planted delay) ...
    own_annotation_us: Optional[float] = None  # ... and its time per step (median)


@dataclass(frozen=True)
class JobReport:
    paths: tuple[str, ...]
    world_size: int
    backend: Optional[str]
    on_gpu: bool
    tag: Optional[str]
    overlap_basis: str  # "hta" (GPU kernels) or "cpu" (CPU ops and collectives)
    ranks: tuple[RankSummary, ...]
    straggler: Optional[Straggler]
    step_spread_us: float  # the run's noise: the widest range (max - min) of one rank's step times
    straggler_cannot_tell: Optional[str]  # why no rank is named though one waits least by a tenth of a step
    # (inside the step-to-step noise, not in every step, or the same ops only slower on a shared CPU)
    notes: tuple[str, ...]

    @property
    def median_step_us(self) -> float:
        return statistics.median(r.step_us for r in self.ranks)

    @property
    def wait_spread_us(self) -> float:
        """How far apart the ranks' waits in collectives are (per step, medians): 0 for one rank."""
        waits = [r.wait_us for r in self.ranks]
        return max(waits) - min(waits) if waits else 0.0

    @property
    def straggler_share_pct(self) -> Optional[float]:
        """The straggler's lead over the others, as a share of the median step (None without one)."""
        s = self.straggler
        return 100 * s.behind_us / self.median_step_us if s is not None and self.median_step_us > 0 else None
