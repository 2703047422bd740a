"""The roofline (common/report/facts/roofline.py): numbers equal a hand computation on synthetic GPU traces,
share of peak only where the datasheet peak is known, real CPU runs of Part 1 at two sizes, the plot
in the HTML page (and in Chromium)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (BIG_SIZE, CPU_DTYPE, CPU_DTYPE_BYTES, CPU_DTYPE_EMULATED, command_env, report_json, run_module,
                      trace_of)
from gpu_synth import H100_COPY, matmul_add
from h100 import h100_trace
from test_pictures import BROWSER, _chromium

from common.report.model.peaks import peak_of

H100_BF16_TFLOPS, H100_GBS = 989.5, 3350.0  # NVIDIA H100 Tensor Core GPU datasheet (SXM): 1,979 sparse / 2; 3.35 TB/s


def _h100_trace(path: Path, size: int, gemm_us: float, gpu: str = H100_COPY.gpu) -> Path:
    """01_matmul_add eager on an H100, 3 steps, its aten::mm recorded with record_shapes (bf16)."""
    doc = matmul_add(H100_COPY, gemm_us=gemm_us)
    doc["deviceProperties"][0]["name"] = gpu
    for e in doc["traceEvents"]:
        if e["name"] == "aten::mm":
            e["args"] = {"Input Dims": [[size, size], [size, size]], "Input type": ["c10::BFloat16"] * 2}
    path.write_text(json.dumps(doc))
    return path


def _roofline(path: Path) -> tuple[dict, dict]:
    report = report_json(path)
    finding = next(f for f in report["findings"] if f["rule"] == "roofline")
    return report["roofline"], finding


def test_h100_numbers_equal_the_hand_computation(tmp_path):
    roof, finding = _roofline(_h100_trace(tmp_path / "big.json", 4096, 200.0))
    row = roof["rows"][0]
    flops = 2 * 4096 * 4096 * 4096  # 2·M·N·K
    nbytes = 3 * 4096 * 4096 * 2  # A, B read once, C written once, bf16
    tflops = flops / 200e-6 / 1e12  # per call: 200 µs of kernel
    assert (row["op"], row["dtype"], row["calls"]) == ("aten::mm", "bf16", 3)
    assert (row["flops"], row["bytes"]) == (flops, nbytes)
    assert row["time_us"] == pytest.approx(600.0)
    assert row["intensity"] == pytest.approx(flops / nbytes, abs=1e-3)  # 1365.333 FLOP/byte
    assert row["tflops"] == pytest.approx(tflops, abs=1e-3)  # 687.195
    assert row["gb_per_s"] == pytest.approx(nbytes / 200e-6 / 1e9, abs=1e-3)  # 503.316
    assert row["peak_tflops"] == H100_BF16_TFLOPS and roof["peak"]["memory_gbs"] == H100_GBS
    assert row["pct_of_peak"] == pytest.approx(100 * tflops / H100_BF16_TFLOPS, abs=1e-3)  # 69.449
    assert row["ridge"] == pytest.approx(H100_BF16_TFLOPS * 1e12 / (H100_GBS * 1e9), abs=1e-3)  # 295.373
    assert row["bound"] == "compute"
    assert "69.4% of the bf16 peak" in finding["message"] and "compute roof" in finding["message"]


def test_part1_headline_size_64_is_a_tiny_share_4096_a_large_one(tmp_path):
    small, finding = _roofline(_h100_trace(tmp_path / "small.json", 64, 5.0))
    big, _ = _roofline(_h100_trace(tmp_path / "big.json", 4096, 200.0))
    s, b = small["rows"][0], big["rows"][0]
    tflops = 2 * 64 ** 3 / 5e-6 / 1e12  # 0.105 TFLOP/s
    assert s["pct_of_peak"] == pytest.approx(100 * tflops / H100_BF16_TFLOPS, abs=1e-3)  # 0.011%
    assert s["pct_of_peak"] < 0.1 < 50 < b["pct_of_peak"]
    # below the ridge, but at 0.15 % of the memory roof: bound by neither roof (issue 36): the dispatch holds it
    assert s["intensity"] == pytest.approx(2 * 64 ** 3 / (3 * 64 * 64 * 2), abs=1e-3) and s["bound"] is None
    roof = 2 * 64 ** 3 / (3 * 64 * 64 * 2) * H100_GBS / 1e3  # the memory roof at its intensity, TFLOP/s
    assert s["roof_tflops"] == pytest.approx(roof, abs=1e-3)
    assert s["pct_of_roof"] == pytest.approx(100 * tflops / roof, abs=1e-3)
    assert "neither roof is near" in finding["message"] and "overhead-bound" in finding["hint"]


def test_unknown_gpu_gets_rates_and_no_share(tmp_path):
    roof, finding = _roofline(_h100_trace(tmp_path / "x.json", 4096, 200.0, gpu="NVIDIA Imaginary X1"))
    row = roof["rows"][0]
    assert roof["peak"] is None and row["pct_of_peak"] is None and row["bound"] is None
    assert row["tflops"] == pytest.approx(2 * 4096 ** 3 / 200e-6 / 1e12, abs=1e-3)
    assert "cannot tell" in finding["message"] and "%" not in finding["message"]


def test_causal_sdpa_counts_half_the_two_gemms(tmp_path):
    """A flash SDPA call with is_causal True in Concrete Inputs: 4·B·H·S·S·D / 2."""
    doc = matmul_add(H100_COPY, gemm_us=100.0)
    b, h, s, d = 2, 8, 1024, 64
    for e in doc["traceEvents"]:
        if e["name"] == "aten::mm":
            e["name"] = "aten::_scaled_dot_product_flash_attention"
            e["args"] = {"Input Dims": [[b, h, s, d]] * 3 + [[], [], [], []],
                         "Input type": ["c10::BFloat16"] * 3 + ["Scalar", "Scalar", "Scalar", ""],
                         "Concrete Inputs": ["", "", "", "0.", "True", "False", ""]}
    path = tmp_path / "sdpa.json"
    path.write_text(json.dumps(doc))
    row = report_json(path)["roofline"]["rows"][0]
    assert row["causal"] is True and row["flops"] == 4 * b * h * s * s * d // 2
    assert row["bytes"] == 4 * b * h * s * d * 2  # q, k, v read, out written: no [s, s] scores


def test_datasheet_table_matches_names_word_by_word():
    assert peak_of("NVIDIA L4").device == "L4" and peak_of("NVIDIA L40S").device == "L40S"
    assert peak_of("NVIDIA A100-SXM4-80GB").memory_gbs == 2039.0
    assert peak_of("NVIDIA A100-PG509-200").memory_gbs is None  # a variant: compute known, memory not
    assert peak_of("Tesla V100-SXM2-32GB").bf16 is None  # no bf16 tensor cores
    assert peak_of("NVIDIA A10G") is None and peak_of("AMD Instinct MI250X") is None


def test_cpu_run_with_record_shapes_exact_arithmetic_and_no_peak(runs):
    """01 --size 16 --dtype fp32 --record-shapes on the CPU: FLOPs and bytes exact, rates, no share."""
    roof, finding = _roofline(trace_of(runs["01_gzip"]))
    row = roof["rows"][0]
    assert (row["op"], row["dtype"], row["flops"], row["bytes"]) == ("aten::mm", "fp32", 2 * 16 ** 3, 3 * 16 * 16 * 4)
    assert roof["timed_on"] == "cpu" and roof["peak"] is None and row["pct_of_peak"] is None
    assert row["gflops"] > 0 and "the CPU has no peak to set it against" in finding["message"]
    assert "peak unknown" in roof["note"]  # said once, under the roofline table, not in every finding (issue 37)


def _said_too_busy(path: Path) -> bool:
    """Whether the report says the run's matmuls ran slower than any CPU multiplies matrices: a machine so busy
    that time slices landed inside the ops, so no share of a step is the op's own. Then it calls the run
    neither overhead- nor compute-bound."""
    found = {f["rule"]: f for f in report_json(path)["findings"]}
    busy = "far slower than any CPU multiplies matrices" in found.get("noisy_steps", {}).get("message", "")
    assert not (busy and {"overhead_bound", "compute_bound"} & found.keys()), sorted(found)
    return busy


def test_cpu_steps_rate_rises_with_size(runs):
    """Part 1 on the CPU (lesson's knobs, no record_shapes): the matmul's own rate barely moves with size,
    the steps' rate does: at 64 the dispatch around the op costs much of the step, at 2048 almost none
    (unless the machine was so busy that the report says it cannot tell: then so does this test)."""
    small, _ = _roofline(trace_of(runs["01_warm"]))
    big, _ = _roofline(trace_of(runs["01_2048"]))
    if _said_too_busy(trace_of(runs["01_warm"])) or _said_too_busy(trace_of(runs["01_2048"])):
        return  # a loaded run: the report said it cannot tell, and judged neither
    assert small["source"] == big["source"] == "count"  # the lesson counted its own work
    assert small["rows"][0]["flops"] == 2 * 64 ** 3 and big["rows"][0]["flops"] == 2 * BIG_SIZE ** 3
    (s_op, b_op), (s_step, b_step) = (small["rows"][0]["gflops"], big["rows"][0]["gflops"]), (
        small["step_gflops"], big["step_gflops"])
    # the share of the step that is the matmul's own work: much smaller at 64 than at 2048 (at 2048 the add's
    # pass over 4M elements and the dispatch are a few percent; a loaded machine moves both runs, not the order)
    s_share, b_share = s_step / s_op, b_step / b_op
    assert s_share < 0.8 and b_share > s_share, (s_op, s_step, b_op, b_step)
    # the steps' rate rises with the size, where the dtype runs at speed (an emulated bf16 matmul of 512 computes
    # slower per FLOP than one of 64: 0.6 against 2.4 GFLOP/s)
    assert b_step > s_step or CPU_DTYPE_EMULATED, (s_op, s_step, b_op, b_step)
    row = small["rows"][0]
    assert row["dtype"] == CPU_DTYPE and row["bytes"] == 3 * 64 * 64 * CPU_DTYPE_BYTES  # x, w, out
    text = run_module("common.report", trace_of(runs["01_warm"]), env=command_env(COLUMNS="120")).stdout
    assert re.search(r"GEMMs +mm ", text)  # the count's GEMMs, by op (their shapes: the finding and the JSON)


def _page(tmp_path: Path) -> Path:
    out = tmp_path / "roofline.html"
    proc = run_module("common.report", _h100_trace(tmp_path / "t.json", 4096, 200.0), "--html", out)
    assert proc.returncode == 0, proc.stderr
    return out


def test_page_has_the_roofline_plot_with_its_roofs(tmp_path):
    text = _page(tmp_path).read_text()
    data = json.loads(re.search(r'<figure id="roofline" data-plot="([^"]*)"', text).group(1).replace("&quot;", '"'))
    assert data["roofs"] == [dict(unit="bf16", peak_tflops=H100_BF16_TFLOPS, memory_gbs=H100_GBS)]
    assert data["points"][0]["pct_of_peak"] == pytest.approx(100 * 2 * 4096 ** 3 / 200e-6 / 1e12 / H100_BF16_TFLOPS,
                                                            abs=1e-3)
    assert 'id="roofline-point-0"' in text and 'id="roofline-table"' in text


HARNESS = """<!doctype html><html><body><iframe id="f" src="{page}" width="1100" height="900"></iframe>
<pre id="out">pending</pre><script>
document.getElementById("f").onload = () => {{
  const d = document.getElementById("f").contentDocument;
  const box = e => {{ const r = e.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; }};
  document.getElementById("out").textContent = "ROOF " + JSON.stringify(
    [box(d.querySelector("#roofline svg")), box(d.getElementById("roofline-point-0"))]);
}};
</script></body></html>"""


@pytest.mark.usefixtures("chromium")  # skips without Chromium, fails in CI
def test_roofline_plot_in_a_real_browser(tmp_path):
    page = _page(tmp_path)
    harness = tmp_path / "harness.html"
    harness.write_text(HARNESS.format(page=page.name))
    proc = _chromium("--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom",
                     harness.as_uri(), profile=tmp_path / "p")
    (svg_w, svg_h), (dot_w, dot_h) = json.loads(re.search(r"ROOF (\[.*?\])</pre>", proc.stdout).group(1))
    assert svg_w > 300 and svg_h > 150 and dot_w > 0 and dot_h > 0


# ----------------------------------------------------------------------------- backward attention, fp8 GEMMs


def _one_op_trace(path: Path, op: str, dims: list, types: list, concrete: list, kernel_us: float = 100.0) -> Path:
    """The H100 matmul_add trace with its aten::mm renamed ``op``, its record_shapes given."""
    doc = matmul_add(H100_COPY, gemm_us=kernel_us)
    for e in doc["traceEvents"]:
        if e["name"] == "aten::mm":
            e["name"] = op
            e["args"] = {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete}
    path.write_text(json.dumps(doc))
    return path


def test_flash_backward_counts_five_gemms(tmp_path):
    """aten::_scaled_dot_product_flash_attention_backward(grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k,
    max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, scale), causal: FlashAttention's backward
    recomputes q·kᵀ and does dV, dP, dQ, dK: 5 GEMMs of 2·B·H·S·S·D, halved, 2.5x the forward's 2."""
    b, h, s, d = 2, 8, 1024, 64
    bhsd = [b, h, s, d]
    dims = [bhsd] * 5 + [[b, h, s], [], [], [], [], [], [], [], [], []]
    types = ["c10::BFloat16"] * 5 + ["float", "", "", "Scalar", "Scalar", "Scalar", "Scalar", "", "", ""]
    concrete = [""] * 10 + ["0.", "True", "", "", ""]
    path = _one_op_trace(tmp_path / "bwd.json", "aten::_scaled_dot_product_flash_attention_backward", dims, types,
                         concrete)
    row = report_json(path)["roofline"]["rows"][0]
    forward = 4 * b * h * s * s * d // 2  # test_causal_sdpa_counts_half_the_two_gemms's figure
    assert row["causal"] is True and row["flops"] == 5 * 2 * b * h * s * s * d // 2 == 2.5 * forward
    # read grad_out, q, k, v, out (bf16) and the logsumexp (fp32); write dq, dk, dv (bf16)
    assert row["bytes"] == (5 + 3) * b * h * s * d * 2 + b * h * s * 4
    assert row["tflops"] == pytest.approx(row["flops"] / 100e-6 / 1e12, abs=1e-3)
    assert row["shape"].endswith("causal backward") and row["dtype"] == "bf16"


def test_efficient_backward_kernel_layout_and_value_dim(tmp_path):
    """aten::_efficient_attention_backward takes [batch, seq, heads, dim] and a custom_mask_type (0: none);
    with a value dim Dv unlike D, the five GEMMs are 3 of D (S, dQ, dK) and 2 of Dv (dV, dP)."""
    b, s, h, d, dv = 1, 512, 4, 64, 128
    q, o = [b, s, h, d], [b, s, h, dv]
    dims = [o, q, q, o, [], o, [], [], [], [], [b, h, s], [], [], [], [], []]
    types = ["c10::Half"] * 4 + [""] + ["c10::Half"] + [""] * 4 + ["float"] + ["Scalar", "", "", "Scalar", "Scalar"]
    concrete = [""] * 14 + ["0", "False"]
    path = _one_op_trace(tmp_path / "eff.json", "aten::_efficient_attention_backward", dims, types, concrete)
    row = report_json(path)["roofline"]["rows"][0]
    assert row["causal"] is False and row["flops"] == 2 * b * h * s * s * (3 * d + 2 * dv)
    reads = 2 * b * s * h * dv + 2 * b * s * h * d + b * s * h * dv  # grad_out, out; q, k; v
    writes = 2 * b * s * h * d + b * s * h * dv  # dq, dk; dv
    assert row["bytes"] == 2 * (reads + writes) + 4 * b * h * s and row["dtype"] == "fp16"


@pytest.mark.parametrize("out_dtype, out_size", [("15", 2), ("6", 4), ("", 1)])  # bf16, fp32, the inputs' fp8
def test_scaled_mm_bytes_fp8_inputs_and_the_out_dtype(tmp_path, out_dtype, out_size):
    """aten::_scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum): fp8 inputs at
    1 byte an element, per-row scales at fp32, the output at out_dtype (Concrete Inputs, c10's enum number)."""
    m, k, n = 4096, 8192, 2048
    dims = [[m, k], [k, n], [m, 1], [1, n], [], [], [], []]
    types = ["c10::Float8_e4m3fn"] * 2 + ["float", "float", "", "", "Scalar", "Scalar"]
    concrete = ["", "", "", "", "", "", out_dtype, "False"]
    row = report_json(_one_op_trace(tmp_path / "fp8.json", "aten::_scaled_mm", dims, types, concrete))["roofline"][
        "rows"][0]
    assert (row["flops"], row["dtype"]) == (2 * m * n * k, "fp8")
    assert row["bytes"] == m * k + k * n + 4 * (m + n) + out_size * m * n
    assert row["intensity"] == pytest.approx(2 * m * n * k / row["bytes"], abs=1e-3)


SDPA_BACKWARD_AND_FP8 = """
import sys, torch
from torch.profiler import profile, schedule
torch.manual_seed(0)
q = torch.randn(2, 4, 128, 32, requires_grad=True)
a = torch.randn(64, 96).to(torch.float8_e4m3fn)
b = torch.randn(48, 96).to(torch.float8_e4m3fn).t()
one = torch.tensor(1.0)
with profile(record_shapes=True, schedule=schedule(wait=0, warmup=1, active=1),
             on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as prof:
    for _ in range(2):
        torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
        torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16)
        prof.step()
"""


def test_cpu_sdpa_backward_and_scaled_mm_from_a_real_trace(tmp_path):
    """A real CPU trace (torch's own record_shapes): the fused CPU attention's backward counts 2.5x its
    forward; the fp8 _scaled_mm, emulated on the CPU, counts once, as the fp32 matmul under it."""
    script, trace = tmp_path / "bwd.py", tmp_path / "bwd.json"
    script.write_text(SDPA_BACKWARD_AND_FP8)
    proc = subprocess.run([sys.executable, str(script), str(trace)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-500:]
    rows = {r["op"]: r for r in report_json(trace)["roofline"]["rows"]}
    forward = rows["aten::_scaled_dot_product_flash_attention_for_cpu"]
    backward = rows["aten::_scaled_dot_product_flash_attention_for_cpu_backward"]
    assert forward["causal"] is backward["causal"] is True
    assert forward["flops"] == 4 * 2 * 4 * 128 * 128 * 32 // 2 and backward["flops"] == 2.5 * forward["flops"]
    assert backward["bytes"] == 8 * 2 * 4 * 128 * 32 * 4 + 2 * 4 * 128 * 4  # fp32: 5 read, 3 written; logsumexp
    # the CPU emulates fp8: _scaled_mm upcasts and calls an fp32 aten::mm, which carries the count (once)
    assert "aten::_scaled_mm" not in rows and rows["aten::mm"]["shape"] == "64x96 @ 96x48"


# ----------------------------------------------------------------------------- issue 36, item 1: one bound, both cards


def on_h200(name: str, dest: Path) -> Path:
    """The H100 run ``name`` as if it ran on an H200 (its deviceProperties renamed, 141 GB): the same kernels
    at the same times, against the H200's roofs (bandwidth 4.8 TB/s: ridge 206 FLOP/byte, the H100's 295)."""
    import gzip

    with gzip.open(h100_trace(name), "rt") as f:
        doc = json.load(f)
    for props in doc["deviceProperties"]:
        props["name"], props["totalGlobalMem"] = "NVIDIA H200", 150_754_820_096
    with gzip.open(dest, "wt") as f:
        json.dump(doc, f)
    return dest


@pytest.mark.parametrize("run", ["sdpa_efficient", "attn_naive", "mlp"])
def test_the_same_kernels_read_the_same_on_an_h100_and_an_h200(run, tmp_path):
    """The attention forward's 256 FLOP/byte lies between the two ridges (H100 295, H200 206): the label
    followed the side of the ridge, "memory" on one card and "compute" on the other. A row is bound by the
    roof its measured rate comes near; far under both it is bound by neither, on both cards, and
    device_bound says the same of the same row."""
    h100, h200 = report_json(h100_trace(run)), report_json(on_h200(run, tmp_path / f"{run}_h200.json.gz"))
    for report in (h100, h200):
        rules = {f["rule"]: f for f in report["findings"]}
        top = report["roofline"]["rows"][0]
        if run == "mlp":  # 70 % of the compute peak on both cards
            assert top["bound"] == "compute" and "its kernels are compute-bound" in rules["device_bound"]["message"]
            continue
        assert top["bound"] is None and "neither roof is near" in rules["roofline"]["message"]
        if run == "sdpa_efficient":  # one fused kernel: device_bound says the roofline's words
            assert "which roof bounds its kernels: cannot tell (it reaches 9.5% of the bf16 compute peak" in \
                rules["device_bound"]["message"] and "neither roof is near" in rules["device_bound"]["message"]
        else:  # the naive's kernels are mostly memory work: device_bound says so, and the roofline's hint points there
            assert "its kernels are memory-bandwidth-bound: 82% of the device time is memory work" in \
                rules["device_bound"]["message"]
            assert "the step's kernels are mostly memory work (82% of the device time" in rules["roofline"]["hint"]
    assert h200["roofline"]["rows"][0]["ridge"] < 256 < h100["roofline"]["rows"][0]["ridge"] or run == "mlp"
