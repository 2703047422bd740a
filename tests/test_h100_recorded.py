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


# -- the roofline table at 80 columns (issue 36, item 4) --------------------------------------------------------------

def _allowed_words(rows: list[list[str]], texts: list[str]) -> set:
    """Every word the table may print: its headers', title's and caption's words, each cell's words, and an op's
    name in any run of its pieces (it may wrap after an ``_``)."""
    from common.report.render.roofline import HEAD

    words = {w for text in [*HEAD, *texts] for w in text.split()}
    for row in rows:
        words |= {w for cell in row[1:] for w in cell.split()}
        pieces = re.findall(r"[^_]*_|[^_]+$", row[0])
        words |= {"".join(pieces[i:j]) for i in range(len(pieces)) for j in range(i + 1, len(pieces) + 1)}
    return words


def _table_at_80(path) -> tuple[str, set]:
    """The roofline's section of the text report at 80 columns, and the words it may print."""
    import io

    from rich.console import Console

    from common.report import tables_of
    from common.report.render.roofline import caption, table_rows
    from common.report.render.text import render

    t = tables_of(path)
    out = io.StringIO()
    render(t, [], Console(file=out, width=80, color_system=None))
    text = out.getvalue()
    section = text[text.index("Roofline (GEMMs"):text.index("findings (0)")]
    return section, _allowed_words(table_rows(t.roofline), ["Roofline (GEMMs and attention, per op and shape)",
                                                            caption(t.roofline)])


ROOFLINE_CASES = ["h100:sdpa_math", "h100:sdpa_cudnn", "h100:sdpa_efficient", "h100:attn_naive", "h100:mlp",
                  "h100:p1_64", "shapes:mlp", "shapes:sdpa_efficient", "cpu:02_linear/64x32x64_bf16_warm_eager_shapes",
                  "cpu:04_a_naive_attention/1x2x64x16_bf16_warm_eager", "cpu:04_c_sdpa_attention/1x2x64x16_bf16_warm_eager_backend-auto"]


@pytest.mark.parametrize("case", ROOFLINE_CASES)
def test_roofline_table_at_80_columns_cuts_no_word(case, tmp_path):
    """At 80 columns every header, unit and number of the roofline table is whole, and so is each word of a
    shape; an op's name wraps after an ``_``. The table cut them: "8x16x1024x" over "64 causal" (the H100's
    attention rows), and with record_shapes' long op names "FLO", "B/s" and "memor" as columns squeezed."""
    from conftest import DATA_TRACES
    from h100 import h100_trace
    from h100_recorded import MLP_SHAPES, SDPA_SHAPES, with_shapes

    kind, name = case.split(":")
    path = {"h100": lambda: h100_trace(name),
            "shapes": lambda: with_shapes(name, tmp_path / f"{name}.json", "mlp_fwd" if name == "mlp" else "sdpa_fwd",
                                          MLP_SHAPES if name == "mlp" else SDPA_SHAPES),
            "cpu": lambda: DATA_TRACES.parent / "lessons_cpu" / f"{name}.json.gz"}[kind]()
    text, allowed = _table_at_80(path)
    assert max(len(line) for line in text.splitlines()) <= 80
    cut = [w for w in text.split() if w not in allowed and set(w) != {"─"}]
    assert not cut, f"words cut at 80 columns: {cut}\n{text}"


# -- device_bound's figure for the matrix work (issue 36, item 4) -----------------------------------------------------

def test_device_bound_quotes_all_the_gemms_together(tmp_path):
    """With record_shapes the MLP's GEMMs are two roofline rows (gate and up, 6 calls; down, 3): "the matrix
    work ... runs at" quoted the top row's 675 TFLOP/s where the three GEMMs together ran at 698, the figure
    the same run gives without record_shapes. The sentence names all the matrix work: it quotes all of it."""
    from h100 import h100_trace
    from h100_recorded import MLP_SHAPES, with_shapes

    shaped = report_json(with_shapes("mlp", tmp_path / "mlp.json", "mlp_fwd", MLP_SHAPES))
    rows = shaped["roofline"]["rows"]
    assert [r["calls"] for r in rows] == [6, 3] and rows[0]["tflops"] < 680  # the top row alone: 675
    together = sum(r["flops"] * r["calls"] for r in rows) / sum(r["time_us"] for r in rows) / 1e6
    message = finding(shaped, "device_bound")["message"]
    assert f"runs at {together:.0f} TFLOP/s" in message and f"{rows[0]['tflops']:.0f} TFLOP/s" not in message
    plain = finding(report_json(h100_trace("mlp")), "device_bound")["message"]
    assert f"runs at {together:.0f} TFLOP/s" in plain  # the knobs' GEMMs row: the same figure
    assert "record_shapes=True" not in finding(shaped, "hotspot_op")["hint"]  # never advise what the run did
