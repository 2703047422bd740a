"""The posts' GPU claims (CLAIMS.md), checked on real CUDA runs. Skipped without CUDA.

The checks live in ``claims.py`` (tested on synthetic traces by ``tests/test_gpu_checks.py``): they
test the shape of each claim, not an A100 figure, and say which variant a run shows (Hopper kernel
names and launches, the bias copy of recent torch or not). Each verdict is appended to
``$GPU_CLAIMS_LOG`` when set; ``run_all.py`` fills ``docs/gpu-claims.md``'s "seen on" column from it.

With ``GPU_RUNS_DIR`` set (``run_all.py`` sets it), the runs are read from that folder
(``<key>/`` per :data:`lesson_runs.RUNS`) instead of being run here; that also re-checks a fetched
run's fixtures on a machine without CUDA.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import claims  # noqa: E402
from conftest import run_script  # noqa: E402
import lesson_runs as LR  # noqa: E402
from lesson_runs import BY_KEY, RunFiles, files_of  # noqa: E402

torch = pytest.importorskip("torch")
RUNS_DIR = os.environ.get("GPU_RUNS_DIR")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() and not RUNS_DIR,
                                reason="needs CUDA (or GPU_RUNS_DIR with a GPU run's traces)")


class Runs:
    """The lesson runs the tests read, each made (or, with GPU_RUNS_DIR, found) on first use; a run
    that GPU_RUNS_DIR does not hold skips the tests that need it (run_all.py --runs made a subset)."""

    def __init__(self, base: Path):
        self.base, self.done = base, {}

    def __getitem__(self, key: str) -> RunFiles:
        if key not in self.done:
            if RUNS_DIR and not (Path(RUNS_DIR) / key).is_dir():
                pytest.skip(f"no {key} run in GPU_RUNS_DIR")
            try:
                self.done[key] = lesson_run(self.base, key)
            except (RuntimeError, FileNotFoundError) as exc:  # kept: one failed run is not run again per test
                self.done[key] = str(exc)
        found = self.done[key]
        if isinstance(found, str):
            pytest.fail(found)
        return found

    def get(self, key: str):
        """Run ``key``'s files, or None where there is no such run (not in GPU_RUNS_DIR, or it failed or
        was skipped): for a claim that only compares with it."""
        if RUNS_DIR and not (Path(RUNS_DIR) / key).is_dir():
            return None
        try:
            return self[key]
        except (pytest.fail.Exception, pytest.skip.Exception):
            return None


def lesson_run(base: Path, key: str) -> RunFiles:
    """The files of run ``key``: from GPU_RUNS_DIR when set, else run now under ``base``."""
    if RUNS_DIR:
        return files_of(Path(RUNS_DIR) / key)
    run = BY_KEY[key]
    env = dict(run.env)
    if run.hub is not None:
        if run.needs and importlib.util.find_spec(run.needs) is None:
            pytest.skip(f"{run.script} needs {run.needs}")
        access = LR.hub_access(run.hub)
        if access.skip:
            pytest.skip(access.skip)
        env.update(access.env)
    result = run_script(run.script, *run.args, "--device", "cuda", trace_dir=base / key, env=env, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(f"{run.script} {' '.join(run.args)} exited {result.returncode}: {result.stderr[-2000:]}")
    (base / key / "run.log").write_text(result.stdout)
    return files_of(base / key)


@pytest.fixture(scope="module")
def gpu_runs(tmp_path_factory) -> Runs:
    return Runs(tmp_path_factory.mktemp("gpu"))


def trace_of(files: RunFiles) -> claims.GpuTrace:
    return claims.GpuTrace.read(files.trace)


def table_of(files: RunFiles) -> str:
    return files.table.read_text()


def expect(verdict: claims.Verdict) -> None:
    claims.record(verdict)
    print(verdict)
    assert verdict.holds, str(verdict)


def test_p1_3_small_matmul_is_overhead_bound(gpu_runs):
    expect(claims.overhead_bound(table_of(gpu_runs["p1_64"])))


def test_p1_4_big_matmul_is_compute_bound(gpu_runs):
    run = gpu_runs["p1_4096"]
    expect(claims.compute_bound(table_of(run), trace_of(run)))


def test_p1_11_occupancy_query_before_gemm_not_before_add(gpu_runs):
    expect(claims.occupancy_queries(trace_of(gpu_runs["p1_64"])))


def test_p1_12_add_kernel_no_shared_memory_gemm_some(gpu_runs):
    expect(claims.kernel_footprint(trace_of(gpu_runs["p1_64"])))


def test_p1_16_compile_one_addmm_same_gemm(gpu_runs):
    expect(claims.compiled_addmm(trace_of(gpu_runs["p1_4096"]), trace_of(gpu_runs["p1_4096_compile"])))


def test_p1_17_compile_bias_copy_or_none(gpu_runs):
    expect(claims.bias_seed_copy(trace_of(gpu_runs["p1_4096_compile"])))


def test_p2_1_linear_one_gemm_transpose_no_kernel(gpu_runs):
    expect(claims.linear_one_gemm(trace_of(gpu_runs["linear"])))


def test_p2_4_mlp_three_gemms_two_elementwise(gpu_runs):
    expect(claims.mlp_kernels(trace_of(gpu_runs["mlp"])))


def test_p2_7_compiled_mlp_one_fused_triton_kernel(gpu_runs):
    expect(claims.compiled_mlp(trace_of(gpu_runs["mlp"]), trace_of(gpu_runs["mlp_compile"])))


def test_p2_9_liger_one_triton_kernel_no_dynamo(gpu_runs):
    if not RUNS_DIR and importlib.util.find_spec("liger_kernel") is None:
        pytest.skip("needs liger-kernel (--extra liger)")
    files = gpu_runs["liger"]
    if files.log is not None:
        console = " ".join(files.log.read_text().split())  # the console wraps at 80 columns
        assert "Liger GeGLU MLP vs plain PyTorch MLP: the outputs match:" in console
    expect(claims.liger_mlp(trace_of(files)))


# ----------------------------------------------------------------------------- Part 3: attention


def optional_trace(gpu_runs, key: str):
    files = gpu_runs.get(key)
    return trace_of(files) if files is not None else None


def test_p3_1_naive_ops_in_the_guessed_order(gpu_runs):
    expect(claims.naive_ops(trace_of(gpu_runs["attn_naive"])))


def test_p3_2_naive_six_kernels_one_memcpy_from_masked_fill(gpu_runs):
    expect(claims.naive_memcpy(trace_of(gpu_runs["attn_naive"])))


def test_p3_3_inplace_five_kernels_no_memcpy(gpu_runs):
    expect(claims.inplace_no_copy(trace_of(gpu_runs["attn_inplace"]), trace_of(gpu_runs["attn_naive"])))


def test_p3_4_math_slower_than_inplace(gpu_runs):
    expect(claims.math_slower(trace_of(gpu_runs["attn_inplace"]), trace_of(gpu_runs["sdpa_math"])))


def test_p3_5_math_many_more_kernels_than_inplace(gpu_runs):
    expect(claims.math_many_kernels(trace_of(gpu_runs["attn_inplace"]), trace_of(gpu_runs["sdpa_math"])))


def test_p3_6_math_fp32_cuda_cores_naive_bf16_tensor_cores(gpu_runs):
    expect(claims.math_fp32_gemms(trace_of(gpu_runs["attn_naive"]), trace_of(gpu_runs["sdpa_math"])))


def test_p3_7_math_rebuilds_the_causal_mask(gpu_runs):
    expect(claims.math_rebuilds_mask(trace_of(gpu_runs["sdpa_math"])))


def test_p3_8_math_safe_softmax(gpu_runs):
    expect(claims.math_safe_softmax(trace_of(gpu_runs["sdpa_math"])))


def test_p3_9_efficient_one_fmha_cutlass_kernel(gpu_runs):
    expect(claims.efficient_kernel(trace_of(gpu_runs["sdpa_efficient"])))


def test_p3_10_flash_one_kernel_and_the_ranking(gpu_runs):
    flash = trace_of(gpu_runs["sdpa_flash"])
    others = [optional_trace(gpu_runs, k) for k in ("sdpa_math", "sdpa_efficient", "sdpa_cudnn")]
    expect(claims.flash_fastest(flash, *others))


def test_p3_11_flash_low_occupancy_explained_by_its_footprint(gpu_runs):
    expect(claims.flash_occupancy(trace_of(gpu_runs["sdpa_flash"])))


def test_p3_12_transposes_flash_efficient_not_cudnn(gpu_runs):
    traces = [optional_trace(gpu_runs, k) for k in ("sdpa_flash", "sdpa_efficient", "sdpa_cudnn")]
    if not any(traces):
        pytest.skip("no flash, efficient or cuDNN run in GPU_RUNS_DIR")
    expect(claims.transposes(*traces))


def test_p3_13_cudnn_one_generated_kernel_via_cuLaunchKernelEx(gpu_runs):
    expect(claims.cudnn_kernel(trace_of(gpu_runs["sdpa_cudnn"])))


def test_p3_14_cudnn_occupancy_gap_footprint_one_block(gpu_runs):
    expect(claims.cudnn_occupancy(trace_of(gpu_runs["sdpa_cudnn"])))


def test_p3_15_cudnn_cpu_time_in_the_library(gpu_runs):
    expect(claims.cudnn_cpu_cost(trace_of(gpu_runs["sdpa_cudnn"]), trace_of(gpu_runs["sdpa_flash"]),
                                 trace_of(gpu_runs["sdpa_efficient"])))


def test_p3_16_hub_kernel_one_flash_kernel(gpu_runs):
    expect(claims.hub_flash_kernel(trace_of(gpu_runs["attn_hub"])))
