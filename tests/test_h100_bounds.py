"""What bounds the GPU work, read on the lessons' real H100 runs (tests/data/h100/runs): the regime
(device-bound or not, compute roof or memory roof), the roofline from the lesson's knobs, one FLOP
count per operation, the footprint occupancy against Nsight Compute (tests/data/h100/ORACLE.md),
and the HTA figures against HolisticTraceAnalysis 0.5.0 itself."""

from __future__ import annotations

import re
import shutil

import pytest

from h100 import h100_report, h100_trace

# HolisticTraceAnalysis 0.5.0, TraceAnalysis(trace_dir, include_last_profiler_step=True)
# .get_temporal_breakdown() on these traces (run here with `uv run --with holistictraceanalysis==0.5.0`;
# HTA's own assertion fails on p1_4096 and attn_inplace, so they are not in this table)
HTA_TEMPORAL = {"attn_naive": dict(span=3816.0, idle=51.0, idle_pct=1.34, compute=3233.0),
                "sdpa_flash": dict(span=379.0, idle=98.0, idle_pct=25.86, compute=281.0)}

# tests/data/h100/ORACLE.md: Nsight Compute's theoretical occupancy of the fused attention kernels
ORACLE_THEORETICAL = {"sdpa_flash": ("pytorch_flash::flash_fwd_kernel", 12.5),
                      "sdpa_efficient": ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80", 25.0),
                      "sdpa_cudnn": ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop", 18.75)}


def _kernel(run: str, starts: str):
    tables, _ = h100_report(run)
    return next(k for k in tables.kernels if k.name.removeprefix("void ").startswith(starts))


@pytest.mark.parametrize("run", sorted(HTA_TEMPORAL))
def test_hta_figures_are_htas(run):
    """The headline's HTA figures are HTA's temporal breakdown to its microsecond: the warm-up step's
    kernels (launched before the trace) are not in its span, and each event is rounded as HTA rounds."""
    g = h100_report(run)[0].numbers.gpu
    want = HTA_TEMPORAL[run]
    assert (g.span_us, g.idle_us, round(g.idle_pct, 2), g.compute_us) == (
        want["span"], want["idle"], want["idle_pct"], want["compute"])


def test_hta_figures_agree_with_hta_itself(tmp_path):
    """Where HTA is installed (`uv run --with holistictraceanalysis==0.5.0 pytest ...`), ask it."""
    hta = pytest.importorskip("hta.trace_analysis")
    for run in HTA_TEMPORAL:
        folder = tmp_path / run
        folder.mkdir()
        shutil.copy(h100_trace(run), folder)  # HTA reads every trace in a folder
        theirs = hta.TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True) \
            .get_temporal_breakdown(visualize=False).iloc[0]
        g = h100_report(run)[0].numbers.gpu
        assert g.span_us == float(theirs["kernel_time(us)"]) and g.idle_us == float(theirs["idle_time(us)"])
        assert round(g.idle_pct, 2) == float(theirs["idle_time_pctg"])


@pytest.mark.parametrize("run", sorted(ORACLE_THEORETICAL))
def test_footprint_occupancy_is_nsight_computes(run):
    """The footprint's theoretical occupancy is Nsight Compute's (within a point), also where Kineto
    reads 0 (cuDNN: 134 KB of shared memory per block, over Kineto's 48 KB default limit)."""
    name, theoretical = ORACLE_THEORETICAL[run]
    k = _kernel(run, name)
    assert abs(k.footprint_occupancy_pct - theoretical) < 1.0
    assert k.kineto_shared_limit == (run == "sdpa_cudnn")
    if run == "sdpa_cudnn":
        assert k.est_achieved_occupancy_pct == 0


def test_nvjet_gemm_footprint_and_why_kineto_reads_zero():
    """The nvjet GEMM of p1_4096 (168 registers x 384 threads, 213,188 B of shared memory per block):
    one block per SM by registers and by shared memory, 12 of 64 warps = 18.75 %, the footprint that
    ORACLE.md's cuDNN kernel (168 x 384, one block) has under Nsight Compute. Kineto reads 0; the table's
    caption says why."""
    k = _kernel("p1_4096", "nvjet_sm90")
    assert abs(k.footprint_occupancy_pct - 18.75) < 1.0 and k.est_achieved_occupancy_pct == 0
    assert k.kineto_shared_limit
    from common.report.facts.occupancy import occupancy_caption

    caption = occupancy_caption(h100_report("p1_4096")[0].kernels)
    assert "read 0 % from Kineto with a footprint of 18.75 %" in caption and "48 KB" in caption


