"""The report on the GPUs readers have today: Hopper kernel names, cuLaunchKernelEx, cluster
occupancy queries or none, addmm with and without its bias copy (synthetic traces, on the CPU)."""

from __future__ import annotations

import json

import pytest

import gpu_synth as S
from common.report import analyze
from common.report.model.gpus import gpu_of
from common.report.model.names import decode_gemm, describe_gemm, has_bias_epilogue, is_launch, is_occupancy_query
from conftest import DATA_TRACES

MI250 = DATA_TRACES / "hta" / "mi250_rocm_minitoy.json.gz"


def findings(tmp_path, doc: dict, name: str = "t.json") -> dict:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return {f.rule: f for f in analyze(path)[1]}


# ----------------------------------------------------------------------------- names


def test_nvjet_names_decode_every_part():
    d = decode_gemm("nvjet_sm90_tst_192x208_64x4_2x1_v_bz_coopB_bias_TNT")
    assert d == dict(library="cuBLAS (nvjet)", arch="sm90", types="tst", dtype="bf16", accumulate="fp32",
                     output="bf16", tile="192x208", stages="64x4", cluster="2x1", layout="TNT",
                     flags=["v", "bz", "coopB"], epilogue=["bias"], tensor_cores=True)
    assert has_bias_epilogue(d)
    d = decode_gemm("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNN")
    assert (d["tile"], d["stages"], d["cluster"], d["layout"], d["epilogue"]) == ("64x8", "64x16", "4x1", "TNN", [])
    assert not has_bias_epilogue(d)
    assert describe_gemm(d) == ("cuBLAS (nvjet), sm90, bf16, accumulate fp32, tile 64x8, k-tile x stages 64x16, "
                                "cluster 4x1, layout TNN, flags v/bz, tensor cores")
    d = decode_gemm("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN")  # older cuBLAS: no arch in the name
    assert "arch" not in d and (d["tile"], d["cluster"], d["flags"]) == ("128x256", "1x2", ["h", "bz", "coopA"])
    d = decode_gemm("nvjet_sm90_tss_64x8_64x16_4x1_v_bz_splitK_TNT")
    assert (d["output"], d["flags"]) == ("fp32", ["v", "bz", "splitK"])


def test_cutlass3x_names_decode():
    d = decode_gemm("cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnn_align8_"
                    "warpspecialized_cooperative_epi_tma")
    assert d == dict(library="CUTLASS 3", arch="sm90", op="tensorop gemm", dtype="bf16", accumulate="fp32",
                     output="bf16", tile="128x256x64", cluster="2x1x1", stages="auto", layout="tnn", align=8,
                     schedule="warpspecialized cooperative", epilogue_schedule="tma", tensor_cores=True)
    d = decode_gemm("void cutlass::device_kernel<cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f16_f16_64x128x64_1x1x1_3_"
                    "ntn_align8>(Params)")
    assert (d["dtype"], d["tile"], d["stages"], d["layout"]) == ("fp16", "64x128x64", "3", "ntn")


def test_launch_and_occupancy_families():
    for name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "hipLaunchKernel",
                 "cudaLaunchKernel_ptsz", "hipExtModuleLaunchKernel"):
        assert is_launch(name), name
    for name in ("cudaLaunchHostFunc", "cudaMemcpyAsync", "cudaOccupancyMaxActiveClusters", "cudaLaunchKernelFoo"):
        assert not is_launch(name), name
    for name in ("cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
                 "cudaOccupancyMaxActiveClusters", "cuOccupancyMaxActiveClusters", "hipOccupancyMaxActiveBlocksPerMultiprocessor"):
        assert is_occupancy_query(name), name
    assert not is_occupancy_query("cudaFuncGetAttributes")


