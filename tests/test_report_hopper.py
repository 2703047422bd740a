"""The report on the GPUs readers have today: Hopper kernel names, cuLaunchKernelEx, cluster
occupancy queries or none, addmm with and without its bias copy (synthetic traces, on the CPU)."""

from __future__ import annotations

from common.report.names import decode_gemm, describe_gemm, has_bias_epilogue, is_launch, is_occupancy_query

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
