"""The report's per-annotation table (phases) and its rules, on synthetic prefill/decode traces."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from common.report import analyze, report_json
from common.report.render.text import render, render_short

GEMM = "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn"
KNOBS = {"script": "05_llm", "tag": "1x128x4_bf16_warm_eager", "shape": [1, 128, 4], "dtype": "bf16",
         "device": "cuda", "warmup": True, "warmup_calls": 3, "compile": False, "compile_mode": "default",
         "schedule": {"wait": 1, "warmup": 1, "active": 2, "repeat": 1}, "variants": {}}


def X(name, ts, dur, cat="cpu_op", pid=100, tid=100, **args):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        e["args"] = args
    return e


class Builder:
    """Events of a CUDA trace, with correlation ids handed out in order."""

    def __init__(self):
        self.ev = []
        self.corr = 0

    def op_with_kernel(self, t: float, kernel_us: float, gpu_at: float) -> None:
        """aten::mm at t (80 µs) launching one GEMM that runs ``kernel_us`` at ``gpu_at``."""
        self.corr += 1
        self.ev += [X("aten::mm", t, 80), X("cudaLaunchKernel", t + 5, 5, cat="cuda_runtime", correlation=self.corr),
                    X(GEMM, gpu_at, kernel_us, cat="kernel", pid=0, tid=7, correlation=self.corr, device=0, stream=7)]

    def graph_replay(self, t: float, kernels: int, gpu_at: float) -> None:
        """One cudaGraphLaunch at t replaying ``kernels`` 2 µs kernels."""
        self.corr += 1
        self.ev.append(X("cudaGraphLaunch", t, 10, cat="cuda_runtime", correlation=self.corr))
        self.ev += [X(GEMM, gpu_at + 3 * j, 2, cat="kernel", pid=0, tid=7, correlation=self.corr, device=0, stream=7)
                    for j in range(kernels)]


def llm_trace(tmp_path, *, steps=2, decode_ops=10, graphs=False, regions=None, knobs=None, name="llm.json"):
    """Per step: one prefill (10 ops, each a long GEMM: the GPU busy) then 4 decodes (``decode_ops`` ops, each a
    2 µs kernel: the GPU idle), or with ``graphs`` each decode one cudaGraphLaunch of 10 kernels; ``regions``
    wraps each decode's work in Torch-Compiled Region ``regions[i]`` with one CompiledFxGraph."""
    b = Builder()
    b.ev.append({"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}})
    k = 0
    for s in range(steps):
        t0 = 10_000.0 * s
        b.ev.append(X(f"ProfilerStep#{s + 2}", t0, 9000, cat="user_annotation"))
        b.ev.append(X("prefill", t0 + 10, 1000, cat="user_annotation"))
        for j in range(10):
            b.op_with_kernel(t0 + 20 + 90 * j, 85, t0 + 100 + 90 * j)
        for d in range(4):
            start = t0 + 2000 + 1500 * d
            b.ev.append(X("decode", start, 1000, cat="user_annotation"))
            if regions:
                b.ev += [X(f"Torch-Compiled Region: {regions[k]}", start + 5, 990),
                         X("TorchDynamo Cache Lookup", start + 6, 2),
                         X("## Call CompiledFxGraph fabc123 ##", start + 9, 980)]
            k += 1
            if graphs:
                b.graph_replay(start + 20, 10, start + 40)
            else:
                for j in range(decode_ops):
                    b.op_with_kernel(start + 10 + 90 * j, 2, start + 30 + 90 * j)
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100", "numSms": 132,
                                                     "computeMajor": 9, "computeMinor": 0}], "traceEvents": b.ev}
    if knobs:
        doc["lesson"] = knobs
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def rules(path) -> dict:
    return {f.rule: f for f in analyze(path)[1]}


def test_phase_table_numbers(tmp_path):
    t, _ = analyze(llm_trace(tmp_path, regions=["0/0"] * 8))
    assert [p.name for p in t.phases] == ["prefill", "decode"]  # no ProfilerStep, no compile frames
    pre, dec = t.phases
    assert (pre.calls, dec.calls) == (2, 8)
    assert pre.mean_us == 1000 and pre.ops_per_call == 10 and pre.kernels_per_call == 10
    assert pre.launches_per_call == 10 and pre.device_us_per_call == 850
    assert pre.gpu_busy_pct == pytest.approx(85.0)  # 10 x 85 µs of kernels inside the 1 ms call
    assert dec.ops_per_call == 13 and dec.kernels_per_call == 10  # 10 aten::mm and the 3 compile frames
    assert dec.device_us_per_call == 20 and dec.gpu_busy_pct == pytest.approx(2.0)
    assert dec.graph_launches_per_call == 0