# ----------------------------------------------------------------------------- the regime


def _finding(run: str, rule: str):
    return next((f for f in h100_report(run)[1] if f.rule == rule), None)


def _row(run: str, op_words: str):
    tables, _ = h100_report(run)
    return next(j for j in tables.roofline.rows if op_words in j.row.op)


@pytest.mark.parametrize("run", ["attn_naive", "attn_inplace"])
def test_naive_attention_is_memory_bound_from_the_knobs(run):
    """The hand-written attention keeps the GPU busy (device time per step over twice the host's) and is
    memory-bandwidth-bound: most of its device time is copies, elementwise and softmax work over the
    [seq, seq] scores, and its two bmm have 57 FLOP/byte by the knobs' shapes (under the bf16 ridge, 295),
    at about 80% of the 3.35 TB/s. Never "compute-bound", never told to try bf16 (it is bf16)."""
    f = _finding(run, "device_bound")
    assert f is not None and f.message.startswith("device-bound") and "memory-bandwidth-bound" in f.message
    assert f.evidence["kernels_bound"] == "memory" and f.evidence["memory_pct"] > 70
    assert _finding(run, "compute_bound") is None
    gemms = _row(run, "GEMMs")
    assert gemms.row.bytes == 2 * 2 * (2 * 128 * 1024 * 64 + 128 * 1024 * 1024)  # two bmm, bf16, per step
    assert gemms.bound == "memory" and round(gemms.row.intensity) == 57 and 75 < gemms.pct_of_bandwidth < 85
    assert "cannot tell without its bytes" not in _finding(run, "roofline").message


def test_p1_4096_is_device_bound_and_compute_bound():
    """P1.4's headline: the GPU sets the pace and the GEMM (4096³, 1,365 FLOP/byte, above the ridge) runs
    at about 775 TFLOP/s, 78% of the bf16 peak: compute-bound, said with the numbers."""
    f = _finding("p1_4096", "device_bound")
    assert f is not None and f.message.startswith("device-bound") and "compute-bound" in f.message
    assert f.evidence["kernels_bound"] == "compute"
    gemms = _row("p1_4096", "GEMMs")
    assert gemms.bound == "compute" and gemms.row.intensity > gemms.ridge and 70 < gemms.pct_of_peak < 85
    assert "lower precision" not in f.hint and "bf16/fp16" not in f.hint


def test_math_backend_gemms_meet_the_fp32_roof():
    """SDPA's math backend runs the bf16 inputs as fp32 GEMMs (sm80_xmma_gemm_f32f32..._ffma): they are held
    to the fp32 CUDA-core peak (67 TFLOP/s), not bf16's 989.5, where they reach about half of it."""
    gemms = _row("sdpa_math", "GEMMs")
    assert gemms.row.dtype == "fp32" and gemms.peak_unit == "fp32" and gemms.peak_tflops == 67.0
    assert 45 < gemms.pct_of_peak < 60 and gemms.row.bytes == 2 * 4 * (2 * 128 * 1024 * 64 + 128 * 1024 * 1024)


ATTENTION_RUNS = ("attn_naive", "attn_inplace", "sdpa_math", "sdpa_efficient", "sdpa_flash", "sdpa_cudnn")


def test_one_flop_count_for_every_attention_variant():
    """The same causal attention counts the same FLOPs whatever ran it (2·B·H·S²·D = 17.2 GFLOP at the
    post's shape), over the step's device time: the rates rank the variants as their device times do."""
    rows = {run: _row(run, "attention forward") for run in ATTENTION_RUNS}
    assert {j.row.flops for j in rows.values()} == {2 * 8 * 16 * 1024 * 1024 * 64}
    by_rate = sorted(ATTENTION_RUNS, key=lambda run: -rows[run].row.tflops)
    by_time = sorted(ATTENTION_RUNS, key=lambda run: h100_report(run)[0].regime.device_us)
    assert by_rate == by_time
    assert by_rate[0] == "sdpa_cudnn" and by_rate.index("sdpa_efficient") < by_rate.index("attn_naive")


