"""The loader's speed (#30): its cost against a bare ``json.load`` of the same generated trace, and the
fast paths of its columns giving what the general ones give.

- The ratio: ``benchmarks/bench_load.py`` writes a Kineto-like trace (ops, runtime launches, kernels with
  their launch arguments, memcpys, flow arrows, instant events; one event per line) and times
  :func:`~common.report.load.reader.load` against ``json.load`` of it, back to back in this process, the
  median of a few rounds. The loader takes about a third of ``json.load`` here; the test fails above
  ``MAX_RATIO`` (1.0), which a loader three times slower, or one scanning the events once per event of
  some kind, would pass. Ratios, not seconds: the machine is shared. Once whole, once a slice at a time.
- The fast paths: ``factorize``, ``id_array``, ``float_array`` and ``grid_product`` read the common case
  (integers, triples of integers) in bulk; on odd values (None, text, floats, bools, numbers beyond exact
  floats or int64) they must give what the per-value definitions give.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from common.report.load import columns as C
from common.report.load import reader as L
from common.report.load import slices as S

from conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import bench_load  # noqa: E402

STEPS = 2000  # about 74,000 events, 15 MB


@pytest.mark.parametrize("sliced", [False, True], ids=["whole", "sliced"])
def test_load_against_json_load(tmp_path, monkeypatch, sliced):
    path = bench_load.write_trace(tmp_path / "load.json", STEPS)
    if sliced:  # the big-file path: 1 MiB slices
        monkeypatch.setattr(L, "SPLIT_MIN", 1)
        monkeypatch.setattr(S, "SLICE_BYTES", 1 << 20)
    loaded = L.load(path)
    assert loaded.n_events == STEPS * 37 and len(loaded.columns.group) == STEPS * 19
    assert np.isnan(loaded.columns.dev_blocks).sum() == STEPS  # a memcpy a step: no grid
    ratio, load_s, json_s = bench_load.time_ratio(path, rounds=3)
    print(f"load {load_s:.2f} s, json.load {json_s:.2f} s: ratio {ratio:.2f}")
    assert ratio < bench_load.MAX_RATIO, f"load {load_s:.2f} s against json.load {json_s:.2f} s"


def _factorize_by_definition(values) -> tuple[list, list]:
    uniques = list(dict.fromkeys(values))
    return [uniques.index(v) for v in values], uniques


@pytest.mark.parametrize("values", [[], ["b", "a", "b", "c", "a"], [7, 3, 7, 7, 1, 3], [1, "1", 1.0, None, None, "x"]])
def test_factorize_keeps_the_order_of_first_appearance(values):
    ids, uniques = C.factorize(values)
    want_ids, want_uniques = _factorize_by_definition(values)
    assert ids.tolist() == want_ids and uniques == want_uniques and ids.dtype == np.int64


def _ids_by_definition(values, default=-1) -> tuple[list, int]:
    """The ids as the loader always read them: each value as a float (None: NaN, text that spells a number:
    that number), an id where finite and below EXACT_ID_LIMIT; counted as too large where beyond it."""
    out, too_large = [], 0
    for v in values:
        x = float("nan") if v is None else C._number_or_nan(v) if not isinstance(v, bool) else float(v)
        usable = np.isfinite(x) and abs(x) < C.EXACT_ID_LIMIT
        too_large += bool(np.isinf(x) or (np.isfinite(x) and not usable))
        out.append(int(x) if usable else default)
    return out, too_large


@pytest.mark.parametrize("values", [
    [5, 9, 2 ** 52, -3], [5, None, 7], [1, "12", 3], [1, 2 ** 53, 2 ** 53 - 1], [-(2 ** 63), 4],
    [2 ** 64, 1], [2 ** 2000, 1], [True, 2], [1.5, 2], []])
def test_id_array_fast_path_agrees_with_the_general_one(values):
    ids, too_large = C.id_array(values)
    want, want_too_large = _ids_by_definition(values)
    assert ids.tolist() == want and too_large == want_too_large


def _grid_by_definition(values) -> list:
    out = []
    for v in values:
        if isinstance(v, list) and len(v) == 3 and all(isinstance(d, (int, float)) for d in v):
            out.append(float(v[0] * v[1] * v[2]))
        else:
            out.append(None)
    return out


@pytest.mark.parametrize("values", [
    [[128, 1, 1], [4, 2, 3]], [[128, 1, 1], None, [2, 2, 2]], [None, None], [[1.5, 2, 2], [1, 1, 1]],
    [[2 ** 30, 2 ** 30, 2 ** 10], [1, 1, 1]], [[2 ** 70, 1, 1], [1, 2, 3]], [[True, 3, 1]], []])
def test_grid_product_fast_path_agrees_with_the_general_one(values):
    got = C.grid_product(values).tolist()
    want = _grid_by_definition(values)
    assert [None if g != g else g for g in got] == want


@pytest.mark.parametrize("values", [[1.5, None, 3], [1, 2 ** 70], ["2.5", None], [None, None], []])
def test_float_array_reads_none_as_nan(values):
    got = C.float_array(values).tolist()
    assert [None if g != g else g for g in got] == [None if v is None else float(v) for v in values]
