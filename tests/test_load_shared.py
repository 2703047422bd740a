"""The forked child's columns come back through memory both processes map (issue 30), or through the pipe
when they do not fit it: the report is the same either way, and the same as one process's."""

from __future__ import annotations

import gzip

import pytest

from common.report.load import reader as L
from common.report.load import slices as S

from conftest import DATA_TRACES
from test_load_slices import _report
from test_report import _mmap_always


@pytest.mark.parametrize("share", [1, 1 << 40])  # room for the whole text (64 KiB slices pickle big); a page
def test_child_columns_in_shared_memory_or_pipe(share, tmp_path, monkeypatch):
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress((DATA_TRACES / "hta/v100_ddp_rank1.json.gz").read_bytes()))
    whole, _ = _report(plain, monkeypatch, sliced=False)
    monkeypatch.setattr(L, "read_bytes", _mmap_always(L))
    monkeypatch.setattr(S, "SHARED_SHARE", share)
    ways = []
    real = S._received
    monkeypatch.setattr(S, "_received", lambda payload, shared: ways.append(payload[:1]) or real(payload, shared))
    split, spans = _report(plain, monkeypatch, sliced=True, parallel=True)
    assert ways == [S.IN_SHARED if share == 1 else S.THROUGH_PIPE]
    assert split == whole
