"""What an expert reads first on a GPU run (issue 36, item 5), on the lessons' real H100 runs, each figure checked
against a count made here from the raw events: the memory-bound kernels' bandwidth (a lower bound, against the
card's), the GPU falling behind the host across the window, the GPU generation the attention kernels were
designed for, and the LLM's decode row of the roofline. An H200 is the same run with the H200's device
properties (no H200 trace is committed)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from h100 import H100, finding, h100_report, h100_trace

from common.report import analyze

H100_GBS, H200_GBS = 3350.0, 4800.0  # the H100 SXM's and the H200's datasheet memory bandwidth
SCORES = 8 * 16 * 1024 * 1024 * 2  # the attention lessons' [8, 16, 1024, 1024] bf16 scores, bytes
MASK = 1024 * 1024  # their [1024, 1024] bool causal mask


def _events(name: str) -> list:
    with gzip.open(h100_trace(name), "rt") as f:
        return json.load(f)["traceEvents"]


def _copy(name: str, dest: Path, *, h200: bool = False, work: dict | None = None) -> Path:
    """The H100 run ``name`` as an H200 ran it (its device's name and memory the H200's), and/or with the
    workload's own count (``lesson.work``, as today's lessons write it before profiling): edited as text, so
    that the LLM's 38 MB of JSON is not parsed and written again."""
    with gzip.open(h100_trace(name), "rt") as f:
        text = f.read()
    if h200:
        text = text.replace('"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85017493504',
                            '"name": "NVIDIA H200", "totalGlobalMem": 150754820096')
        assert "NVIDIA H200" in text
    if work is not None:
        text = text.replace('"lesson": {', '"lesson": {"work": ' + json.dumps(work) + ", ", 1)
    dest.write_text(text)
    return dest


def _rule(findings, rule: str):
    return next((f for f in findings if f.rule == rule), None)


# -- memory-bound kernels: bytes per second ------------------------------------------------------------------------