def test_gpu_from_device_properties():
    h200 = gpu_of([{"id": 0, "name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0}])
    assert (h200.sm, h200.expects_gemm_occupancy_query) == ("sm_90", False)
    a100 = gpu_of([{"id": 0, "name": "x", "computeMajor": 8}, {"id": 1, "name": "y", "computeMajor": 9}], 0)
    assert (a100.sm, a100.expects_gemm_occupancy_query) == ("sm_80", True)
    amd = gpu_of([{"id": 0, "name": "AMD Instinct MI250X", "computeMajor": 9, "computeMinor": 0}])
    assert (amd.vendor, amd.sm, amd.expects_gemm_occupancy_query) == ("amd", None, False)  # gfx9 is not sm_90
    assert gpu_of(None).expects_gemm_occupancy_query is None


# ----------------------------------------------------------------------------- rules


def test_gemm_kernels_shows_the_bias_flag_as_p2_1_evidence(tmp_path):
    f = findings(tmp_path, S.linear(S.H200))["gemm_kernels"]
    assert f.evidence["bias_epilogue"] == [S.H200.linear_gemm]
    assert "the bias rides in the GEMM's epilogue ('bias' flag in nvjet_sm90_tst_64x8_64x16_4x1_v_bz_bias_TNT)" in f.message
    row = f.evidence["kernels"][0]
    assert (row["tile"], row["stages"], row["cluster"], row["epilogue"]) == ("64x8", "64x16", "4x1", ["bias"])
    a100 = findings(tmp_path, S.linear(S.A100), "a.json")["gemm_kernels"]
    assert a100.evidence["bias_epilogue"] == [] and "epilogue" not in a100.message


@pytest.mark.parametrize("style, queries", [(S.A100, ["cudaOccupancyMaxActiveBlocksPerMultiprocessor"]),
                                            (S.A100_FLAGS, ["cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags"]),
                                            (S.H200_CLUSTER, ["cudaOccupancyMaxActiveClusters"])],
                         ids=lambda v: getattr(v, "label", ""))
def test_occupancy_rule_recognises_the_family(tmp_path, style, queries):
    f = findings(tmp_path, S.matmul_add(style))["occupancy_query"]
    ev = f.evidence
    assert ev["queries"] == queries and ev["queried"] == 3 and ev["plain"] == 3
    assert list(ev["queried_ops"]) == ["aten::mm"] and list(ev["plain_ops"]) == ["aten::add"]
    assert (ev["gemm_launches"], ev["gemm_launches_queried"], ev["launch_calls"]) == (3, 3, [style.launch])
    assert ev["compute_capability"] == f"sm_{style.major}0" and f.level == "info"


def test_occupancy_rule_on_hopper_without_queries_says_it_is_expected(tmp_path):
    f = findings(tmp_path, S.matmul_add(S.H200))["occupancy_query"]
    assert f.level == "info" and f.evidence["queries_expected"] is False and f.evidence["queried"] == 0
    assert f.evidence["launch_calls"] == ["cuLaunchKernelEx"] and f.evidence["gemm_launches"] == 3
    assert "no occupancy query before the 3 GEMM launches (launched with cuLaunchKernelEx): expected on NVIDIA " \
           "H200 (sm_90), sm_90 or newer" in f.message


def test_occupancy_rule_notes_unqueried_gemms_below_sm90(tmp_path):
    f = findings(tmp_path, S.mlp(S.A100, unqueried=1))["occupancy_query"]
    assert f.level == "note" and f.evidence["gemm_launches_queried"] == 6 and f.evidence["gemm_launches"] == 9
    assert "GEMM launches queried: 6 of 9" in f.message


@pytest.mark.skipif(not MI250.exists(), reason="the real traces are not present")
def test_occupancy_rule_silent_on_amd_without_queries():
    assert "occupancy_query" not in {f.rule for f in analyze(MI250)[1]}


@pytest.mark.parametrize("style", [S.A100, S.H100_COPY], ids=lambda s: s.label)
def test_hidden_dtod_copy_when_addmm_copies(tmp_path, style):
    f = findings(tmp_path, S.compiled_matmul_add(style))["hidden_dtod_copy"]
    assert f.evidence["variant"] == "copy" and f.evidence["pairs"] == 3 and f.evidence["gemm"] == style.addmm_gemm
    assert "33.6 MB" in f.message and "torch versions differ" in f.hint


def test_hidden_dtod_copy_says_when_addmm_does_not_copy(tmp_path):
    f = findings(tmp_path, S.compiled_matmul_add(S.H200))["hidden_dtod_copy"]
    assert f.evidence["variant"] == "no_copy" and f.evidence["addmm_gemms"] == 3
    assert f.message.startswith("no bias seed copy: aten::addmm launches 3 GEMM kernels")
    assert "depends on the torch version" in f.hint
    assert "hidden_dtod_copy" not in findings(tmp_path, S.matmul_add(S.H200), "mm.json")  # no addmm: nothing to say
