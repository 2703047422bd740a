"""The trace report (common.report) on real traces and on synthetic GPU traces: its numbers and rules."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest

from common.report import analyze, report_json
from conftest import DATA_TRACES, REPO, event, write_trace

HTA = DATA_TRACES / "hta"


def rules_of(findings) -> dict:
    return {f.rule: f for f in findings}


# ----------------------------------------------------------------------------- real traces (each loaded once)

_cache: dict = {}


def real(name: str):
    """(tables, findings) of a trace under tests/data/traces, loaded once per session."""
    if name not in _cache:
        _cache[name] = analyze(DATA_TRACES / name)
    return _cache[name]


@pytest.mark.parametrize("name, span, idle, idle_pct, compute", [
    ("hta/v100_ddp_rank1.json.gz", 1_732_965, 732_352, 42.26, 620_516),
    ("hta/a100_rank3.json.gz", 464_594, 76_007, 16.36, 281_336),
    ("kineto/v100_resnet50_train.json.gz", 996_477, 392_919, 39.43, None),
])
def test_busy_idle_agree_with_hta(name, span, idle, idle_pct, compute):
    t, _ = real(name)
    g = t.numbers.gpu
    assert abs(g.idle_pct - idle_pct) < 1.0  # the brief: within 1 percentage point
    assert abs(g.span_us - span) <= 1 and abs(g.idle_us - idle) <= 1  # in fact exact
    assert abs(g.busy_pct - (100 - idle_pct)) < 1.0
    if compute is not None:
        assert abs(g.compute_us - compute) <= 1


def test_v100_ddp_numbers_and_top_kernels():
    t, findings = real("hta/v100_ddp_rank1.json.gz")
    assert [s.number for s in t.model.steps] == [2, 3, 4, 5, 6]
    assert t.numbers.gpu.kernels == 19_370
    assert t.numbers.gpu.launches_correlated == 22_290
    top = {k.name: k for k in t.kernels[:5]}
    nccl = top["ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"]
    assert nccl.calls == 2_020 and abs(nccl.total_us - 357_343) <= 1
    assert abs(top["volta_sgemm_128x32_nt"].total_us - 73_955) <= 1
    assert abs(top["volta_sgemm_128x64_nn"].total_us - 55_313) <= 1
    assert abs(top["volta_sgemm_32x128_nn"].total_us - 45_961) <= 1
    add = [k for k in t.kernels if k.name.startswith("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>")]
    assert abs(add[0].total_us - 84_724) <= 1
    r = rules_of(findings)
    assert r["hotspot_kernel"].evidence["kernel"].startswith("ncclKernel_AllReduce")
    assert r["occupancy_query"].evidence["queried"] == 2_665
    assert "aten::mm" in r["occupancy_query"].evidence["queried_ops"]
    assert "metadata_only_ops" in r and "aten::t" in r["metadata_only_ops"].evidence["ops"]
    assert "gemm_kernels" in r and "no_device_lane" not in r
    # breakdown sums to the steps' time
    b = t.breakdown
    assert abs(sum(getattr(b, k) for k in ("kernel", "memcpy", "memset", "runtime", "dataloader", "cpu_exec", "other"))
               - b.total) < 1
    cats = {c.category: c for c in t.categories}
    assert abs(cats["communication"].time_us - 357_343) <= 1 and round(cats["gemm"].time_us) == 414_005


def test_resnet_launch_args_give_tensorboard_estimates():
    t, findings = real("kineto/v100_resnet50_train.json.gz")
    assert [s.number for s in t.model.steps] == [5, 6, 7, 8, 9, 10]
    assert t.numbers.gpu.kernels == 8_772
    e = t.numbers.efficiency
    assert e.kernels_with_launch_args == 8_772
    assert round(e.mean_blocks_per_sm, 2) == 121.91
    assert round(e.kernel_weighted_sm_efficiency_pct, 2) == 98.50  # per kernel time: not TensorBoard's figure
    k = t.kernels[0]
    assert "cudnn" in k.name and k.category == "cudnn" and round(k.est_achieved_occupancy_pct, 2) == 29.97
    assert round(t.breakdown.dataloader) == 355_571  # enumerate(DataLoader) in the old Operator category


def test_a100_rank3_steps_and_streams():
    t, _ = real("hta/a100_rank3.json.gz")
    assert [s.number for s in t.model.steps] == list(range(1009, 1015))
    assert t.numbers.gpu.streams >= 3


def test_cpu_only_trace_says_no_device_lane():
    t, findings = real("hta/cpu_only_rank34.json.gz")
    r = rules_of(findings)
    assert "no_device_lane" in r and not t.has_gpu
    j = report_json(HTA / "cpu_only_rank34.json.gz")
    assert j["gpu"]["busy_us"] is None and j["gpu"]["span_us"] is None and j["gpu"]["idle_pct"] is None


def test_no_steps_trace_is_one_window():
    t, findings = real("hta/a100_alexnet_nosteps.json.gz")
    assert t.model.window_source == "all events" and len(t.model.steps) == 1
    assert "no ProfilerStep" in rules_of(findings)["no_steps"].message
    assert not any("ProfilerStep" in n for n in t.model.notes)  # said once, by the finding
    assert t.numbers.gpu.kernels == 79


def test_rocm_trace_reads():
    t, findings = real("hta/mi250_rocm_minitoy.json.gz")
    assert [s.number for s in t.model.steps] == [1, 2]  # the GPU-lane ProfilerStep#1 is not a step
    assert t.numbers.gpu.kernels == 14 and t.numbers.gpu.launches_correlated == 16
    assert any(k.category == "gemm" for k in t.kernels)  # rocBLAS Cijk_ kernels


def test_triton_kernel_decoded():
    t, findings = real("hta/a100_triton_example.json.gz")
    r = rules_of(findings)
    assert "fuses add+cos+sin" in r["fused_kernels"].message
    assert t.kernels[0].category == "triton_pointwise"
    assert t.kernels[0].detail.decoded["backend"] == "Triton"
    assert "torch_compile" in r and "recompiles" not in r


# ----------------------------------------------------------------------------- names


def test_gemm_and_fused_names_decode():
    from common.report.model.names import decode_fused, decode_gemm, kernel_category

    d = decode_gemm("ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn")
    assert (d["library"], d["arch"], d["dtype"], d["tile"], d["stages"], d["layout"]) == (
        "cuBLAS", "ampere", "bf16", "128x256", "64x3", "nn")
    d = decode_gemm("volta_sgemm_128x64_nn")
    assert (d["arch"], d["dtype"], d["tile"], d["layout"]) == ("volta", "fp32", "128x64", "nn")
    d = decode_gemm("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
                    "execute_segment_k_off_kernel__5x_cublas")
    assert (d["library"], d["arch"], d["dtype"], d["tile"], d["layout"]) == ("cuBLAS", "sm90", "bf16", "128x128x64", "tn")
    d = decode_gemm("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(x)")
    assert d["library"] == "CUTLASS" and d["arch"] == "sm80" and d["layout"] == "nn"
    f = decode_fused("triton_poi_fused__unsafe_view_gelu_mul_0")
    assert (f["backend"], f["kind"], f["ops"]) == ("Triton", "pointwise", ["_unsafe_view", "gelu", "mul"])
    f = decode_fused("graph_0_cpp_fused__unsafe_view_gelu_mul_0")
    assert f["backend"].startswith("C++") and f["ops"] == ["_unsafe_view", "gelu", "mul"]
    assert decode_fused("cpp_fused_add_0")["ops"] == ["add"]
    assert decode_fused("aten::mm") is None and decode_gemm("triton_poi_fused_add_0") is None
    assert kernel_category("triton_red_fused_sum_0") == "triton_reduction"
    assert kernel_category("triton_per_fused_native_layer_norm_0") == "triton_persistent"
    assert kernel_category("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)") == "communication"


# ----------------------------------------------------------------------------- synthetic GPU traces

GEMM = "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>(int)"


def gpu_trace(tmp_path, *, steps=3, occupancy=True, gemm_us=(50, 50, 50), dtod=False, buffer_request=False,
              sync_us=30.0, hashes=(), regions=(), gap_step=None, name="t.json"):
    """A tiny matmul+add CUDA trace: per step matmul_add -> aten::matmul -> aten::mm (GEMM), aten::add."""
    ev = [{"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}}]
    corr = 1
    for i in range(steps):
        t = 1000.0 * i
        ev.append(event(f"ProfilerStep#{i + 2}", t, 900, cat="user_annotation"))
        ev.append(event("matmul_add", t + 10, 400, cat="user_annotation"))
        if hashes:
            ev.append(event(f"Torch-Compiled Region: {regions[i] if regions else '0/0'}", t + 12, 390))
            ev.append(event("TorchDynamo Cache Lookup", t + 13, 2))
            ev.append(event(f"## Call CompiledFxGraph {hashes[i]} ##", t + 16, 300))
        if dtod:
            ev.append(event("aten::addmm", t + 20, 200))
            ev.append(event("cudaMemcpyAsync", t + 25, 5, cat="cuda_runtime", correlation=corr))
            ev.append(event("Memcpy DtoD (Device -> Device)", t + 60, 4, cat="gpu_memcpy", pid=0, tid=7,
                        correlation=corr, device=0, stream=7, bytes=32 * 2**20))
            corr += 1
            ev.append(event("cudaLaunchKernel", t + 40, 8, cat="cuda_runtime", correlation=corr))
            ev.append(event(GEMM, t + 66, gemm_us[i], cat="kernel", pid=0, tid=7, correlation=corr, device=0, stream=7,
                        grid=[16, 8, 1], block=[256, 1, 1], **{"est. achieved occupancy %": 12, "blocks per SM": 1.2}))
            corr += 1
        else:
            ev.append(event("aten::matmul", t + 20, 150))
            ev.append(event("aten::mm", t + 22, 146))
            if occupancy:
                ev.append(event("cudaOccupancyMaxActiveBlocksPerMultiprocessor", t + 30, 2, cat="cuda_runtime",
                            correlation=corr + 1000))
            ev.append(event("cudaLaunchKernel", t + 40, 8, cat="cuda_runtime", correlation=corr))
            ev.append(event(GEMM, t + 60, gemm_us[i], cat="kernel", pid=0, tid=7, correlation=corr, device=0, stream=7,
                        grid=[16, 8, 1], block=[256, 1, 1], **{"est. achieved occupancy %": 12, "blocks per SM": 1.2}))
            corr += 1
            ev.append(event("aten::add", t + 180, 30))
            ev.append(event("cudaLaunchKernel", t + 185, 8, cat="cuda_runtime", correlation=corr))
            kt = t + 60 + gemm_us[i] + (300 if gap_step == i else 2)
            ev.append(event(ADD, kt, 3, cat="kernel", pid=0, tid=7, correlation=corr, device=0, stream=7,
                        grid=[4, 1, 1], block=[128, 1, 1], **{"est. achieved occupancy %": 5, "blocks per SM": 0.04}))
            corr += 1
    if buffer_request:
        ev.append(event("Activity Buffer Request", 5, 40, cat="overhead", pid=0, tid=7))
    end = 1000.0 * (steps - 1) + 910
    ev.append(event("cudaDeviceSynchronize", end, sync_us, cat="cuda_runtime", correlation=corr + 5000))
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "numSms": 108,
                                                     "computeMajor": 8, "computeMinor": 0}],
           "cuda_runtime_version": 12040, "traceEvents": ev}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def findings_of(path) -> dict:
    return rules_of(analyze(path)[1])


def test_synthetic_basics(tmp_path):
    t, f = analyze(gpu_trace(tmp_path))
    r = rules_of(f)
    assert [s.number for s in t.model.steps] == [2, 3, 4]
    assert t.numbers.gpu.kernels == 6 and t.numbers.gpu.launches_correlated == 6
    assert [row.kernels for row in t.step_rows] == [2, 2, 2]
    k = {k.name: k for k in t.kernels}
    assert k[GEMM].est_sm_efficiency_pct == 100.0 and k[GEMM].est_achieved_occupancy_pct == 12
    assert abs(k[GEMM].mean_blocks_per_sm - 128 / 108) < 1e-6  # blocks / numSms
    assert abs(k[ADD].est_sm_efficiency_pct - 100 * 4 / 108) < 1e-6
    assert "overhead_bound" in r and "compute_bound" not in r
    assert r["gemm_kernels"].evidence["kernels"][0]["tile"] == "128x256"
    assert r["hotspot_kernel"].evidence["kernel"] == GEMM
    assert t.model.meta["cuda_runtime_version"] == 12040


def test_rule_occupancy_query(tmp_path):
    r = findings_of(gpu_trace(tmp_path, occupancy=True))
    ev = r["occupancy_query"].evidence
    assert ev["queried"] == 3 and ev["plain"] == 3
    assert list(ev["queried_ops"]) == ["aten::mm"] and list(ev["plain_ops"]) == ["aten::add"]
    assert (ev["gemm_launches"], ev["gemm_launches_queried"], ev["compute_capability"]) == (3, 3, "sm_80")
    assert ev["queries_expected"] is True and r["occupancy_query"].level == "info"
    # an A100 (below sm_90) without the query: said, as a departure from the posts
    f = findings_of(gpu_trace(tmp_path, occupancy=False, name="u.json"))["occupancy_query"]
    assert f.level == "note" and f.evidence["queried"] == 0 and f.evidence["gemm_launches"] == 3
    assert "no occupancy query" in f.message and "sm_80" in f.message


def test_rule_hidden_dtod_copy(tmp_path):
    r = findings_of(gpu_trace(tmp_path, dtod=True))
    f = r["hidden_dtod_copy"]
    assert f.evidence["pairs"] == 3 and f.evidence["gemm"] == GEMM
    assert f.evidence["issued_by"][:2] == ["cudaMemcpyAsync", "aten::addmm"]
    assert "33.6 MB" in f.message
    assert "hidden_dtod_copy" not in findings_of(gpu_trace(tmp_path, dtod=False, name="u.json"))


def test_rule_activity_buffer_request(tmp_path):
    r = findings_of(gpu_trace(tmp_path, buffer_request=True))
    assert r["activity_buffer_request"].evidence["count"] == 1
    assert "activity_buffer_request" not in findings_of(gpu_trace(tmp_path, name="u.json"))


def test_rule_kernel_time_spread(tmp_path):
    r = findings_of(gpu_trace(tmp_path, gemm_us=(580, 590, 2080)))
    f = r["kernel_time_spread"]
    assert f.evidence["kernel"] == GEMM and f.evidence["max_over_min"] > 3
    assert f.evidence["mean_us"] > 1000 and f.evidence["median_us"] == 590
    assert "kernel_time_spread" not in findings_of(gpu_trace(tmp_path, gemm_us=(580, 585, 590), name="u.json"))


def test_rule_long_final_sync(tmp_path):
    r = findings_of(gpu_trace(tmp_path, sync_us=1780))
    f = r["long_final_sync"]
    assert f.evidence["sync_us"] == 1780 and f.evidence["gpu_busy_during_us"] == 0
    assert "long_final_sync" not in findings_of(gpu_trace(tmp_path, sync_us=20, name="u.json"))


def test_rule_kernel_gap(tmp_path):
    r = findings_of(gpu_trace(tmp_path, gap_step=1, steps=4, gemm_us=(50,) * 4))
    assert r["kernel_gap"].evidence["step"] == "ProfilerStep#3" and r["kernel_gap"].evidence["gap_us"] == 300
    assert "kernel_gap" not in findings_of(gpu_trace(tmp_path, steps=4, gemm_us=(50,) * 4, name="u.json"))


def test_rule_compile_frames_and_recompiles(tmp_path):
    r = findings_of(gpu_trace(tmp_path, hashes=("cabc123",) * 3))
    assert r["torch_compile"].evidence["hashes"] == {"cabc123": 3}
    assert "recompiles" not in r
    r = findings_of(gpu_trace(tmp_path, hashes=("cabc123", "cdef456", "cdef456"), regions=("0/0", "0/1", "0/1"),
                              name="u.json"))
    assert "recompiles" in r and r["recompiles"].evidence["recompiled"] == ["0/1"]
    nothing = findings_of(gpu_trace(tmp_path, name="v.json"))
    assert "torch_compile" not in nothing and "recompiles" not in nothing


def test_rule_cold_first_step_and_gap(tmp_path):
    """The posts' numbers (a 4x wider first step, a 228 µs gap): a cold start when the first recorded step is
    the workload's first call (#0 of a trace from the lessons' knobs that did not warm up); as #2, after the
    schedule's two unrecorded steps, it is the profiler's first recorded step and is called that."""
    def trace(first_dur, first_gap, name, first):
        ev = []
        for i, (dur, gap) in enumerate([(first_dur, first_gap), (100, 5), (100, 5)]):
            t = 1000.0 * i
            ev += [event(f"ProfilerStep#{i + first}", t, dur, cat="user_annotation"),
                   event("matmul_add", t + 2, dur - 10, cat="user_annotation"),
                   event("aten::matmul", t + 2 + gap, 20), event("aten::mm", t + 3 + gap, 18)]
        p = tmp_path / name
        doc = {"traceEvents": ev, "lesson": {"script": "01_matmul_add", "tag": "t", "shape": [64], "dtype": "bf16",
                                             "device": "cuda", "warmup": False, "warmup_calls": 0, "compile": False,
                                             "compile_mode": "default",
                                             "schedule": {"wait": 0, "warmup": first, "active": 3, "repeat": 1}}}
        p.write_text(json.dumps(doc))
        return findings_of(p)

    r = trace(400, 228, "cold.json", 0)
    assert r["cold_first_step"].evidence["ratio"] == 4.0
    assert r["annotation_gap"].evidence["gaps_us"]["ProfilerStep#0"] == 228
    r = trace(400, 228, "after_schedule.json", 2)
    assert "cold_first_step" not in r and "annotation_gap" not in r
    assert r["first_recorded_step"].evidence["calls_before"] == 2
    r = trace(105, 5, "warm.json", 0)
    assert "cold_first_step" not in r and "annotation_gap" not in r and "first_recorded_step" not in r


def test_rule_many_calls_and_metadata_ops(tmp_path):
    ev = [event("ProfilerStep#1", 0, 100000, cat="user_annotation")]
    ev += [event("aten::add_", 10 + 10 * i, 5) for i in range(500)]
    ev += [event("aten::t", 6000, 2), event("aten::transpose", 6000.5, 1)]
    p = tmp_path / "many.json"
    r = findings_of(write_trace(p, ev))
    assert r["many_calls"].evidence["calls"] == 500
    assert set(r["metadata_only_ops"].evidence["ops"]) == {"aten::t", "aten::transpose"}
    ev = [event("ProfilerStep#1", 0, 100000, cat="user_annotation"), event("aten::add_", 10, 5)]
    r = findings_of(write_trace(p, ev))
    assert "many_calls" not in r and "metadata_only_ops" not in r


def test_old_format_and_float_ts(tmp_path):
    """Old categories (Operator/Runtime/Kernel), string tids, float timestamps, B/E pairs."""
    ev = [event("ProfilerStep#7", 1.5, 500.25, cat="Operator", tid="55"),
          event("aten::mm", 10.125, 100.0, cat="Operator", tid="55"),
          event("cudaLaunchKernel", 20.5, 5.0, cat="Runtime", tid="55", correlation=9),
          event("volta_sgemm_128x64_nn", 30.0, 50.5, cat="Kernel", pid=0, tid="stream 7", correlation=9),
          {"ph": "B", "name": "aten::add", "cat": "cpu_op", "pid": 100, "tid": "55", "ts": 200.0},
          {"ph": "E", "pid": 100, "tid": "55", "ts": 220.0}]
    p = tmp_path / "old.json"
    t, f = analyze(write_trace(p, ev))
    assert [s.number for s in t.model.steps] == [7]
    assert t.numbers.gpu.launches_correlated == 1
    assert t.numbers.gpu.busy_us == 50.0  # HTA's figure: each event rounded inward to whole µs (30.0..80.5 -> 30..80)
    assert any(o.name == "aten::add" and o.cpu_total_us == 20 for o in t.ops)
    assert t.ops[[o.name for o in t.ops].index("aten::mm")].self_device_us == 50.5


# ----------------------------------------------------------------------------- the benchmark's input builder


def _bench():
    spec = importlib.util.spec_from_file_location("bench_report", REPO / "benchmarks" / "bench_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_repeat_trace_builder(tmp_path):
    bench = _bench()
    src = HTA / "mi250_rocm_minitoy.json.gz"
    t0, f0 = analyze(src)
    t1, f1 = analyze(bench.repeat_trace(src, 1, tmp_path / "x1.json"))
    assert t1.numbers.gpu == t0.numbers.gpu
    assert [k.total_us for k in t1.kernels] == [k.total_us for k in t0.kernels]
    assert [s.number for s in t1.model.steps] == [s.number for s in t0.model.steps]
    assert sorted(f.rule for f in f1) == sorted(f.rule for f in f0)
    t3, _ = analyze(bench.repeat_trace(src, 3, tmp_path / "x3.json"))
    assert [s.number for s in t3.model.steps] == [1, 2, 3, 4, 5, 6]
    assert t3.numbers.gpu.kernels == 3 * t0.numbers.gpu.kernels
    assert t3.numbers.gpu.launches_correlated == 3 * t0.numbers.gpu.launches_correlated
    assert abs(t3.numbers.gpu.busy_us - 3 * t0.numbers.gpu.busy_us) < 0.01


def test_two_process_load_matches_one_process(tmp_path, monkeypatch):
    """Big plain-JSON files are decoded in two halves by two processes: same report as one process."""
    from common.report.render.json import to_json

    src = tmp_path / "ddp.json"
    src.write_bytes(gzip.decompress((HTA / "mi250_rocm_minitoy.json.gz").read_bytes()))
    seen = _force_split(monkeypatch)
    split = to_json(*analyze(src, parallel=True))
    assert seen and seen[0] is not None  # the split path ran
    monkeypatch.setenv("REPORT_ONE_PROCESS", "1")
    one = to_json(*analyze(src, parallel=True))
    assert split == one
    # a compact file has no whitespace between events: no split point, one process
    monkeypatch.delenv("REPORT_ONE_PROCESS")
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(json.loads(src.read_text()), separators=(",", ":")))
    seen.clear()
    assert to_json(*analyze(compact, parallel=True))["gpu"] == one["gpu"]
    assert seen == [None]


@pytest.mark.parametrize("straddle", [False, True])
def test_two_process_load_with_begin_end_pairs(tmp_path, monkeypatch, straddle):
    """B/E pairs wholly in the second half pair up in the child; a pair split between the halves
    (its B in the first half) makes the load fall back to one process. Either way: the one-process report."""
    from common.report.render.json import to_json

    ev = [event("ProfilerStep#1", 0, 10_000, cat="user_annotation")]
    ev += [event("aten::mm", 10 + 10 * i, 5) for i in range(200)]
    be = [{"ph": "B", "name": "aten::add", "cat": "cpu_op", "pid": 100, "tid": 100, "ts": 5000.0},
          {"ph": "E", "pid": 100, "tid": 100, "ts": 5040.0}]
    ev = (be[:1] + ev + be[1:]) if straddle else (ev + be)
    src = tmp_path / "be.json"
    src.write_text(json.dumps({"traceEvents": ev}, indent=1))
    seen = _force_split(monkeypatch)
    split = to_json(*analyze(src, parallel=True))
    assert len(seen) == 1 and (seen[0] is None) == straddle
    assert {o["name"]: o["cpu_total_us"] for o in split["ops"]}["aten::add"] == 40
    monkeypatch.setenv("REPORT_ONE_PROCESS", "1")
    assert split == to_json(*analyze(src, parallel=True))


def _force_split(monkeypatch) -> list:
    """Make even a small plain .json take the two-process load; return the list that records each
    split attempt's result (None when the load fell back to one process)."""
    from common.report.load import reader as L
    from common.report.load import slices as S

    monkeypatch.setattr(L, "SPLIT_MIN", 1)
    monkeypatch.setattr(L, "read_bytes", _mmap_always(L))
    seen = []
    real_split = S._load_split
    monkeypatch.setattr(S, "_load_split", lambda *a: seen.append(r := real_split(*a)) or r)
    return seen


def _mmap_always(L):
    import mmap

    def read_bytes(path, max_bytes):
        with open(path, "rb") as f:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY), Path(path).stat().st_size
    return read_bytes
