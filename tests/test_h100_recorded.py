"""The report on the H100 runs as if recorded with ``--profile-memory`` or ``--record-shapes`` (issue 36, item
4: what a reader of the runs with those flags saw): :mod:`h100_recorded` adds the events those flags write to
the real runs' calls."""

from __future__ import annotations

import re

import pytest

from conftest import report_json
from h100_recorded import BASE, INPLACE, MATH, NAIVE, SCORES, with_memory


def finding(report: dict, rule: str) -> dict:
    (f,) = [f for f in report["findings"] if f["rule"] == rule]
    return f


@pytest.mark.parametrize("h200", [False, True], ids=["H100", "H200"])
def test_math_backend_counts_its_score_matrices_by_their_dtype(tmp_path, h200):
    """SDPA's math backend computes in fp32: a forward holds two fp32 score matrices (the bmm's scores and
    their softmax, 536,870,912 B each) and one bf16 one (the attention weights cast back). The finding said
    "1 of them the size of a ... bf16 score matrix (268,435,456 B): " with no op after the colon: it counted
    the bf16 size alone and named only the ops directly under the annotation."""
    report = report_json(with_memory("sdpa_math", tmp_path / "math.json", "sdpa_fwd", MATH, BASE, h200=h200))
    f = finding(report, "attention_scores_memory")
    e, message = f["evidence"], f["message"]
    assert not re.search(r": (;|$)", message), message  # never an empty list of ops
    assert (f"3 of them the size of a [8, 16, 1024, 1024] score matrix: 2 in fp32 ({2 * SCORES:,} B each: aten::bmm, "
            f"aten::_softmax), 1 in bf16 ({SCORES:,} B: aten::_to_copy) (inside aten::scaled_dot_product_attention)"
            in message)
    assert e["score_sized_by_dtype"] == {"fp32": 2.0, "bf16": 1.0} and e["score_sized_per_call"] == 3
    assert e["score_sized_ops"] == {"fp32": {"aten::bmm": 1.0, "aten::_softmax": 1.0}, "bf16": {"aten::_to_copy": 1.0}}


def test_in_place_mask_is_not_said_to_lower_a_peak_it_does_not_lower(tmp_path):
    """naive -> in-place: masked_fill_ saves the copy's allocation, not the peak (609 MiB in both): the scale
    and softmax each make their output while their input is live, two score matrices at once either way. The
    hints said "the copy and the second scores tensor go" and "one score matrix less per forward"."""
    naive = report_json(with_memory("attn_naive", tmp_path / "naive.json", "attn_fwd", NAIVE, BASE))
    inplace = report_json(with_memory("attn_inplace", tmp_path / "inplace.json", "attn_fwd", INPLACE, BASE))
    peaks = {r["memory"]["devices"][0]["peak_allocated_bytes"] for r in (naive, inplace)}
    assert peaks == {609 * (1 << 20)}  # the same peak in both runs
    copy = finding(naive, "out_of_place_copy")
    assert "second scores tensor" not in copy["hint"] and "peak" not in copy["hint"]
    scores = finding(naive, "attention_scores_memory")
    assert scores["evidence"]["peak_without_copy"] == dict(
        live_at_once=2, after_copy=2, after_others=2, others_at_peak=["aten::mul", "aten::softmax"], peak_drops=False)
    assert "one score matrix less allocated (and copied) per forward, but not at the forward's peak: 2 score " \
           "matrices are live at once with or without the copy" in scores["hint"]
    assert "so the peak memory stays" in scores["hint"]
    assert finding(inplace, "attention_scores_memory")["evidence"]["scores_live_at_once"] == 2

