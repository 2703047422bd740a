"""Issue #25 (items 12, 13) on the real H100 runs: the fused kernels the posts teach, named with what
launched them and their device time per call: Liger's hand-written Triton kernel (P2.9, no compile
frames) and Inductor's fused kernel (P2.7), the two figures P2.10 weighs; and matmul_dispatch counting
kernel launches, with the memsets said apart. Figures are recomputed from the raw events."""

from __future__ import annotations

import gzip
import json
import statistics
from functools import lru_cache

import pytest

from common.report import analyze
from tests.h100 import finding, h100_trace

LIGER_KERNEL, LIGER_FN = "_geglu_tanh_forward_kernel", "LigerGELUMulFunction"


@lru_cache(maxsize=None)
def raw(name: str) -> dict:
    with gzip.open(h100_trace(name), "rt") as f:
        return json.load(f)


def median_kernel_us(name: str, kernel: str) -> float:
    return statistics.median(e["dur"] for e in raw(name)["traceEvents"]
                             if e.get("cat") == "kernel" and e.get("name") == kernel)


def test_liger_kernel_named_as_hand_written_with_its_function_and_time_per_call():
    """P2.9: one LigerGELUMulFunction group launching one Triton kernel, no Dynamo rows: the report names
    _geglu_tanh_forward_kernel as written by hand (not Inductor's), launched from LigerGELUMulFunction
    once per call, with its median device time per call (52 µs on this H100)."""
    f = finding("liger", "hand_written_kernels")
    assert f is not None
    (k,) = f.evidence["kernels"]
    assert k["name"] == LIGER_KERNEL and k["launched_from"] == [LIGER_FN] and k["calls"] == 3
    assert k["launchers"] == ["cuLaunchKernelEx"]
    assert k["median_us"] == pytest.approx(median_kernel_us("liger", LIGER_KERNEL), abs=0.1)
    assert f.evidence["compiled"] is False
    text = f.message.replace("\n", " ")
    assert f"{LIGER_KERNEL}, launched from {LIGER_FN} (3 calls, one launch each" in text
    assert "52 µs per call on the device" in text and "no torch.compile frames" in text
    assert finding("liger", "fused_kernels") is None and finding("liger", "torch_compile") is None


def test_inductor_kernel_named_with_the_compiled_graph_and_time_per_call():
    """P2.7/P2.10: mlp_compile's triton_poi_fused__unsafe_view_gelu_mul_0 is torch.compile's, fuses
    _unsafe_view, gelu and mul, launched from the compiled graph (Inductor's record of its own launch
    passed over), with its median device time per call (62 µs); it is no hand-written kernel."""
    name = "triton_poi_fused__unsafe_view_gelu_mul_0"
    f = finding("mlp_compile", "fused_kernels")
    (k,) = f.evidence["kernels"]
    assert (k["name"], k["lane"], k["calls"], k["ops"]) == (name, "GPU", 3, ["_unsafe_view", "gelu", "mul"])
    assert k["per_call_us"] == pytest.approx(median_kernel_us("mlp_compile", name), abs=0.1)
    (caller,) = k["launched_from"]
    assert caller.startswith("## Call CompiledFxGraph ") and f.evidence["compiled"] is True
    text = f.message.replace("\n", " ")
    assert "torch.compile's (Inductor)" in text and "62 µs per call on the device" in text
    assert "launched from the compiled graph" in text
    assert finding("mlp_compile", "hand_written_kernels") is None


def test_eager_mlp_has_neither():
    """The eager MLP (gelu and mul as ATen's elementwise kernels) has no fused and no Triton kernel."""
    assert finding("mlp", "fused_kernels") is None and finding("mlp", "hand_written_kernels") is None


def _rewritten(tmp_path, run: str, **renames) -> list:
    """The findings of run ``run``'s trace with names replaced (old=new), as an unseen trace."""
    text = json.dumps(raw(run))
    for old, new in renames.items():
        text = text.replace(f'"{old}"', f'"{new}"')
    path = tmp_path / f"{run}.json"
    path.write_text(text)
    return analyze(path)[1]


def test_hand_written_is_read_off_the_launch_not_these_names(tmp_path):
    """Any plain-named kernel that the driver API launched is a hand-written Triton kernel, whatever it
    and its function are called; launched through cudaLaunchKernel (PyTorch's own path) it is none."""
    found = {f.rule: f for f in _rewritten(tmp_path, "liger", _geglu_tanh_forward_kernel="swiglu_fwd_kernel",
                                           LigerGELUMulFunction="MySwiGLUFunction")}
    (k,) = found["hand_written_kernels"].evidence["kernels"]
    assert (k["name"], k["launched_from"]) == ("swiglu_fwd_kernel", ["MySwiGLUFunction"])
    found = {f.rule: f for f in _rewritten(tmp_path, "liger", cuLaunchKernelEx="cudaLaunchKernel")}
    assert "hand_written_kernels" not in found


def test_inductor_named_kernel_without_compile_frames_is_not_called_torch_compiles(tmp_path):
    """A kernel named as Inductor names its kernels in a trace with no torch.compile frames is said to
    be named so, not to be this run's torch.compile."""
    frames = {"Torch-Compiled Region: 0/0", "TorchDynamo Cache Lookup", "AOTDispatcher Runtime Wrapper Prologue",
              "Pregraph bytecode"} | {e["name"] for e in raw("mlp_compile")["traceEvents"]
                                      if e.get("name", "").startswith("## Call CompiledFxGraph")}
    found = {f.rule: f for f in _rewritten(tmp_path, "mlp_compile", **{n: "my_region" for n in frames})}
    f = found["fused_kernels"]
    assert f.evidence["compiled"] is False and "named as Inductor names its kernels" in f.message


def test_matmul_dispatch_counts_launches_and_says_memsets_apart():
    """attn_naive: each aten::bmm launches one GEMM, and every other one a 4-byte memset before it: one
    launch per call, and 3 of 6 calls also a cudaMemsetAsync, not '1.5 runtime calls' (the hint compares
    launches)."""
    events = raw("attn_naive")["traceEvents"]
    f = finding("attn_naive", "matmul_dispatch")
    bmm_calls = sum(1 for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::bmm")
    memsets = sum(1 for e in events if e.get("cat") == "cuda_runtime" and e.get("name") == "cudaMemsetAsync")
    assert f.evidence["launches_per_call"] == {"aten::bmm": 1.0}
    assert f.evidence["other_runtime_calls"] == {
        "aten::bmm": dict(calls_with_them=memsets, by_name={"cudaMemsetAsync": memsets})}
    text = f.message.replace("\n", " ")
    assert (f"per aten::bmm call ({bmm_calls} in all): 1 kernel launch; {memsets} of the {bmm_calls} also made "
            f"{memsets} cudaMemsetAsync (memsets, not kernels)") in text
    assert "1.5" not in text and "1 kernel launch per call" in f.hint


def test_matmul_dispatch_says_which_calls_made_the_one_off_runtime_calls():
    """p1_64_wait0: the first aten::mm of a cold run sets cuBLAS up (occupancy queries, attributes, a
    workspace malloc): one call of three made them all, so they are not said as a per-call figure."""
    f = finding("p1_64_wait0", "matmul_dispatch")
    other = f.evidence["other_runtime_calls"]["aten::mm"]
    assert other["calls_with_them"] == 1 and other["by_name"]["cudaMalloc"] >= 1
    assert "per aten::mm call (3 in all): 1 kernel launch; 1 of the 3 also made" in f.message.replace("\n", " ")
