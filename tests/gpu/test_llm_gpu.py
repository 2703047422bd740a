"""05_llm.py on a GPU: claim L.6. Skipped without CUDA.

The default model is too small to keep a GPU busy even in prefill, so the busy/idle claim runs a
wider random Llama (hidden 2048, 4 layers, ~0.3 B parameters) saved to a temporary folder, with a
prefill of 32 x 512 tokens: prefill's GEMMs fill the GPU, decode's one token per sequence does not.
The CUDA-graph claim runs the default model (it compiles in seconds).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import Trace, run_script  # noqa: E402

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs CUDA: the test makes its own 05_llm.py runs (GPU_RUNS_DIR holds none)")

ENV = {"HF_HUB_OFFLINE": "1"}
LAUNCH = re.compile(r"^(cudaLaunchKernel|cuLaunchKernel|cudaLaunchKernelExC|cuLaunchKernelEx)")
GRAPH_LAUNCH = re.compile(r"^(cudaGraphLaunch|cuGraphLaunch)")
SMALL = ["--prompt-len", "64", "--new-tokens", "8"]


def save_wide_llama(folder: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=4,
                         num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048)
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(folder)


@pytest.fixture(scope="module")
def llm_gpu_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("llm-gpu")
    save_wide_llama(base / "wide-llama")
    plan = {
        "wide": ["--model", str(base / "wide-llama"), "--batch", "32", "--prompt-len", "512", "--new-tokens", "16"],
        "static": [*SMALL, "--cache", "static"],
        "graphs": [*SMALL, "--cache", "static", "--compile", "--compile-mode", "reduce-overhead"],
    }
    out = {}
    for key, args in plan.items():
        run = run_script("05_llm.py", *args, "--device", "cuda", trace_dir=base / key, env=ENV, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        out[key] = run
    return out


def trace_path(run) -> Path:
    return next(run.trace_dir.glob("*.json"))


def cpu_annotations(trace: Trace, name: str) -> list[dict]:
    """The CPU's record_function ranges called ``name``, not their gpu_user_annotation copies on a stream."""
    return [e for e in trace.named(name) if e.get("cat") == "user_annotation"]


def phases_of(run) -> dict:
    from common.report import report_json

    report = report_json(trace_path(run))
    return {p["name"]: p for p in report["phases"]}, {f["rule"]: f for f in report["findings"]}


def test_l6_decode_leaves_the_gpu_idle_prefill_keeps_it_busy(llm_gpu_runs):
    """L.6: decode's kernels are tiny and the GPU is mostly idle while decode runs; busy in prefill."""
    phases, findings = phases_of(llm_gpu_runs["wide"])
    prefill, decode = phases["prefill"], phases["decode"]
    assert prefill["gpu_busy_pct"] >= 50, phases
    assert decode["gpu_busy_pct"] < 30 and decode["gpu_busy_pct"] < prefill["gpu_busy_pct"] / 2, phases
    mean_kernel = {p["name"]: p["device_us_per_call"] / p["kernels_per_call"] for p in (prefill, decode)}
    assert mean_kernel["decode"] < mean_kernel["prefill"] / 4, mean_kernel  # tiny kernels
    assert 0.8 <= decode["ops_per_call"] / prefill["ops_per_call"] <= 1.25  # the same op graph (L.2 on a GPU)
    f = findings["overhead_bound_phase"]
    assert f["evidence"]["phase"] == "decode" and "GPU is busy" in f["message"]


def test_l6_reduce_overhead_static_cache_replays_cuda_graphs(llm_gpu_runs):
    """L.6: --compile-mode reduce-overhead --cache static: each decode replays a CUDA graph (cudaGraphLaunch)
    instead of launching its kernels one by one (eager decode: dozens of launches)."""
    eager, graphs = Trace(trace_path(llm_gpu_runs["static"])), Trace(trace_path(llm_gpu_runs["graphs"]))

    def launches(trace: Trace, pattern) -> list[int]:
        return [sum(bool(pattern.match(e["name"])) for e in trace.inside(d)) for d in cpu_annotations(trace, "decode")]

    eager_kernels = launches(eager, LAUNCH)
    assert min(eager_kernels) >= 50, eager_kernels
    assert all(n == 0 for n in launches(eager, GRAPH_LAUNCH))
    assert all(n >= 1 for n in launches(graphs, GRAPH_LAUNCH))
    assert max(launches(graphs, LAUNCH)) <= 5  # what runs outside the graph (argmax, the input copy)
    _, findings = phases_of(llm_gpu_runs["graphs"])
    assert findings["cuda_graphs"]["evidence"]["phases"]["decode"]["graph_launches_per_call"] >= 1
