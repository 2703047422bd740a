"""The largest blocks an annotation's calls allocate, size by size: which ops allocate them, and how many
blocks of a size are live at once inside a call (:class:`SizeUse`, a field of
:class:`~.memory.AnnotationMemory`).

Each allocation is named twice: by the op directly under the annotation (``aten::masked_fill``,
``aten::scaled_dot_product_attention``) and by the innermost op that made it, past the allocation helpers
(:data:`ALLOCATION_HELPERS`: ``aten::empty``, ``aten::empty_like``...), so ``aten::clone`` for
masked_fill's copy and ``aten::bmm``, ``aten::_softmax``, ``aten::_to_copy`` for the blocks SDPA's math
backend makes inside its one op. **Live at once**: the running count, over a call's own events in time
order, of its allocations of that size less its frees of that size, from 0 at the call's start (a block of
that size allocated before the call and freed in it counts down from 0: the count is floored at 0); its
largest value over the calls, and per (op, inner op) the largest count right after one of its allocations.
An allocation that is the only one live at the call's largest count raises the peak by one block; where
other allocations reach the same count without it, the peak does not depend on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ALLOCATION_HELPERS = frozenset({"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty",
                                "aten::new_empty_strided", "aten::resize_"})


@dataclass(frozen=True)
class BlockSource:
    """The allocations of one size by one (op under the annotation, innermost op) pair."""

    op: str  # the op directly under the annotation ("(no op)" outside every op)
    inner: str  # the innermost op that allocated, past ALLOCATION_HELPERS
    per_call: float  # allocations per call
    live_after: int  # the most blocks of this size live right after one of these allocations, in any call


@dataclass(frozen=True)
class SizeUse:
    """One allocation size of an annotation's calls."""

    bytes: int
    per_call: float  # allocations of this size per call
    max_live: int  # the most blocks of this size live at once in a call (the call's own events)
    sources: tuple  # BlockSource, in order of first allocation


def size_uses(sizes: tuple, nbytes: np.ndarray, call: np.ndarray, calls: int, top: np.ndarray, inner: np.ndarray,
              names) -> tuple:
    """:class:`SizeUse` for each size of ``sizes``, from every event of the calls (``nbytes``: its signed
    bytes; ``call``: its call's index, the events by call, then time; ``top``/``inner``: name ids, -1 none)."""
    if not nbytes.size:
        return ()
    starts = np.flatnonzero(np.r_[True, call[1:] != call[:-1]])
    out = []
    for size in sizes:
        live = _live(((nbytes == size).astype(np.int64) - (nbytes == -size)), starts)
        allocs = np.flatnonzero(nbytes == size)
        pairs = top[allocs] * (len(names) + 1) + inner[allocs]
        found, first, which = np.unique(pairs, return_index=True, return_inverse=True)
        which = which.reshape(-1)
        counts = np.bincount(which, minlength=found.size)
        most = np.zeros(found.size, dtype=np.int64)
        np.maximum.at(most, which, live[allocs])
        sources = tuple(BlockSource(_name(names, int(top[allocs[f]])), _name(names, int(inner[allocs[f]])),
                                    float(counts[k]) / calls, int(most[k]))
                        for k, f in sorted(enumerate(first.tolist()), key=lambda kf: kf[1]))
        out.append(SizeUse(int(size), float(allocs.size) / calls, int(live.max(initial=0)), sources))
    return tuple(out)


def _live(delta: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The running sum of ``delta`` restarted at each call's first event, floored at 0 as it runs (one pass:
    each call's values are shifted below every earlier call's, so one running minimum serves them all)."""
    segment = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, delta.size]))
    total = np.cumsum(delta)
    running = total - np.r_[0, total][starts][segment]
    apart = 2 * (delta.size + 1) * segment  # |running| <= delta.size
    lowest = np.minimum.accumulate(running - apart) + apart
    return running - np.minimum(lowest, 0)


def _name(names, i: int) -> str:
    return names[i] if i >= 0 else "(no op)"
