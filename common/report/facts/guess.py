"""The guess against what ran: the series' closing habit, "guess first, then look" (Part 3).

A lesson writes what its post expects one annotated call to run (:mod:`common.guess`) into the
trace's knobs; :mod:`.calls` says what the typical call ran. Each expected item takes the first
item that ran, in order, whose op is one of its ops (*as guessed*); an expected item nothing ran
is *missing*; an item that ran and no guess took is *not guessed*. A memset is never taken: it is a
fill the op's library issues before its kernel (cuBLAS's 4 bytes before a Hopper GEMM, cuDNN's
before its attention kernel), not the work a guess names, so it stays *not guessed*, as a memset. The
rows come mismatches first: every mismatch is the interesting part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from common.guess import Guess
from common.report.facts.calls import CallWork, WorkItem, item_json

MISSING, NOT_GUESSED, AS_GUESSED = "missing", "not guessed", "as guessed"


@dataclass(frozen=True)
class GuessRow:
    status: str  # MISSING | NOT_GUESSED | AS_GUESSED
    expected: Optional[str]  # the guess's words ("softmax"); None for an item nobody guessed
    seen: Optional[WorkItem]  # what ran; None for a missing item

    def to_json(self) -> dict:
        seen = None if self.seen is None else item_json(self.seen)
        return dict(status=self.status, expected=self.expected, seen=seen)


@dataclass(frozen=True)
class GuessCheck:
    guess: Guess
    work: CallWork
    rows: tuple  # GuessRow, mismatches first (missing, then not guessed, then as guessed)

    @property
    def mismatches(self) -> int:
        return sum(r.status != AS_GUESSED for r in self.rows)

    def grouped(self) -> tuple:
        """(GuessRow, how many) with identical rows together, in the rows' order (math's five casts: one row)."""
        counts: dict = {}
        for row in self.rows:
            counts[row] = counts.get(row, 0) + 1
        return tuple(counts.items())

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.rows)

    def to_json(self) -> dict:
        return dict(annotation=self.guess.annotation, source=self.guess.source, calls=self.work.calls,
                    alike=self.work.alike, on_device=self.work.on_device, rows=[r.to_json() for r in self.rows])


def check_guess(guess: Optional[Guess], work: Optional[CallWork]) -> Optional[GuessCheck]:
    """The guess's items matched against the typical call's work (None without either)."""
    if guess is None or work is None:
        return None
    taken = [False] * len(work.typical)
    matched, missing = [], []
    for expected in guess.items:
        hit = next((k for k, item in enumerate(work.typical)
                    if not taken[k] and not item.is_memset and item.op in expected.ops), None)
        if hit is None:
            missing.append(GuessRow(MISSING, expected.what, None))
        else:
            taken[hit] = True
            matched.append(GuessRow(AS_GUESSED, expected.what, work.typical[hit]))
    extra = [GuessRow(NOT_GUESSED, None, item) for k, item in enumerate(work.typical) if not taken[k]]
    return GuessCheck(guess, work, tuple(missing + extra + matched))