def test_phases_in_json_and_both_renders(tmp_path):
    path = llm_trace(tmp_path)
    j = report_json(path)
    assert [p["name"] for p in j["phases"]] == ["prefill", "decode"]
    assert {"calls", "mean_us", "ops_per_call", "kernels_per_call", "device_us", "gpu_busy_pct"} <= set(j["phases"][0])
    t, findings = analyze(path)
    buf = io.StringIO()
    render(t, findings, Console(file=buf, width=120))
    assert "annotations (per call)" in buf.getvalue()
    buf = io.StringIO()
    render_short(t, findings, Console(file=buf, width=200))
    assert ("per call: prefill 2x device 850 µs median, CPU 1.00 ms mean (10 ops, GPU busy 85%); decode 8x device "
            "20 µs median, CPU 1.00 ms mean (10 ops, GPU busy 2%)") in buf.getvalue()


def test_overhead_bound_phase_from_gpu_busy(tmp_path):
    """Without token counts: decode dispatches prefill's ops but keeps the GPU 2% busy vs 85%."""
    f = rules(llm_trace(tmp_path))["overhead_bound_phase"]
    assert f.evidence["phase"] == "decode" and f.evidence["reference"] == "prefill"
    assert f.evidence["per_token_ratio"] is None
    assert "GPU is busy 2% of decode's time vs 85% of prefill's" in f.message


def test_overhead_bound_phase_per_token_from_the_lesson_knobs(tmp_path):
    """With 05_llm.py's knobs (1 x 128 prompt): 1 ms for 1 token vs 1 ms for 128: 128x per token."""
    f = rules(llm_trace(tmp_path, knobs=KNOBS))["overhead_bound_phase"]
    assert f.evidence["tokens_per_call"] == 1 and f.evidence["reference_tokens_per_call"] == 128
    assert f.evidence["per_token_ratio"] == 128.0
    assert "for 1 token instead of 128: 1.00 ms per token vs 7.8 µs in prefill (128x)" in f.message


def test_no_overhead_bound_phase_when_the_op_graphs_differ(tmp_path):
    assert "overhead_bound_phase" not in rules(llm_trace(tmp_path, decode_ops=2, knobs=KNOBS))


def test_cuda_graphs(tmp_path):
    r = rules(llm_trace(tmp_path, graphs=True))
    f = r["cuda_graphs"]
    assert f.evidence["graph_launches"] == 8 and f.evidence["kernels_replayed"] == 80
    assert f.evidence["phases"]["decode"] == {"graph_launches_per_call": 1.0, "launches_per_call": 1.0,
                                              "kernels_per_call": 10.0}
    assert "10 kernels per launch" in f.message
    assert "cuda_graphs" not in rules(llm_trace(tmp_path, name="plain.json"))


def test_recompiled_before_window_says_dynamic(tmp_path):
    r = rules(llm_trace(tmp_path, regions=["0/1"] * 8))
    f = r["recompiled_before_window"]
    assert f.evidence["compile_id"] == 1 and f.evidence["calls"] == 8 and f.evidence["phase"] == "decode"
    assert "dynamic shapes" in f.message and "recompiles" not in r
    static = rules(llm_trace(tmp_path, regions=["0/0"] * 8, name="static.json"))
    assert "recompiled_before_window" not in static and "recompiles" not in static
    inside = rules(llm_trace(tmp_path, regions=["0/0"] + ["0/1"] * 7, name="inside.json"))
    assert "recompiles" in inside and "recompiled_before_window" not in inside  # recompiled in the window


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_a_run_on_cuda_graphs_is_never_told_to_try_them(tmp_path, mode):
    """--compile --compile-mode reduce-overhead (or max-autotune) replays CUDA graphs: where launches still cost
    (decode overhead-bound), the hints say where to look in the graphs, never to try them or torch.compile;
    the same trace with eager knobs is told both (so the check can fail)."""
    eager = {f.rule: f.hint for f in analyze(llm_trace(tmp_path, knobs=KNOBS))[1]}
    advised = [rule for rule, hint in eager.items() if "reduce-overhead" in hint]
    assert {"overhead_bound", "overhead_bound_phase"} <= set(advised)
    knobs = {**KNOBS, "tag": f"1x128x4_bf16_warm_compile-{mode}", "compile": True, "compile_mode": mode}
    graphs = {f.rule: f.hint for f in analyze(llm_trace(tmp_path, knobs=knobs, name="graphs.json"))[1]}
    for rule in advised:  # the pattern still shows: the words say what to look at instead
        assert "already on CUDA graphs" in graphs[rule], (rule, graphs[rule])
    for rule, hint in graphs.items():
        rest = hint.replace("already on CUDA graphs", "")
        assert not any(w in rest for w in ("CUDA graph", "reduce-overhead", "torch.compile")), (rule, hint)