def test_no_dtype_advice_to_a_bf16_run():
    from h100 import RUN_NAMES

    for run in RUN_NAMES:
        tables, findings = h100_report(run)
        if tables.knobs is not None and tables.knobs.dtype == "bf16":
            for f in findings:
                assert "lower precision" not in f.hint and "bf16/fp16" not in f.hint, (run, f.rule, f.hint)


# ----------------------------------------------------------------------------- hints that fit the run


def test_an_idle_gpus_hotspot_kernel_is_not_where_to_start():
    assert "start optimising" not in _finding("p1_64", "hotspot_kernel").hint
    assert "start optimising" in _finding("attn_naive", "hotspot_kernel").hint  # memory work, the GPU busy
    assert "start optimising" not in _finding("p1_4096", "hotspot_kernel").hint  # a GEMM at 78% of its roof (issue 36)


@pytest.mark.parametrize("run", ["mlp", "mlp_compile", "liger"])
def test_the_mlps_gemm_reads_the_same_at_69_and_71_percent_of_its_roof(run):
    """The three MLP runs share their GEMM kernels (the same nvjet names, 57-59 µs), compute-bound at 69-71% of
    the bf16 roof beside device_bound's "the arithmetic is the cost": mlp's read "little left to win" and
    mlp_compile's and liger's (69.2%, 69.3%) "start optimising there", across a 70% threshold."""
    hint = _finding(run, "hotspot_kernel").hint
    assert "start optimising there" not in hint and "the arithmetic is the cost" in _finding(run, "device_bound").hint
    assert re.match(r"the matrix work it belongs to already runs at (69|71)% of its roof \(device_bound\): a faster "
                    r"kernel for this shape could win 1\.4[24]x at most", hint), hint


def test_an_overhead_bound_run_whose_kernel_fills_the_gpu_is_not_called_too_small():
    """cuDNN's attention kernel runs one block per SM for 57 µs: the roofline's rate, over kernel time, is not
    low because calls are too small (the host's dispatch is not in it); a 64x64 GEMM's 2 µs kernel is."""
    assert "too small" not in _finding("sdpa_cudnn", "roofline").hint
    assert "its kernels fill the SMs (100% SM efficiency" in _finding("sdpa_cudnn", "roofline").hint
    assert "each call is too small to keep the GPU busy" in _finding("p1_64", "roofline").hint
    assert "each call is too small to keep the GPU busy" in _finding("linear", "roofline").hint  # 2.5 µs a call


def test_no_fusion_advice_to_one_fused_kernel_per_step():
    f = _finding("sdpa_cudnn", "overhead_bound")
    assert f is not None and "fuse ops" not in f.hint and "torch.compile)" not in f.hint
    assert "fuse ops" in _finding("p1_64", "overhead_bound").hint  # matmul + add: two kernels a step


def test_bmm_hint_claims_no_shared_weights():
    assert "weights are shared" not in _finding("attn_naive", "matmul_dispatch").hint


def test_plain_launches_are_not_called_light_where_gemms_are_among_them():
    f = _finding("p1_64_active20", "occupancy_query")
    assert "plain ones are light" not in f.hint and "19 GEMM launch(es) here had no query" in f.hint


# ----------------------------------------------------------------------------- on the CPU: the same conventions


def test_sdpa_backends_count_the_same_flops(attention_runs):
    """04_c's knobs and the report's rate count the same causal attention alike whatever the backend
    (flash used to count half of auto's, which runs the very same op). The session's runs (2x4x256x64)."""
    import json

    from common.report import analyze
    from conftest import trace_of

    flops, rows = {}, {}
    for backend in ("flash", "auto", "math"):
        trace = trace_of(attention_runs[backend])
        with open(trace) as fh:
            flops[backend] = json.load(fh)["lesson"]["matmul_flops_per_step"]
        tables, _ = analyze(trace)
        rows[backend] = next(j.row for j in tables.roofline.rows if j.row.op.startswith("attention forward"))
    assert set(flops.values()) == {2 * 2 * 4 * 256 * 256 * 64}
    assert {r.flops for r in rows.values()} == {2 * 2 * 4 * 256 * 256 * 64}


