"""Synthetic Kineto traces of the lessons' GPU runs, A100-style and Hopper-style, built on the CPU.

A :class:`Style` says how a GPU and torch version show the posts' claims: kernel names, the launch
call, the occupancy query before a GEMM (or none), the bias seed copy (or none). The builders lay
out the lessons' call trees (``ProfilerStep#N`` -> annotation -> ``aten::`` ops -> runtime calls)
with kernels and copies on the GPU lane, tied to their launches by correlation id, as Kineto does.
Keyword arguments break a trace in one named way, so each check can be shown to fail.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>(int)"
GELU = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int)"
MUL = "void at::native::vectorized_elementwise_kernel<4, at::native::binary_internal::MulFunctor<float>>(int)"
FUSED = "triton_poi_fused__unsafe_view_gelu_mul_0"
GEGLU = "_geglu_tanh_forward_kernel"
SPLITK_REDUCE = "void cublasLt::splitKreduce_kernel<32, 16, int, __nv_bfloat16, float>(cublasLt::cublasSplitKParams<float>)"


@dataclass(frozen=True)
class Style:
    label: str
    gpu: str
    major: int
    mm_gemm: str  # eager aten::mm
    addmm_gemm: str  # 01's compiled aten::addmm (a full bias matrix)
    linear_gemm: str  # nn.Linear's aten::addmm (a bias vector)
    mlp_gemms: tuple  # gate/up, down
    launch: str  # the call that launches a GEMM
    query: Optional[str]  # the occupancy query before a GEMM launch, or None
    bias_copy: bool  # a Memcpy DtoD before 01's compiled addmm


A100 = Style(
    "A100", "NVIDIA A100-SXM4-80GB", 8,
    mm_gemm="ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn",
    addmm_gemm="ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn",
    linear_gemm="ampere_bf16_s16816gemm_bf16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn",
    mlp_gemms=("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn",
               "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"),
    launch="cudaLaunchKernel", query="cudaOccupancyMaxActiveBlocksPerMultiprocessor", bias_copy=True)
# real A100 traces name the query ...WithFlags (../shared/traces/hta/a100_rank3.json.gz)
A100_FLAGS = replace(A100, label="A100 (WithFlags)", query="cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags")
H200 = Style(
    "H200", "NVIDIA H200", 9,
    mm_gemm="nvjet_sm90_tst_192x208_64x4_2x1_v_bz_coopB_TNN",
    addmm_gemm="nvjet_sm90_tst_192x208_64x4_2x1_v_coopB_TNN",  # beta=1 (the bias as C): the flags differ
    linear_gemm="nvjet_sm90_tst_64x8_64x16_4x1_v_bz_bias_TNT",
    mlp_gemms=("nvjet_sm90_tst_192x208_64x4_2x1_v_bz_coopB_TNT", "nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_TNT"),
    launch="cuLaunchKernelEx", query=None, bias_copy=False)
H200_CLUSTER = replace(H200, label="H200 (cluster query)", query="cudaOccupancyMaxActiveClusters")
H100_COPY = replace(H200, label="H100 (bias copy)", gpu="NVIDIA H100 80GB HBM3", bias_copy=True)
STYLES = (A100, A100_FLAGS, H200, H200_CLUSTER, H100_COPY)


class TraceBuilder:
    """Events on one CPU thread and one GPU stream; ``cpu()`` blocks nest by time as in a real trace."""

    def __init__(self, style: Style, tid: int = 100):
        self.style, self.tid = style, tid
        self.events: list[dict] = []
        self.t = 0.0  # the CPU clock, µs
        self.gpu_t = 0.0  # when the GPU stream is free
        self.corr = 1

    def _x(self, name, ts, dur, cat, pid=1, tid=None, **args) -> None:
        e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": self.tid if tid is None else tid,
             "ts": ts, "dur": dur}
        if args:
            e["args"] = args
        self.events.append(e)

    @contextlib.contextmanager
    def cpu(self, name: str, cat: str = "cpu_op"):
        start = self.t
        self.t += 1.0
        yield
        self.t += 1.0
        self._x(name, start, self.t - start, cat)

    def step(self, number: int):
        return self.cpu(f"ProfilerStep#{number}", "user_annotation")

    def call(self, name: str, dur: float = 2.0, **args) -> None:
        cat = "cuda_driver" if name.startswith("cu") and not name.startswith("cuda") else "cuda_runtime"
        self._x(name, self.t, dur, cat, **args)
        self.t += dur + 0.5

    def kernel(self, name: str, dur: float, launch: str = "cudaLaunchKernel", query: Optional[str] = None,
               smem: int = 0, regs: int = 32) -> None:
        if query:
            self.call(query, correlation=self.corr + 100_000)
        corr = self._next()
        self.call(launch, 4.0, correlation=corr)
        start = max(self.gpu_t, self.t + 5.0)
        self._x(name, start, dur, "kernel", pid=0, tid=7, correlation=corr, device=0, stream=7,
                **{"shared memory": smem, "registers per thread": regs, "grid": [8, 1, 1], "block": [128, 1, 1]})
        self.gpu_t = start + dur

    def gemm(self, name: str, dur: float, query="style", launch: Optional[str] = None, split_k: bool = False) -> None:
        query = self.style.query if query == "style" else query
        self.kernel(name, dur, launch or self.style.launch, query, smem=98_304, regs=232)
        if split_k:
            self.kernel(SPLITK_REDUCE, 2.0, self.style.launch)

    def memcpy(self, nbytes: int, dur: float, name: str = "Memcpy DtoD (Device -> Device)") -> None:
        corr = self._next()
        self.call("cudaMemcpyAsync", 3.0, correlation=corr)
        start = max(self.gpu_t, self.t + 5.0)
        self._x(name, start, dur, "gpu_memcpy", pid=0, tid=7, correlation=corr, device=0, stream=7, bytes=nbytes)
        self.gpu_t = start + dur

    def _next(self) -> int:
        self.corr += 1
        return self.corr

    def doc(self) -> dict:
        self.call("cudaDeviceSynchronize", 30.0)
        props = [{"id": 0, "name": self.style.gpu, "computeMajor": self.style.major, "computeMinor": 0,
                  "numSms": 132 if self.style.major >= 9 else 108}]
        return {"schemaVersion": 1, "deviceProperties": props, "traceEvents": list(self.events)}

    def write(self, path: Path) -> Path:
        Path(path).write_text(json.dumps(self.doc()))
        return Path(path)


def _steps(b: TraceBuilder, steps: int):
    for i in range(steps):
        b.t += 20.0
        yield i, b.step(i + 2)


def matmul_add(style: Style, *, steps: int = 3, gemm_us: float = 5.0, add_us: float = 2.0, mm_query="style",
               add_query: Optional[str] = None, add_smem: int = 0) -> dict:
    """01_matmul_add.py eager: matmul_add -> aten::matmul -> aten::mm (GEMM), then aten::add."""
    b = TraceBuilder(style)
    for _, step in _steps(b, steps):
        with step, b.cpu("matmul_add", "user_annotation"):
            with b.cpu("aten::matmul"), b.cpu("aten::mm"):
                b.gemm(style.mm_gemm, gemm_us, query=mm_query)
            with b.cpu("aten::add"):
                b.kernel(ADD, add_us, query=add_query, smem=add_smem)
    return b.doc()


def compiled_matmul_add(style: Style, *, steps: int = 3, copy: Optional[bool] = None, gemm: Optional[str] = None,
                        copy_after: bool = False, copy_steps: Optional[set] = None) -> dict:
    """01_matmul_add.py --compile: the compile frames around one aten::addmm (with or without its copy)."""
    b = TraceBuilder(style)
    copy = style.bias_copy if copy is None else copy
    for i, step in _steps(b, steps):
        with step, b.cpu("matmul_add", "user_annotation"), b.cpu("Torch-Compiled Region: 0/0"):
            with b.cpu("TorchDynamo Cache Lookup"):
                pass
            with b.cpu("## Call CompiledFxGraph fabc123 ##"), b.cpu("aten::addmm"):
                copies = copy and (copy_steps is None or i in copy_steps)
                if copies and not copy_after:
                    b.memcpy(4096 * 4096 * 2, 33.0)
                b.gemm(gemm or style.addmm_gemm, 580.0)
                if copies and copy_after:
                    b.memcpy(4096 * 4096 * 2, 33.0)
    return b.doc()


def linear(style: Style, *, steps: int = 3, bias_kernel: bool = False, t_kernel: bool = False) -> dict:
    """02_linear.py: linear_fwd -> aten::linear -> aten::t (no kernel) + aten::addmm (one GEMM)."""
    b = TraceBuilder(style)
    for _, step in _steps(b, steps):
        with step, b.cpu("linear_fwd", "user_annotation"), b.cpu("aten::linear"):
            with b.cpu("aten::t"), b.cpu("aten::transpose"), b.cpu("aten::as_strided"):
                if t_kernel:
                    b.kernel("void at::native::elementwise_kernel<128, 2>(int)", 2.0)
            with b.cpu("aten::addmm"):
                if bias_kernel:
                    b.kernel("void at::native::elementwise_kernel<128, 4, copy>(int)", 2.0)
                b.gemm(style.linear_gemm, 6.0)
    return b.doc()


def mlp(style: Style, *, steps: int = 3, split_k: bool = False, unqueried: int = 0, gelu_kernels: int = 1,
        stray_kernel: bool = False) -> dict:
    """03_simple_mlp.py eager: mlp_fwd -> 3 aten::linear -> aten::mm, aten::gelu, aten::mul."""
    b = TraceBuilder(style)
    gate_up, down = style.mlp_gemms

    def proj(name, index):
        with b.cpu("aten::linear"), b.cpu("aten::matmul"):
            with b.cpu("aten::_unsafe_view"):
                pass
            with b.cpu("aten::mm"):
                b.gemm(name, 90.0, query=None if index < unqueried else "style", split_k=split_k and index == 2)

    for _, step in _steps(b, steps):
        with step, b.cpu("mlp_fwd", "user_annotation"):
            proj(gate_up, 0)
            with b.cpu("aten::gelu"):
                for _ in range(gelu_kernels):
                    b.kernel(GELU, 40.0)
            proj(gate_up, 1)
            with b.cpu("aten::mul"):
                b.kernel(MUL, 40.0)
            proj(down, 2)
            if stray_kernel:
                b.kernel(ADD, 3.0)
    return b.doc()


def compiled_mlp(style: Style, *, steps: int = 3, fused: tuple = (FUSED,), gemm: Optional[str] = None) -> dict:
    """03_simple_mlp.py --compile: 3 aten::mm (extern kernels) and Inductor's fused Triton kernel(s)."""
    b = TraceBuilder(style)
    gate_up, down = style.mlp_gemms
    for _, step in _steps(b, steps):
        with step, b.cpu("mlp_fwd", "user_annotation"), b.cpu("Torch-Compiled Region: 0/0"):
            with b.cpu("## Call CompiledFxGraph fdef456 ##"):
                for name in (gemm or gate_up, gate_up):
                    with b.cpu("aten::mm"):
                        b.gemm(name, 90.0)
                for name in fused:
                    with b.cpu(name):
                        b.kernel(name, 60.0, launch="cuLaunchKernel")
                with b.cpu("aten::mm"):
                    b.gemm(down, 80.0)
    return b.doc()


