"""kernel_gap's cause (#30): each gap's look-ups are binary searches in indexes sorted once per model, not
scans of the whole trace per gap (a long trace has a gap per step: steps x events). They must find what
the scans found: the first device event (in trace order) whose start ``np.isclose``\\ s the gap's end, and
the CPU events on a thread that overlap the gap, in trace order."""

from __future__ import annotations

import numpy as np
import pytest

from common.report import tables_of
from common.report.facts.gap_cause import GapIndex

from conftest import DATA_TRACES
from h100 import h100_trace


@pytest.mark.parametrize("path", [DATA_TRACES / "hta" / "v100_ddp_rank1.json.gz",
                                  DATA_TRACES / "hta" / "a100_rank3.json.gz", h100_trace("attn_naive"),
                                  h100_trace("p1_64")], ids=lambda p: p.name[:20])
def test_gap_index_finds_what_the_scans_found(path):
    m = tables_of(path).model
    dev, cpu, index = m.dev, m.cpu, GapIndex(m)
    rng = np.random.default_rng(0)
    ends = np.concatenate([rng.choice(dev.ts, 50), rng.choice(dev.ts, 50) + rng.uniform(-20, 20, 50),
                           rng.uniform(dev.ts.min() - 10, dev.ts.max() + 10, 50)])
    for end in ends.tolist():
        scan = np.flatnonzero(np.isclose(dev.ts, end, atol=1e-3))
        assert index.first_starting_at(end) == (int(scan[0]) if scan.size else None)
    threads = np.unique(cpu.thread).tolist()
    for end in ends.tolist():
        start = end - float(rng.choice([1.0, 50.0, 5_000.0, 1e7]))
        for t in threads:
            scan = np.flatnonzero((cpu.thread == t) & (cpu.ts < end) & (cpu.end > start))
            assert index.overlapping(t, start, end).tolist() == scan.tolist()