def test_cpu_overhead_bound_says_its_threshold(tmp_path):
    from common.report import analyze
    from test_report_cpu_rules import matmul_add_trace

    found = {f.rule: f for f in analyze(matmul_add_trace(tmp_path, "small.json", step_us=[60] * 3, mm_us=[20] * 3))[1]}
    assert "under 75%" in found["overhead_bound"].message and "from 90% it is compute-bound" in found["overhead_bound"].message


def test_htas_rounding_is_named_where_it_moves_busy_time():
    """linear's kernels last 2.6 µs: HTA's rounding to whole µs halves their busy time, so the headline
    gives the unrounded figure beside HTA's; on attn_naive (ms kernels) it says nothing more."""
    from common.report.render.text import headline_lines

    linear, naive = (headline_lines(h100_report(run)[0])[0] for run in ("linear", "attn_naive"))
    g = h100_report("linear")[0].numbers.gpu
    assert g.busy_us < 0.6 * g.busy_exact_us and "unrounded: busy 7.7 µs" in linear
    assert "unrounded" not in naive


def test_tensorboards_zero_occupancy_is_explained():
    from common.report.render.text import headline_lines

    lines = " ".join(headline_lines(h100_report("linear")[0]))
    assert "Est. achieved occupancy 0.00% (Kineto reads 0 for kernels over 48 KB" in lines


def test_one_matmul_rate_per_report(tmp_path):
    """02's matmul gets one rate: the regime's "the matmul arithmetic ran at" is the roofline's own (it
    once read 42.4 GFLOP/s over addmm's self time beside the roofline's 30.1 over its whole time)."""
    import re

    from common.report import analyze
    from conftest import run_script

    run = run_script("02_linear.py", "--no-report", trace_dir=tmp_path)
    assert run.returncode == 0, run.stderr
    (trace,) = sorted(tmp_path.glob("*.json*"))
    tables, findings = analyze(trace)
    from common.report.rates import fmt_tflops

    roof = fmt_tflops(tables.roofline.rows[0].row.tflops)
    from common.report.rules.judge import matmul_gflops

    assert fmt_tflops(matmul_gflops(tables) / 1e3) == roof  # what the regime's words quote
    rates = {m for f in findings for m in re.findall(r"the matmul arithmetic ran at ([\d.,]+ [GMT]?FLOP/s)", f.message)}
    assert rates <= {roof}, (rates, roof)
    assert roof in next(f.message for f in findings if f.rule == "roofline")


def test_the_hubs_forward_gets_the_same_count(tmp_path):
    """04_d did not run on the H100 (no Hub there): a trace shaped like it, whose attention op the roofline
    does not count, still gets the attention forward's one count over its steps' device time."""
    import json

    from common.report import analyze
    from conftest import event

    ev = []
    for i in range(3):
        t = i * 300.0
        ev += [event(f"ProfilerStep#{i + 2}", t, 250, "user_annotation"), event("flash_attn::fwd", t + 10, 100),
               event("cudaLaunchKernel", t + 20, 5, "cuda_runtime", correlation=100 + i),
               event("flash_fwd_kernel", t + 40, 90, "kernel", pid=0, tid=7, correlation=100 + i)]
    knobs = {"script": "04_d_kernels_attention", "tag": "x", "shape": [8, 16, 1024, 64], "dtype": "bf16",
             "device": "cuda", "warmup": True, "schedule": {"wait": 1, "warmup": 1, "active": 3, "repeat": 1},
             "matmul_flops_per_step": 2 * 8 * 16 * 1024 * 1024 * 64}
    path = tmp_path / "hub.json"
    path.write_text(json.dumps({"traceEvents": ev, "lesson": knobs, "deviceProperties": [
        {"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132, "computeMajor": 9, "computeMinor": 0}]}))
    (row,) = [j.row for j in analyze(path)[0].roofline.rows]
    assert row.op.startswith("attention forward") and row.flops == _row("sdpa_flash", "attention forward").row.flops
    assert row.time_us == 3 * 90.0
