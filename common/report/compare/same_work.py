"""Which CPU ops are the same work in two runs: the same op with the same ops inside it.

An op's name alone does not make it the same work: ``aten::scaled_dot_product_attention`` runs the math
backend's dozen ops in one run and one fused op in the other, and its own time is the backend's
preparation in each. Nor does the op it was called from: ``aten::mm`` under eager's ``aten::matmul`` and
under a compiled graph is one GEMM. So each op is keyed by its **subtree**: its name and, recursively, the
names of the ops it called (a multiset: their order aside). Two runs' ops with one key and as many calls
per step ran the same code; :mod:`.control` weighs them by their own CPU time (children left out, so
that a key nested in another is not counted twice) to see whether the machine changed between the runs.

The key is a 64-bit hash of names, never of the trace's name ids, so keys from two traces compare.
"""

from __future__ import annotations

import hashlib

import numpy as np

from common.report.compare.rows import judged_steps, series_of
from common.report.facts.steps import RunSteps
from common.report.model.build import OP, STEP_RE

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every input bit moves every output bit (uint64, wrapping)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return (x ^ (x >> np.uint64(31))) & _MASK


def _name_hashes(names: tuple) -> np.ndarray:
    """A fixed 64-bit hash per name (the same in every process and every trace)."""
    return np.fromiter((int.from_bytes(hashlib.blake2b(n.encode("utf-8", "replace"), digest_size=8).digest(),
                                       "little") for n in names), dtype=np.uint64, count=len(names))


def subtree_keys(t: RunSteps) -> np.ndarray:
    """Per CPU event, the hash of its name and of its OP descendants' names (0 for events that are not
    ops). Deepest events first, so that each parent sums its children's finished keys."""
    cpu = t.model.cpu
    own = _name_hashes(t.model.names)[cpu.name] if cpu.n else np.zeros(0, dtype=np.uint64)
    is_op = cpu.kind == OP
    inside = np.zeros(cpu.n, dtype=np.uint64)
    key = np.zeros(cpu.n, dtype=np.uint64)
    for depth in range(cpu.max_depth, -1, -1):
        rows = np.flatnonzero((cpu.depth == depth) & is_op)
        with np.errstate(over="ignore"):
            key[rows] = _mix(own[rows] ^ _mix(inside[rows] + np.uint64(0x9E3779B97F4A7C15)))
        up = cpu.parent[rows]
        has = up >= 0
        np.add.at(inside, up[has], key[rows[has]])  # an order-free sum: the children as a multiset
    return key


def same_work_series(t: RunSteps) -> dict:
    """{(op name, subtree key): Series} of each op's own CPU time (children left out) per judged step."""
    m = t.model
    cpu = m.cpu
    step_name = m.name_mask(lambda s: bool(STEP_RE.match(s)))
    rows = np.flatnonzero((cpu.kind == OP) & ~step_name[cpu.name])
    if rows.size == 0:
        return {}
    keys = subtree_keys(t)[rows]
    found, ids = np.unique(keys, return_inverse=True)
    first = np.zeros(found.size, dtype=np.int64)
    first[ids[::-1]] = rows[::-1]  # the first event of each key names it
    labels = [(m.names[int(cpu.name[i])], int(k)) for i, k in zip(first.tolist(), found.tolist())]
    return series_of(ids.reshape(-1), cpu.step[rows], cpu.self_us[rows], judged_steps(t), labels)
