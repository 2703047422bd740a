"""The GPU claim checks (tests/gpu/claims.py) on synthetic traces, on the CPU.

Each check passes on the A100-style and the Hopper-style variant of its claim, says which variant
the trace shows, and fails on a trace that breaks the claim in one named way.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "gpu"))
import claims  # noqa: E402
import gpu_synth as S  # noqa: E402
from conftest import DATA_TRACES  # noqa: E402

A100_TRACE = DATA_TRACES / "hta" / "a100_rank3.json.gz"
by_label = pytest.mark.parametrize("style", S.STYLES, ids=lambda s: s.label)


def T(doc: dict) -> claims.GpuTrace:
    return claims.GpuTrace(doc, "synthetic")


def holds(verdict: claims.Verdict) -> str:
    assert verdict.holds, str(verdict)
    assert verdict.variant
    return verdict.variant


def fails(verdict: claims.Verdict, why: str) -> None:
    assert not verdict.holds and why in verdict.evidence, str(verdict)


# ----------------------------------------------------------------------------- Part 1


def test_p1_3_overhead_bound_from_the_table():
    holds(claims.overhead_bound(S.table(cpu_ms=2.314, cuda_ms=0.012)))
    fails(claims.overhead_bound(S.table(cpu_ms=2.314, cuda_ms=0.9)), "not overhead-bound")
    fails(claims.overhead_bound("Self CPU time total: 2.3ms\n"), "no Self CPU/CUDA totals")


@pytest.mark.parametrize("cpu_ms, cuda_ms, gemm_us", [(2.1, 3.2, 1000.0), (0.8, 0.65, 200.0)],
                         ids=["A100 figures", "H200 figures (under 1 ms)"])
def test_p1_4_compute_bound_is_a_shape_not_an_a100_figure(cpu_ms, cuda_ms, gemm_us):
    trace = T(S.matmul_add(S.H200, gemm_us=gemm_us, add_us=20.0))
    assert "GEMM 9" in holds(claims.compute_bound(S.table(cpu_ms, cuda_ms), trace))
    fails(claims.compute_bound(S.table(2.0, 0.1), trace), "device time is small")
    small_gemm = T(S.matmul_add(S.H200, gemm_us=5.0, add_us=50.0))
    fails(claims.compute_bound(S.table(cpu_ms, cuda_ms), small_gemm), "does not own most")


@by_label
def test_p1_11_occupancy_query_per_architecture(style):
    variant = holds(claims.occupancy_queries(T(S.matmul_add(style))))
    if style.query:
        assert f"{style.query} before every aten::mm launch" in variant
    else:
        assert "no occupancy query before aten::mm's launch in 3 of 3 steps" in variant
    assert ("sm_80" if style.major == 8 else "sm_90") in variant and style.launch in variant
    fails(claims.occupancy_queries(T(S.matmul_add(style, add_query="cudaOccupancyMaxActiveBlocksPerMultiprocessor"))),
          "aten::add made an occupancy query")


def test_p1_11_query_required_below_sm90_only():
    fails(claims.occupancy_queries(T(S.matmul_add(S.A100, mm_query=None))), "below sm_90")
    holds(claims.occupancy_queries(T(S.matmul_add(S.H200_CLUSTER, mm_query=None))))
    unknown = S.matmul_add(S.A100, mm_query=None)
    unknown["deviceProperties"] = []  # no compute capability: checked as on the posts' A100
    fails(claims.occupancy_queries(T(unknown)), "compute capability unknown")


@by_label
def test_p1_12_shared_memory_not_registers(style):
    variant = holds(claims.kernel_footprint(T(S.matmul_add(style))))
    assert variant.startswith("add kernel 0 B shared memory") and "GEMM 98,304 B" in variant
    fails(claims.kernel_footprint(T(S.matmul_add(style, add_smem=1024))), "uses 1024 B of shared memory")


@by_label
def test_p1_16_compiled_addmm_runs_the_eager_gemm(style):
    eager = T(S.matmul_add(style))
    variant = holds(claims.compiled_addmm(eager, T(S.compiled_matmul_add(style))))
    if style.addmm_gemm == style.mm_gemm:
        assert "the eager GEMM kernel" in variant
    else:  # Hopper: beta=1 changes the name's flags, not the library, arch or tile
        assert "library, arch and tile 192x208" in variant
    fails(claims.compiled_addmm(eager, T(S.compiled_matmul_add(style, gemm="triton_tem_fused_addmm_0"))),
          "not a library GEMM kernel")
    fails(claims.compiled_addmm(eager, T(S.matmul_add(style))), "0 aten::addmm")


@by_label
def test_p1_17_bias_copy_either_way_and_says_which(style):
    variant = holds(claims.bias_seed_copy(T(S.compiled_matmul_add(style))))
    if style.bias_copy:
        assert variant.startswith("a Memcpy DtoD seeds the output")
        assert claims.bias_seed_copy(T(S.compiled_matmul_add(style))).evidence == "33.6 MB"
    else:
        assert variant.startswith("no bias copy")
    fails(claims.bias_seed_copy(T(S.compiled_matmul_add(style, copy=True, copy_after=True))), "after the GEMM")
    fails(claims.bias_seed_copy(T(S.compiled_matmul_add(style, copy=True, copy_steps={0}))), "some steps copy")


# ----------------------------------------------------------------------------- Part 2


@by_label
def test_p2_1_linear_one_gemm_bias_flag_as_evidence(style):
    variant = holds(claims.linear_one_gemm(T(S.linear(style))))
    if style.major >= 9:
        assert "bias epilogue flag (nvjet_sm90_tst_64x8_64x16_4x1_v_bz_bias_TNT)" in variant
    else:
        assert "no separate bias kernel" in variant
    fails(claims.linear_one_gemm(T(S.linear(style, bias_kernel=True))), "expected aten::addmm's one GEMM")
    fails(claims.linear_one_gemm(T(S.linear(style, t_kernel=True))), "aten::t launched device work")


@by_label
def test_p2_4_mlp_counts_gemms_by_op(style):
    assert holds(claims.mlp_kernels(T(S.mlp(style)))).startswith("5 kernels per forward: 3 GEMMs + gelu + mul")
    fails(claims.mlp_kernels(T(S.mlp(style, gelu_kernels=2))), "aten::gelu launched 2 kernels")
    fails(claims.mlp_kernels(T(S.mlp(style, stray_kernel=True))), "6 kernels in mlp_fwd")


def test_p2_4_split_k_reduction_is_not_a_gemm():
    variant = holds(claims.mlp_kernels(T(S.mlp(S.H200, split_k=True))))
    assert variant.startswith("6 kernels per forward: 3 GEMMs + gelu + mul, 1 aten::mm per forward launched a "
                              "second kernel (split-K reduction)")


def test_p2_4_queries_required_below_sm90_only():
    fails(claims.mlp_kernels(T(S.mlp(S.A100, unqueried=1))), "3 of 9 aten::mm launches had no query")
    assert "3 of 9 GEMM launches without a query" in holds(claims.mlp_kernels(T(S.mlp(S.H200_CLUSTER, unqueried=1))))


@by_label
def test_p2_7_compiled_mlp_one_fused_kernel(style):
    eager = T(S.mlp(style))
    variant = holds(claims.compiled_mlp(eager, T(S.compiled_mlp(style))))
    assert variant == f"3 GEMMs + {S.FUSED}"
    fails(claims.compiled_mlp(eager, T(S.compiled_mlp(style, fused=()))), "0 fused gelu*mul kernels")
    fails(claims.compiled_mlp(eager, T(S.compiled_mlp(style, fused=(S.FUSED, "triton_poi_fused_add_1")))),
          "kernels besides the GEMMs")
    fails(claims.compiled_mlp(eager, T(S.compiled_mlp(style, gemm="triton_tem_fused_mm_0"))), "not a library GEMM")


@by_label
def test_p2_9_liger_one_triton_kernel(style):
    assert holds(claims.liger_mlp(T(S.liger(style)))).startswith(f"one {S.GEGLU} per forward")
    fails(claims.liger_mlp(T(S.liger(style, compiled=True))), "compile frames")
    fails(claims.liger_mlp(T(S.liger(style, geglu_kernels=2))), "2 GeGLU kernels")


# ----------------------------------------------------------------------------- plumbing


def test_trace_reads_json_and_gzip_alike(tmp_path):
    doc = S.matmul_add(S.H200)
    (tmp_path / "t.json").write_text(json.dumps(doc))
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    a, b = claims.GpuTrace.read(tmp_path / "t.json"), claims.GpuTrace.read(tmp_path / "t.json.gz")
    assert len(a.events) == len(b.events) and len(a.kernels) == 6 and a.gpu.sm == "sm_90"
    assert claims.occupancy_queries(a) == claims.occupancy_queries(b)


def test_no_steps_is_a_failed_claim_not_a_crash():
    doc = S.matmul_add(S.A100)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not e["name"].startswith("ProfilerStep#")]
    fails(claims.occupancy_queries(T(doc)), "no ProfilerStep")


def test_record_appends_one_json_line_per_verdict(tmp_path):
    log = tmp_path / "claims.jsonl"
    claims.record(claims.overhead_bound(S.table(2.0, 0.01)), str(log))
    claims.record(claims.overhead_bound(S.table(2.0, 1.0)), str(log))
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["claim"], r["holds"]) for r in rows] == [("P1.3", True), ("P1.3", False)]


@pytest.mark.skipif(not A100_TRACE.exists(), reason="the real traces are not present")
def test_real_a100_trace_names_are_in_the_families():
    trace = claims.GpuTrace.read(A100_TRACE)
    runtime = {e["name"] for e in trace.events if e.get("cat") in claims.RUNTIME_CATS}
    assert {n for n in runtime if claims.trace_names.is_occupancy_query(n)} == {"cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags"}
    assert {n for n in runtime if claims.trace_names.is_launch(n)} == {"cudaLaunchKernel"}
    assert trace.gpu.sm == "sm_80" and trace.gpu.expects_gemm_occupancy_query is True
