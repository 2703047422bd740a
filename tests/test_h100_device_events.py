"""Issue #25 on the real H100 runs (tests/data/h100/runs): how the report matches and attributes device
events. Memsets are memsets (never a guessed kernel, never a kernel or a launcher), a memset between
a copy and its GEMM does not part them, work launched before the profiled window is in no step, and
kernels are named so that two of them can be told apart. Each test recomputes what it asserts from the
raw events where it can (correlation ids, the runtime calls), so it holds the report to the trace."""

from __future__ import annotations

import gzip
import json
from functools import lru_cache

import pytest

from tests.h100 import finding, h100_report, h100_trace

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


@lru_cache(maxsize=None)
def raw(name: str) -> list:
    with gzip.open(h100_trace(name), "rt") as f:
        return json.load(f)["traceEvents"]


def guess_rows(name: str) -> list:
    return h100_report(name)[0].guess.to_json()["rows"]


# ----------------------------------------------------------------------------- 1. the guess against what ran


def test_naive_guess_pairs_no_memset_with_a_gemm():
    """attn_naive: the first aten::bmm launches a 4-byte memset before its GEMM; 5 as guessed, each a
    kernel (both matmuls their nvjet GEMMs), not guessed = the Memcpy under aten::clone and the memset."""
    rows = guess_rows("attn_naive")
    guessed = [r for r in rows if r["status"] == "as guessed"]
    assert len(guessed) == 5 and all(r["seen"]["device_kind"] == "kernel" for r in guessed)
    matmuls = [r["seen"]["kernel"] for r in guessed if r["expected"].startswith("matmul")]
    assert len(matmuls) == 2 and all(k.startswith("nvjet_") for k in matmuls), matmuls
    extra = sorted((r["seen"]["device_kind"], r["seen"]["op"]) for r in rows if r["status"] == "not guessed")
    assert extra == [("memcpy", "aten::copy_"), ("memset", "aten::bmm")]
    message = finding("attn_naive", "guess_vs_seen").message
    assert "5 as guessed, 2 not guessed" in message and "a 4 B memset (launched by aten::bmm)" in message
    assert "(5 kernels, 1 memcpy, 1 memset)" in message


def test_inplace_guess_all_as_guessed_besides_the_memset():
    rows = guess_rows("attn_inplace")
    assert [r["seen"]["device_kind"] for r in rows if r["status"] == "as guessed"] == ["kernel"] * 5
    assert [r["seen"]["device_kind"] for r in rows if r["status"] == "not guessed"] == ["memset"]
    message = finding("attn_inplace", "guess_vs_seen").message
    assert "all 5 as guessed; besides, a 4 B memset" in message
    assert finding("attn_inplace", "guess_vs_seen").level == "info"


@pytest.mark.parametrize("run", ["sdpa_cudnn", "sdpa_flash", "sdpa_efficient"])
def test_fused_guess_is_the_attention_kernel(run):
    """'one fused attention kernel' is the kernel, never cuDNN's memset before it."""
    (row,) = [r for r in guess_rows(run) if r["status"] == "as guessed"]
    assert row["seen"]["device_kind"] == "kernel" and "Memset" not in row["seen"]["kernel"]
    assert all(r["seen"]["device_kind"] == "memset" for r in guess_rows(run) if r["status"] == "not guessed")
    assert "as guessed" in finding(run, "guess_vs_seen").message


# ----------------------------------------------------------------------------- 2. the bias seed copy


def test_bias_seed_copy_found_through_the_memset():
    """p1_4096_compile: each step's 33.6 MB Memcpy DtoD from aten::addmm, then a 4-byte memset, then the GEMM."""
    device = sorted((e for e in raw("p1_4096_compile") if e.get("cat") in DEVICE_CATS), key=lambda e: e["ts"])
    cats = [e["cat"] for e in device]
    assert cats == ["gpu_memcpy", "gpu_memset", "kernel"] * 3  # what the trace holds
    f = finding("p1_4096_compile", "hidden_dtod_copy")
    assert f.evidence["variant"] == "copy" and f.evidence["pairs"] == 3, f.message
    assert f.evidence["bytes"] == pytest.approx(33_554_432) and "aten::addmm" in f.evidence["issued_by"]
    assert "with a 4 B memset between" in f.message and "no bias seed copy" not in f.message


def test_no_copy_claimed_where_none_ran():
    """p1_4096 (eager): a memset before each GEMM and no copy: no hidden copy."""
    f = finding("p1_4096", "hidden_dtod_copy")
    assert f is None or f.evidence["variant"] == "no_copy"


# ----------------------------------------------------------------------------- 4. work launched before the window