def _by_hand(name: str) -> dict:
    """GB/s of the naive attention's memory passes from the raw events: each kernel's (or the copy's) durations,
    the scores read and written once (the mask too for the fill; a DtoD copy its own bytes, read and written)."""
    kernels = {"masked_fill": ("masked_fill_kernel", 2 * SCORES + MASK), "softmax": ("softmax_warp_forward", 2 * SCORES),
               "mul": ("MulFunctor", 2 * SCORES)}
    out, every = {}, _events(name)
    launched = {e["args"]["correlation"] for e in every if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    # the profiled steps' own (a kernel the warm-up step launched may run in the first: its launch is not here)
    events = [e for e in every if e.get("cat") in ("kernel", "gpu_memcpy") and e["args"]["correlation"] in launched]
    for key, (part, nbytes) in kernels.items():
        durs = [e["dur"] for e in events if part in e["name"]]
        out[key] = len(durs) * nbytes / sum(durs) / 1e3
    copies = [e for e in events if e["name"].startswith("Memcpy DtoD")]
    if copies:
        out["copy"] = sum(2 * e["args"]["bytes"] for e in copies) / sum(e["dur"] for e in copies) / 1e3
    return out


def _rows(findings) -> dict:
    f = _rule(findings, "memory_bandwidth")
    assert f is not None
    short = {"aten::masked_fill_": "masked_fill", "aten::_softmax": "softmax", "aten::mul": "mul", "aten::copy_": "copy"}
    return {short[r["op"]]: r for r in f.evidence["rows"] if r["op"] in short}


@pytest.mark.parametrize("run", ["attn_naive", "attn_inplace"])
def test_memory_bound_kernels_show_their_bandwidth_a_lower_bound_against_the_cards(run):
    """The naive attention on the H100: masked_fill 1.37 TB/s (41 %), softmax 1.86 TB/s (55 %), mul and the DtoD
    copy about 3.0 TB/s (90 %): the scores' bytes read and written once (the lesson's knobs: the trace predates
    the workload's count) over each kernel's time, as the raw events give them."""
    findings = h100_report(run)[1]
    rows, hand = _rows(findings), _by_hand(run)
    assert set(rows) == {"masked_fill", "softmax", "mul"} | ({"copy"} if run == "attn_naive" else set())
    for key, row in rows.items():
        assert row["gb_per_s"] == pytest.approx(hand[key], rel=0.003), key
        assert row["pct_of_bandwidth"] == pytest.approx(100 * hand[key] / H100_GBS, abs=0.05), key
    assert rows["masked_fill"]["pct_of_bandwidth"] == pytest.approx(41, abs=0.5)
    assert rows["softmax"]["pct_of_bandwidth"] == pytest.approx(56, abs=0.5)
    assert rows["mul"]["pct_of_bandwidth"] == pytest.approx(89, abs=1)
    msg = _rule(findings, "memory_bandwidth").message
    assert "a lower bound" in msg and "against the H100 SXM's 3.35 TB/s" in msg and "by the lesson's knobs" in msg
    assert "1.38 TB/s, 41.1%" in msg and "2.99 TB/s, 89" in msg
    if run == "attn_naive":
        assert rows["copy"]["source"] == "copy" and "3.00 TB/s, 89.6%" in msg


def test_the_same_kernels_on_an_h200_move_the_same_bytes_per_second_against_its_bandwidth(tmp_path):
    h200 = _rows(analyze(_copy("attn_naive", tmp_path / "naive_h200.json", h200=True))[1])
    h100 = _rows(h100_report("attn_naive")[1])
    for key, row in h200.items():
        assert row["gb_per_s"] == h100[key]["gb_per_s"]
        assert row["pct_of_bandwidth"] == pytest.approx(100 * row["gb_per_s"] / H200_GBS, abs=0.01)


# the rows common/work.py writes for one call of 04_a's step() at the post's shape (fake tensors, before profiling)
NAIVE_COUNT = {"how": "fake tensors", "ops": [
    {"annotation": "attn_fwd", "op": "aten::bmm", "shapes": [[128, 1024, 64], [128, 64, 1024]], "dtype": "bf16",
     "calls": 1, "flops": 17179869184, "read": 33554432, "written": 268435456},
    {"annotation": "attn_fwd", "op": "aten::mul", "shapes": [[8, 16, 1024, 1024]], "dtype": "bf16", "calls": 1,
     "flops": 0, "read": 268435456, "written": 268435456},
    {"annotation": "attn_fwd", "op": "aten::masked_fill", "shapes": [[8, 16, 1024, 1024], [1024, 1024]],
     "dtype": "bf16", "calls": 1, "flops": 0, "read": 269484032, "written": 268435456},
    {"annotation": "attn_fwd", "op": "aten::_softmax", "shapes": [[8, 16, 1024, 1024]], "dtype": "bf16", "calls": 1,
     "flops": 0, "read": 268435456, "written": 268435456},
    {"annotation": "attn_fwd", "op": "aten::bmm", "shapes": [[128, 1024, 1024], [128, 1024, 64]], "dtype": "bf16",
     "calls": 1, "flops": 17179869184, "read": 285212672, "written": 16777216}]}


def test_the_workloads_own_count_gives_the_same_bytes(tmp_path):
    """A run that counted its work: the fill (aten::masked_fill_, run inside the aten::masked_fill the count lists)
    takes the out-of-place op's bytes; a count whose calls do not match the trace's gives no row."""
    rows = _rows(analyze(_copy("attn_naive", tmp_path / "counted.json", work=NAIVE_COUNT))[1])
    knobs = _rows(h100_report("attn_naive")[1])
    assert {k: (r["gb_per_s"], r["annotation"]) for k, r in rows.items() if k != "copy"} == \
        {k: (r["gb_per_s"], "attn_fwd") for k, r in knobs.items() if k != "copy"}
    assert {r["source"] for k, r in rows.items() if k != "copy"} == {"count"}
    twice = {**NAIVE_COUNT, "ops": [dict(r, calls=2) if r["op"] == "aten::mul" else r for r in NAIVE_COUNT["ops"]]}
    assert "mul" not in _rows(analyze(_copy("attn_naive", tmp_path / "twice.json", work=twice))[1])


SCORES_DIMS = [8, 16, 1024, 1024]
RECORDED = {  # what record_shapes writes on the naive forward's memory ops: Input Dims, Input type
    "aten::mul": ([SCORES_DIMS, []], ["c10::BFloat16", "Scalar"]),
    "aten::masked_fill": ([SCORES_DIMS, [1024, 1024], []], ["c10::BFloat16", "bool", "Scalar"]),
    "aten::clone": ([SCORES_DIMS, []], ["c10::BFloat16", ""]),
    "aten::copy_": ([SCORES_DIMS, SCORES_DIMS, []], ["c10::BFloat16", "c10::BFloat16", "Scalar"]),
    "aten::masked_fill_": ([SCORES_DIMS, [1024, 1024], []], ["c10::BFloat16", "bool", "Scalar"]),
    "aten::_softmax": ([SCORES_DIMS, [], []], ["c10::BFloat16", "Scalar", "Scalar"])}


def test_recorded_shapes_give_the_same_bytes(tmp_path):
    """With --record-shapes each op's own shapes give its bytes: the fill's (the innermost op around the kernel,
    aten::masked_fill_, read and written in place), the scale's and the softmax's, as the knobs do."""
    with gzip.open(h100_trace("attn_naive"), "rt") as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op" and e["name"] in RECORDED:
            e.setdefault("args", {}).update(zip(("Input Dims", "Input type"), RECORDED[e["name"]]))
    doc["lesson"]["record_shapes"] = True
    (dest := tmp_path / "shapes.json").write_text(json.dumps(doc))
    findings = analyze(dest)[1]
    rows, knobs = _rows(findings), _rows(h100_report("attn_naive")[1])
    assert {k: r["gb_per_s"] for k, r in rows.items()} == {k: r["gb_per_s"] for k, r in knobs.items()}
    assert {r["source"] for k, r in rows.items() if k != "copy"} == {"record_shapes"}
    assert "by the recorded shapes" in _rule(findings, "memory_bandwidth").message


# -- the GPU falling behind the host -------------------------------------------------------------------------------


def _lags_by_hand(name: str) -> tuple[float, list]:
    """From the raw events: at the window's start and at each host step's end, the latest end of the device work
    launched by then (by its runtime call's start), less that instant."""
    events = _events(name)
    calls = {e["args"]["correlation"]: e["ts"] for e in events
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    steps = sorted((e for e in events if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    first = min(calls)

    def behind(t):
        ends = [e["ts"] + e["dur"] for e in device if calls.get(e["args"]["correlation"], -1e300) <= t
                or e["args"]["correlation"] < first]
        return max(0.0, max(ends) - t)

    return behind(steps[0]["ts"]), [behind(s["ts"] + s["dur"]) for s in steps]


def test_the_gpu_falling_behind_the_host_is_said_at_the_windows_start_and_end():
    """SDPA's math backend: each step's device work (2.99 ms) outlasts the host's step (~0.8 ms): the lag grows
    step by step, 4.18 -> 6.39 -> 8.66 ms at the steps' ends, from 2.20 ms of work carried in at the window's start."""
    start, ends = _lags_by_hand("sdpa_math")
    f = finding("sdpa_math", "gpu_behind_host")
    ev = f.evidence
    assert ev["at_start_us"] == pytest.approx(start, abs=0.1) and ev["at_end_us"] == pytest.approx(ends[-1], abs=0.1)
    assert ev["at_step_ends_us"] == pytest.approx(ends, abs=0.1) and ev["growing"]
    assert ev["growth_us_per_step"] == pytest.approx((ends[-1] - ends[0]) / 2, abs=0.1)
    assert "2.20 ms behind at the window's start" in f.message and "8.66 ms behind at its end" in f.message
    assert "4.18 ms → 6.39 ms → 8.66 ms (+2.24 ms a step" in f.message
    t = h100_report("sdpa_math")[0]
    assert t.lag.said() == "the GPU was 2.20 ms behind the host at the window's start and 8.66 ms behind at its end"


@pytest.mark.parametrize("run", ["sdpa_flash", "sdpa_cudnn", "p1_64", "llm_default"])
def test_a_gpu_that_keeps_up_is_not_said_to_fall_behind(run):
    """Flash's last kernel ends ~57 µs after a ~130 µs host step: the GPU keeps the host's pace."""
    assert finding(run, "gpu_behind_host") is None and not h100_report(run)[0].lag.said()


# -- the GPU generation the kernels were designed for ----------------------------------------------------------------


def _kernel(name: str, part: str) -> dict:
    return next(e for e in _events(name) if e.get("cat") == "kernel" and part in e["name"])


def test_cudnn_is_the_sm90_design_flash_and_efficient_are_sm80_designs():
    """Why cuDNN wins on Hopper: its kernel is designed for sm90 (wgmma, a persistent grid of one 384-thread block
    per SM), the others are Ampere designs that issue mma.sync on an sm_90 card; each with the roofline's share."""
    cudnn = _kernel("sdpa_cudnn", "cudnn_generated")
    props = json.load(gzip.open(h100_trace("sdpa_cudnn"), "rt"))["deviceProperties"][0]
    assert cudnn["args"]["grid"] == [props["numSms"], 1, 1] and (props["computeMajor"], props["computeMinor"]) == (9, 0)
    f = finding("sdpa_cudnn", "kernel_arch")
    assert f.evidence["design"] == "sm90" and f.evidence["blocks"] == 132 and f.evidence["threads"] == 384
    assert "designed for this card's generation: sm90" in f.message and "wgmma tensor-core instructions" in f.message
    assert "132 blocks of 384 threads, one per SM of the 132" in f.message and "29.9% of the bf16 peak" in f.message
    for run, design, share in (("sdpa_flash", "as every FlashAttention-2 kernel", "18.4%"),
                               ("sdpa_efficient", "its name says so", "9.5%")):
        f = finding(run, "kernel_arch")
        assert f.evidence["design"] == "sm80" and f"an sm80 design ({design})" in f.message, run
        assert "Ampere's warp-level mma.sync, not Hopper's warpgroup MMA (wgmma)" in f.message, run
        assert f"{share} of the bf16 peak" in f.message and "CUDNN_ATTENTION" in f.hint, run
        assert "occupancy" not in f.message, run


@pytest.mark.parametrize("run", ["attn_naive", "p1_4096", "mlp", "sdpa_math", "llm_default"])
def test_no_architecture_point_where_the_trace_shows_none(run):
    """Hopper's own GEMMs (nvjet_sm90), fp32 FMA GEMMs (no tensor-core path to miss), and an LLM whose sm80 cuDNN
    decode kernels hold 5 % of the device time: nothing to say."""
    assert finding(run, "kernel_arch") is None


def test_an_h200_is_the_same_generation(tmp_path):
    f = _rule(analyze(_copy("sdpa_efficient", tmp_path / "eff_h200.json", h200=True))[1], "kernel_arch")
    assert f is not None and "running on NVIDIA H200 (sm_90)" in f.message


# -- the LLM's decode in the roofline ---------------------------------------------------------------------------------


def _llm_counted(tmp_path: Path, h200: bool = False):
    """llm_default with the count today's 05_llm.py writes for 1x128x32 (counts/llm_default.work.json.gz: the
    lesson's own count on fake tensors; the committed trace predates it, and without it has no roofline)."""
    with gzip.open(H100 / "counts" / "llm_default.work.json.gz", "rt") as f:
        work = json.load(f)
    return analyze(_copy("llm_default", tmp_path / f"llm{'_h200' if h200 else ''}.json", h200=h200, work=work))


def test_decode_is_memory_bound_on_any_card_with_its_achieved_bandwidth(tmp_path):
    """Decode's GEMMs read each weight once per token (1 FLOP/byte): memory-bound on any GPU, however far under the
    bandwidth its 2.5 µs kernels run (8.6 % of the H100's); prefill's (28 FLOP/byte, near neither roof) is not."""
    assert h100_report("llm_default")[0].roofline.rows == ()  # the committed run: no count, no shapes
    # the count's decode GEMMs are the default model's: 32 tokens x (4 layers of q, k, v, o, gate, up, down + lm_head)
    layer = 2 * (2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 688)
    decode_flops = 32 * (4 * layer + 2 * 256 * 32000)
    for h200, gbs in ((False, H100_GBS), (True, H200_GBS)):
        t, findings = _llm_counted(tmp_path, h200)
        rows = {j.row.shape.split(":")[0]: j for j in t.roofline.rows}
        decode, prefill = rows["decode"], rows["prefill"]
        assert decode.row.flops == decode_flops and decode.row.intensity < 1.0
        assert decode.bound == "memory" and prefill.bound is None
        assert decode.pct_of_bandwidth == pytest.approx(100 * decode.row.gbs / gbs)
        f = _rule(findings, "roofline")
        share = f"{decode.pct_of_bandwidth:.1f}% of the {gbs / 1e3:.2f} TB/s bandwidth"  # the datasheet's 3.35, 4.80
        assert f"memory-bound, moving its operation's bytes at {decode.row.gbs:.0f} GB/s, {share}" in f.message
        assert "neither roof is near" not in f.message
