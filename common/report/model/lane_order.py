"""The CPU lane's order, (thread, start, longest first), as ``np.lexsort((-dur, ts, thread))`` gives it, faster.

A trace lists its events nearly by start, so two stable sorts (by start, then by thread) cost little; only the
events that tie on (thread, start), a parent and its first child most often, are sorted by duration (a
lexsort over those alone: on the 12-fold benchmark input 912 of 1.2 M events, 0.01 s against 0.08-0.1 s for
the lexsort of every event). Ties keep the trace's order, as the lexsort's do."""

from __future__ import annotations

import numpy as np


def lane_order(ts: np.ndarray, dur: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """The permutation sorting the events by thread, then start, then longest first, then trace order
    (finite ``ts`` and ``dur``: the model drops the others first)."""
    order = np.argsort(ts, kind="stable")
    order = order[np.argsort(thread[order], kind="stable")]
    by_thread, start = thread[order], ts[order]
    tie = (by_thread[1:] == by_thread[:-1]) & (start[1:] == start[:-1])  # position i ties with i + 1
    if tie.any():
        tied_before = np.concatenate(([False], tie))
        at = np.flatnonzero(tied_before | np.concatenate((tie, [False])))  # every position in a run of ties
        run = np.cumsum(~tied_before[at])
        order[at] = order[at[np.lexsort((-dur[order[at]], run))]]
    return order