def by_launch(name: str) -> dict:
    """From the raw events: per ProfilerStep (in order), the kernels and device µs whose runtime call
    (same correlation id) starts inside it; per kernel name, how many the trace launched; the device
    events no runtime call of the trace launched."""
    events = raw(name)
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    steps = sorted((e for e in events if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
                    and e.get("cat") in ("user_annotation", "cpu_op")), key=lambda e: e["ts"])
    kernels, device_us, calls, orphans = [0] * len(steps), [0.0] * len(steps), {}, []
    for e in events:
        if e.get("cat") not in DEVICE_CATS:
            continue
        launch = launches.get(e.get("args", {}).get("correlation"))
        if launch is None:
            orphans.append(e)
            continue
        if e["cat"] == "kernel":
            calls[e["name"]] = calls.get(e["name"], 0) + 1
        for i, s in enumerate(steps):
            if s["ts"] <= launch["ts"] <= s["ts"] + s["dur"]:
                kernels[i] += e["cat"] == "kernel"
                device_us[i] += e["dur"]
    return dict(kernels=kernels, device_us=device_us, calls=calls, orphans=orphans)


@pytest.mark.parametrize("run", ["sdpa_math", "attn_naive", "p1_64_wait0", "p1_4096_active20"])
def test_steps_and_kernels_count_what_they_launched(run):
    """Every step's kernels and device time, and every kernel row's calls, are what the step (the trace)
    launched, by correlation id: a kernel launched before the window is in none."""
    tables, _ = h100_report(run)
    truth = by_launch(run)
    assert [r.kernels for r in tables.step_rows] == truth["kernels"]
    assert [r.device_us for r in tables.step_rows] == pytest.approx(truth["device_us"])
    assert {k.name: k.calls for k in tables.kernels} == truth["calls"]
    for k in tables.kernels[:8]:  # what the HTML's spread plot draws: each step's own calls
        assert sum(k.detail.per_step_calls) == k.calls


def test_math_steps_launch_20_kernels_each():
    """sdpa_math: each step launched 20 kernels; the 9 the warm-up step launched are said, in no step."""
    tables, _ = h100_report("sdpa_math")
    assert [r.kernels for r in tables.step_rows] == [20, 20, 20]
    assert {k.calls % 3 for k in tables.kernels} == {0}  # no kernel shows a call more than the others
    outside = tables.launched_outside
    assert outside.events == outside.before_window == len(by_launch("sdpa_math")["orphans"]) == 9
    assert outside.device_us == pytest.approx(sum(e["dur"] for e in by_launch("sdpa_math")["orphans"]))


def test_naive_says_what_ran_before_the_window():
    tables, _ = h100_report("attn_naive")
    assert [r.kernels for r in tables.step_rows] == [5, 5, 5]
    assert {k.calls for k in tables.kernels} == {3}
    said = tables.launched_outside.said()
    assert said.startswith("2 kernels launched before the profiled window ran inside it (403 µs)")
    (phase,) = [p for p in tables.phases if p.name == "attn_fwd"]
    assert phase.to_json()["kernels_per_call"] == 5


def test_runs_with_every_launch_in_the_trace_say_nothing():
    assert h100_report("p1_4096_active20")[0].launched_outside is None


# ----------------------------------------------------------------------------- 11. kernels counted as kernels


def test_cudnn_launchers_are_its_kernels_launchers():
    """sdpa_cudnn: cuDNN's op launches a memset (cudaMemsetAsync) and its kernel (cuLaunchKernelEx): only the
    kernel's launch is a launcher of the attention kernel; the 4x1x1 in its name is not read as warps
    (its block is 384 threads, 12 warps)."""
    f = finding("sdpa_cudnn", "fused_attention")
    assert f.evidence["launches"] == {"cuLaunchKernelEx": 3}
    assert "launched by cuLaunchKernelEx x3)" in f.message and "cudaMemsetAsync" not in f.message
    (kernel,) = [e for e in raw("sdpa_cudnn") if e.get("cat") == "kernel"][:1]
    assert kernel["args"]["block"] == [384, 1, 1] and "4x1x1" in kernel["name"]
    assert "warps" not in f.message


def test_flash_warps_match_its_block():
    """The flash kernel's traits say 4 warps: its block is 128 threads."""
    f = finding("sdpa_flash", "fused_attention")
    block = next(e for e in raw("sdpa_flash") if e.get("cat") == "kernel")["args"]["block"]
    assert "4 warps" in f.message and block[0] * block[1] * block[2] == 4 * 32


def test_transposes_before_and_after_the_kernel_s_op():
    """P3.12 on the H100: flash and efficient transpose q, k, v before the op that launches the kernel and the
    output after it (3 + 1 per call, not "4 before" as the A100 post's torch did); cuDNN none."""
    for run in ("sdpa_flash", "sdpa_efficient"):
        f = finding(run, "fused_attention")
        assert (f.evidence["transposes_before_per_call"], f.evidence["transposes_after_per_call"]) == (3, 1)
        assert "after 3 aten::transpose per call and 1 after its compute, on the output" in f.message
    f = finding("sdpa_cudnn", "fused_attention")
    assert f.evidence["transposes_before_per_call"] == f.evidence["transposes_after_per_call"] == 0


