"""Unions of time intervals: merged once, then queried for the covered length of any window."""

from __future__ import annotations

import numpy as np


class Intervals:
    """A union of intervals: sorted, disjoint ``starts``/``ends`` and their cumulative length."""

    __slots__ = ("starts", "ends", "_cum")

    def __init__(self, starts: np.ndarray, ends: np.ndarray, merged: bool = False):
        starts = np.asarray(starts, dtype=np.float64)
        ends = np.asarray(ends, dtype=np.float64)
        if not merged and starts.size:
            order = np.argsort(starts, kind="stable")
            s, e = starts[order], np.maximum(ends[order], starts[order])
            emax = np.maximum.accumulate(e)
            brk = s[1:] > emax[:-1]
            starts = s[np.concatenate(([True], brk))]
            ends = emax[np.concatenate((brk, [True]))]
        self.starts, self.ends = starts, ends
        self._cum = np.concatenate(([0.0], np.cumsum(ends - starts)))

    @classmethod
    def empty(cls) -> "Intervals":
        return cls(np.empty(0), np.empty(0), merged=True)

    def __len__(self) -> int:
        return int(self.starts.size)

    @property
    def total(self) -> float:
        return float(self._cum[-1])

    def union(self, other: "Intervals") -> "Intervals":
        return Intervals(np.concatenate((self.starts, other.starts)), np.concatenate((self.ends, other.ends)))

    def covered(self, a, b):
        """Length of the union inside ``[a, b]`` (scalars or arrays)."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if not self.starts.size:
            return np.zeros(np.broadcast(a, b).shape) if a.ndim or b.ndim else 0.0
        i0 = np.searchsorted(self.ends, a, side="right")  # first interval ending after a
        i1 = np.searchsorted(self.starts, b, side="left")  # intervals starting before b: [0, i1)
        total = self._cum[np.maximum(i1, i0)] - self._cum[i0]
        n = self.starts.size
        first = np.minimum(i0, n - 1)
        last = np.maximum(i1 - 1, 0)
        has = i1 > i0
        cut_a = np.where(has, np.maximum(0.0, a - self.starts[first]), 0.0)
        cut_b = np.where(has, np.maximum(0.0, self.ends[last] - b), 0.0)
        out = np.maximum(total - cut_a - cut_b, 0.0)
        return out if out.ndim else float(out)

    def gaps_inside(self, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
        """Idle gaps between the union's intervals that lie inside ``[a, b]``: (gap starts, gap ends)."""
        i0 = np.searchsorted(self.ends, a, side="left")
        i1 = np.searchsorted(self.starts, b, side="right")
        s, e = self.starts[i0:i1], self.ends[i0:i1]
        return e[:-1], s[1:]