def liger(style: Style, *, steps: int = 3, compiled: bool = False, geglu_kernels: int = 1) -> dict:
    """03_kernels_mlp.py: 3 aten::linear and LigerGELUMulFunction's one Triton kernel."""
    b = TraceBuilder(style)
    gate_up, down = style.mlp_gemms
    for _, step in _steps(b, steps):
        with step, b.cpu("kernels_mlp_fwd", "user_annotation"):
            if compiled:
                with b.cpu("TorchDynamo Cache Lookup"):
                    pass
            for name in (gate_up, gate_up):
                with b.cpu("aten::linear"), b.cpu("aten::mm"):
                    b.gemm(name, 90.0)
            with b.cpu("LigerGELUMulFunction"):
                for _ in range(geglu_kernels):
                    b.kernel(GEGLU, 60.0, launch="cuLaunchKernel")
            with b.cpu("aten::linear"), b.cpu("aten::mm"):
                b.gemm(down, 80.0)
    return b.doc()


def table(cpu_ms: float, cuda_ms: float) -> str:
    """The end of a profiler table: its two totals."""
    return (f"-------------------------------------------------------\n"
            f"Self CPU time total: {cpu_ms:.3f}ms\nSelf CUDA time total: {cuda_ms * 1000:.3f}us\n")


def write_run(folder: Path, doc: dict, table_text: str, tag: str = "64_bf16_cold_eager") -> Path:
    """A lesson run's folder as run_all.py leaves it: the gzipped trace and the table."""
    import gzip

    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{tag}.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    (folder / f"{tag}.txt").write_text(table_text)
    return folder


def hopper_runs(base: Path, style: Style = H200, **broken) -> Path:
    """GPU_RUNS_DIR-style folders (tests/gpu/lesson_runs.py keys) of synthetic runs in one style.
    ``broken`` maps a key to the trace to use instead (to make one claim fail)."""
    docs = dict(p1_64=(matmul_add(style), table(2.314, 0.012)),
                p1_4096=(matmul_add(style, gemm_us=200.0, add_us=20.0), table(0.8, 0.65)),
                p1_4096_compile=(compiled_matmul_add(style), table(1.6, 1.8)),
                linear=(linear(style), table(0.9, 0.02)),
                mlp=(mlp(style), table(1.2, 0.9)),
                mlp_compile=(compiled_mlp(style), table(1.5, 0.8)))
    for key, (doc, text) in docs.items():
        write_run(base / key, broken.get(key, doc), text)
    return base