@pytest.mark.parametrize("run, op, said", [
    ("p1_4096_compile", "aten::addmm", "3 calls: 3 kernels, 3 memcpys, 3 memsets"),
    ("mlp", "aten::mm", "9 calls: 9 kernels, 6 memsets")])
def test_an_ops_device_work_counted_as_what_it_is(run, op, said):
    """aten::mm in mlp launches 9 GEMMs and 6 memsets (no split-K): 9 kernels, not 15."""
    row = next(o for o in h100_report(run)[0].ops if o.name == op)
    kernels = sum(1 for e in raw(run) if e.get("cat") == "kernel" and e["name"].startswith("nvjet_"))
    assert row.kernels == kernels
    f = finding(run, "hotspot_op")
    assert f.evidence["op"] == op and said in f.message


# ----------------------------------------------------------------------------- 13. kernels named for what they are


def test_liger_triton_kernel_is_categorised_triton():
    """liger: Liger's hand-written Triton kernel (a Python-style name, launched with cuLaunchKernelEx,
    not from an aten op) is a Triton kernel, not "other"."""
    tables, _ = h100_report("liger")
    (row,) = [k for k in tables.kernels if k.name == "_geglu_tanh_forward_kernel"]
    assert row.category == "triton_other"
    assert "other" not in {c.category for c in tables.categories}


def test_triton_by_how_it_was_launched_not_by_its_name():
    from common.report.model.names import jit_category

    assert jit_category("my_fused_rope_kernel", "cuLaunchKernelEx") == "triton_other"
    assert jit_category("my_fused_rope_kernel", "cuLaunchKernel") == "triton_other"
    assert jit_category("my_fused_rope_kernel", "cudaLaunchKernel") == "other"  # PyTorch's own launch path
    assert jit_category("void foo<float>(float*)", "cuLaunchKernelEx") == "other"  # a C++ kernel's name


@pytest.mark.parametrize("run", ["attn_naive", "sdpa_math"])
def test_softmax_is_a_normalisation(run):
    tables, _ = h100_report(run)
    softmax = [k for k in tables.kernels if "softmax" in k.name]
    assert softmax and {k.category for k in softmax} == {"normalization"}
    assert "other" not in {c.category for c in tables.categories}


def test_gelu_and_mul_told_apart():
    """mlp: gelu and mul are both vectorized_elementwise_kernel<…>; the short names lead with the functor."""
    from common.report.model.names import short_name

    names = {k.name: short_name(k.name, 30) for k in h100_report("mlp")[0].kernels}
    elementwise = [n for n in names if "vectorized_elementwise_kernel" in n]
    assert len(elementwise) == 2 and len({names[n] for n in elementwise}) == 2
    shown = " ".join(names[n] for n in elementwise)
    assert "GeluCUDAKernelImpl(BFloat16)" in shown and "BinaryFunctor<BFloat16, MulFu" in shown
    math = [short_name(k.name, 80) for k in h100_report("sdpa_math")[0].kernels]
    assert len(set(math)) == len(math)  # every kernel of the math backend reads differently
    assert "AUnaryFunctor<float, MulFunctor<float>> · vectorized_elementwise_kernel" in math


def test_an_unseen_trace_attributes_by_launch(tmp_path):
    """The same on a trace nobody has seen: a kernel with a correlation id no runtime call has, running
    in the first step, is in no step and is said; in a trace that ties nothing to a launch no kernel is
    "launched outside" it."""
    from common.report import analyze
    from tests import gpu_synth as S

    doc = S.naive_attention(S.H200, inplace=True)
    first = min(e["ts"] for e in doc["traceEvents"] if e["name"].startswith("ProfilerStep#"))
    early = {"ph": "X", "cat": "kernel", "name": S.SOFTMAX, "pid": 0, "tid": 7, "ts": first + 1.0, "dur": 300.0,
             "args": {"correlation": 1, "device": 0, "stream": 7}}
    path = tmp_path / "early.json"
    path.write_text(json.dumps({**doc, "traceEvents": doc["traceEvents"] + [early]}))
    tables, _ = analyze(str(path))
    assert [r.kernels for r in tables.step_rows] == [5, 5, 5]
    assert tables.launched_outside.events == tables.launched_outside.before_window == 1
    assert {k.calls for k in tables.kernels} == {3}
    bare = [{k: v for k, v in e.items() if k != "args"} if e.get("cat") in DEVICE_CATS else e
            for e in doc["traceEvents"]]  # no correlation ids
    path.write_text(json.dumps({**doc, "traceEvents": bare}))
    tables, _ = analyze(str(path))
    assert tables.launched_outside is None and sum(k.calls for k in tables.kernels) == 15
