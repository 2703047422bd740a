"""lane_order (issue 30) gives the CPU lane the order np.lexsort((-dur, ts, thread)) gives it, ties included."""

import numpy as np
import pytest

from common.report.model.lane_order import lane_order


@pytest.mark.parametrize("seed", range(6))
def test_lane_order_is_the_lexsort(seed):
    rng = np.random.default_rng(seed)
    n = 5000
    thread = rng.integers(0, 1 + seed, n)
    ts = np.round(rng.uniform(0, 300, n)) * 0.5 + (rng.random(n) < 0.5) * np.arange(n)  # many ties, mostly by time
    dur = rng.choice([0.0, 1.0, 2.5, 7.0], n)
    assert np.array_equal(lane_order(ts, dur, thread), np.lexsort((-dur, ts, thread)))


def test_lane_order_edges():
    for n in (0, 1):
        assert lane_order(np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64)).tolist() == list(range(n))
    ts, dur, thread = np.array([1.0, 1.0, 1.0, 0.0]), np.array([1.0, 3.0, 3.0, 9.0]), np.array([0, 0, 0, 1])
    assert lane_order(ts, dur, thread).tolist() == [1, 2, 0, 3]
