"""The posts' GPU claims (CLAIMS.md), checked on a real CUDA run. Skipped without CUDA.

Numbers in the posts are an A100's; on other GPUs the shape of each claim is asserted (kernel
names such as ampere_... become sm90_... on Hopper).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import Trace, run_script  # noqa: E402

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

LAUNCH = re.compile(r"^(cudaLaunchKernel|cuLaunchKernel|cudaLaunchKernelExC|cuLaunchKernelEx)")
OCCUPANCY = "cudaOccupancyMaxActiveBlocksPerMultiprocessor"
GEMM = re.compile(r"gemm|cutlass|cublas|sm\d+_xmma|nvjet", re.I)
UNIT = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def totals(table: str) -> dict[str, float]:
    """'Self CPU time total: 2.314ms' -> {'CPU': 2.314} in ms."""
    out = {}
    for kind, value, unit in re.findall(r"Self (CPU|CUDA) time total: ([\d.]+)(us|ms|s)\b", table):
        out[kind] = float(value) * UNIT[unit]
    return out


class GpuTrace(Trace):
    def __init__(self, path: Path):
        super().__init__(path)
        self.kernels = [e for e in self.events if e.get("cat") in ("kernel", "Kernel")]
        self.memcpys = [e for e in self.events if e.get("cat") in ("gpu_memcpy", "Memcpy")]
        self.by_corr = {}
        for e in self.kernels + self.memcpys:
            self.by_corr.setdefault(e.get("args", {}).get("correlation"), []).append(e)

    def runtime_in(self, outer: dict) -> list[dict]:
        return [e for e in self.inside(outer) if e.get("cat") in ("cuda_runtime", "cuda_driver", "Runtime")]

    def device_work_of(self, outer: dict) -> list[dict]:
        """Kernels and copies launched from inside ``outer`` (matched by correlation id), in time order."""
        work = []
        for r in self.runtime_in(outer):
            work += self.by_corr.get(r.get("args", {}).get("correlation"), [])
        return sorted(work, key=lambda e: e["ts"])


@pytest.fixture(scope="module")
def gpu_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("gpu")
    plan = {
        "p1_64": ("01_matmul_add.py", ["--size", "64"]),
        "p1_4096": ("01_matmul_add.py", ["--size", "4096", "--warmup"]),
        "p1_4096_compile": ("01_matmul_add.py", ["--size", "4096", "--warmup", "--compile"]),
        "linear": ("02_linear.py", []),
        "mlp": ("03_simple_mlp.py", []),
        "mlp_compile": ("03_simple_mlp.py", ["--compile"]),
    }
    out = {}
    for key, (script, args) in plan.items():
        run = run_script(script, *args, "--device", "cuda", trace_dir=base / key)
        assert run.returncode == 0, run.stderr
        out[key] = run
    return out


def trace_of(run) -> GpuTrace:
    return GpuTrace(next(run.trace_dir.glob("*.json")))


def table_of(run) -> str:
    return next(run.trace_dir.glob("*.txt")).read_text()


def test_p1_3_small_matmul_is_overhead_bound(gpu_runs):
    t = totals(table_of(gpu_runs["p1_64"]))
    assert t["CUDA"] < 0.05 * t["CPU"], t


def test_p1_4_big_matmul_is_compute_bound(gpu_runs):
    run = gpu_runs["p1_4096"]
    t = totals(table_of(run))
    assert t["CUDA"] >= 1.0 and t["CPU"] >= 0.01, t
    trace = trace_of(run)
    gemm = sum(k["dur"] for k in trace.kernels if GEMM.search(k["name"]))
    assert gemm > 0.5 * sum(k["dur"] for k in trace.kernels)


def test_p1_11_occupancy_query_before_gemm_not_before_add(gpu_runs):
    trace = trace_of(gpu_runs["p1_64"])
    for step in trace.steps:
        (mm,) = trace.inside(step, "aten::mm")
        names = [e["name"] for e in trace.runtime_in(mm)]
        launches = [i for i, n in enumerate(names) if LAUNCH.match(n)]
        assert launches and OCCUPANCY in names[: launches[0]], names
        (add,) = trace.inside(step, "aten::add")
        names = [e["name"] for e in trace.runtime_in(add)]
        assert OCCUPANCY not in names and any(LAUNCH.match(n) for n in names), names


def test_p1_12_add_kernel_footprint(gpu_runs):
    trace = trace_of(gpu_runs["p1_64"])
    step = trace.steps[0]
    (add,) = trace.inside(step, "aten::add")
    (kernel,) = trace.device_work_of(add)
    assert kernel["args"].get("registers per thread") == 32
    assert kernel["args"].get("shared memory") == 0


def test_p1_16_p1_17_compile_addmm_same_gemm_and_dtod_seed(gpu_runs):
    eager, compiled = trace_of(gpu_runs["p1_4096"]), trace_of(gpu_runs["p1_4096_compile"])
    eager_gemms = {k["name"] for k in eager.kernels if GEMM.search(k["name"])}
    for step in compiled.steps:
        (addmm,) = compiled.inside(step, "aten::addmm")
        runtime = [e["name"] for e in compiled.runtime_in(step)]
        assert runtime.count("cudaMemcpyAsync") == 1
        assert sum(bool(LAUNCH.match(n)) for n in runtime) == 1
        work = compiled.device_work_of(addmm)
        assert work[0]["name"].startswith("Memcpy DtoD")
        assert GEMM.search(work[1]["name"]) and work[1]["name"] in eager_gemms  # the eager GEMM kernel


def test_p2_1_linear_one_gemm_transpose_no_kernel(gpu_runs):
    trace = trace_of(gpu_runs["linear"])
    for step in trace.steps:
        (t,) = trace.inside(step, "aten::t")
        assert trace.device_work_of(t) == []
        (linear,) = trace.inside(step, "aten::linear")
        kernels = trace.device_work_of(linear)
        assert len(kernels) == 1 and GEMM.search(kernels[0]["name"])
        assert not trace.inside(step, "aten::add")


def test_p2_4_mlp_five_kernels_three_queried(gpu_runs):
    trace = trace_of(gpu_runs["mlp"])
    for step in trace.steps:
        (fwd,) = trace.inside(step, "mlp_fwd")
        kernels = trace.device_work_of(fwd)
        assert len(kernels) == 5, [k["name"] for k in kernels]
        assert sum(bool(GEMM.search(k["name"])) for k in kernels) == 3
        queries = [e for e in trace.runtime_in(fwd) if e["name"] == OCCUPANCY]
        assert len(queries) == 3


def test_p2_7_compiled_mlp_one_fused_triton_kernel(gpu_runs):
    eager, compiled = trace_of(gpu_runs["mlp"]), trace_of(gpu_runs["mlp_compile"])
    eager_gemms = {k["name"] for k in eager.kernels if GEMM.search(k["name"])}
    for step in compiled.steps:
        names = [k["name"] for k in compiled.device_work_of(step)]
        fused = [n for n in names if re.match(r"triton_poi_fused_\w*gelu_mul", n)]
        assert len(fused) == 1, names
        gemms = [n for n in names if GEMM.search(n)]
        assert len(gemms) == 3 and set(gemms) <= eager_gemms
        assert len([e for e in compiled.inside(step, "aten::mm")]) == 3


@pytest.mark.skipif(importlib.util.find_spec("liger_kernel") is None, reason="needs liger-kernel (--extra liger)")
def test_p2_9_liger_one_triton_kernel_no_dynamo(tmp_path):
    run = run_script("03_kernels_mlp.py", "--source", "pip", "--device", "cuda", trace_dir=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Liger GeGLU MLP vs plain PyTorch MLP matches" in run.stdout
    trace = trace_of(run)
    for step in trace.steps:
        names = [e["name"] for e in trace.inside(step)]
        assert names.count("aten::linear") == 3
        assert not any(n.startswith(("Torch-Compiled Region", "TorchDynamo")) for n in names)
        kernels = [k["name"] for k in trace.device_work_of(step)]
        assert sum("geglu" in n for n in kernels) == 1, kernels
