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


# Part 3: the attention lessons' kernels (the names of a real trace, shortened where only the start is read)
MUL_BF16 = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, "
            "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, ...)")
MASKED_FILL = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::(anonymous "
               "namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda(c10::BFloat16, bool)#1}> >"
               "(int, ...)")
SOFTMAX = ("void (anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, c10::BFloat16, "
           "(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)")
SOFTMAX_F32 = ("void (anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
               "(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)")
TO_FLOAT = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
            "::{lambda(float)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int> >(int, ...)")
MUL_F32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
           "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, ...)")
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<bool>, std::array<char*, 1ul> >(int, ...)"
FILL_F32 = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, ...)"
TRIU_TRIL = ("void at::native::triu_tril_kernel<bool, int, false, 4, true>(at::cuda::detail::TensorInfo<bool, int>, "
             "at::cuda::detail::TensorInfo<bool const, int>, long, long, long, long)")
LOGICAL_NOT = ("void at::native::vectorized_elementwise_kernel<4, at::native::logical_not_kernel_cuda(at::TensorIteratorBase&)"
               "::{lambda(bool)#1}, std::array<char*, 2ul> >(int, ...)")
WHERE = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::(anonymous namespace)"
         "::where_kernel_impl(at::TensorIterator&)::{lambda(bool, float, float)#1}> >(int, ...)")
ADD_F32 = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
           "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)")
EQ = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, bool, "
      "at::native::(anonymous namespace)::CompareEqFunctor<float> >, std::array<char*, 3ul> >(int, ...)")
ALL = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<bool, at::native::func_wrapper_t<bool, "
       "at::native::and_kernel_cuda(at::TensorIterator&)::{lambda(bool, bool)#1}>, unsigned int, bool, 4> >(...)")
TO_BF16 = ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)"
           "::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int> >(int, ...)")
FLASH = ("void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
         "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, "
         "false, false, false, true, false, false>(pytorch_flash::Flash_fwd_params)")
EFFICIENT = ("fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
             "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)")
HUB_FLASH = ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, "
             "Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, false, true, false, "
             "false>(flash::Flash_fwd_params)")
HUB_OP = "_flash_attn2_e7d5f0e::fwd"  # the Hub kernel's op, named per build (a guess at its form)


@dataclass(frozen=True)
class Attn:
    """How a GPU shows Part 3's runs: kernel names, footprints (registers per thread, block, shared memory,
    est. achieved occupancy %), device and CPU time per forward."""

    bf16_gemms: tuple  # the naive attention's q·kᵀ and attn·v: bf16 on tensor cores
    fp32_gemms: tuple  # SDPA math's upcast GEMMs: fp32 on CUDA cores
    cudnn: str
    flash_fp: tuple  # (registers, block, shared memory, est. occupancy %)
    efficient_fp: tuple
    cudnn_fp: tuple
    fused_us: tuple  # device µs per forward: efficient, flash, cudnn
    cpu_us: tuple  # CPU µs per forward: efficient, flash, cudnn
    gemm_us: tuple = (520.0, 2900.0)  # one GEMM of the naive attention, one of math's


A100_ATTN = Attn(
    bf16_gemms=("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
                "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_nn"),
    fp32_gemms=("ampere_sgemm_128x64_tn", "ampere_sgemm_128x128_nn"),
    cudnn="cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_cga1x1x1_kernel0_0",
    flash_fp=(255, [128, 1, 1], 49152, 13), efficient_fp=(128, [32, 4, 1], 0, 25),
    cudnn_fp=(240, [256, 1, 1], 73728, 0),
    fused_us=(277.9, 146.8, 186.3), cpu_us=(117.0, 138.0, 214.0))
# Hopper: cuBLAS names its bf16 GEMMs nvjet (the batched ones are a guess at the form) and runs fp32 on an
# sm80 FFMA kernel (names seen on H100/H20); cuDNN's kernel is sm90 wgmma (a real D=128 name, here D=64:
# the knob and tile are guesses), 168 registers x 384 threads; flash and efficient keep their sm80 builds.
H200_ATTN = Attn(
    bf16_gemms=("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "nvjet_sm90_tst_128x64_64x8_2x1_v_bz_NNT"),
    fp32_gemms=("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_"
                "execute_kernel__5x_cublas",
                "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x128x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_"
                "execute_kernel__5x_cublas"),
    cudnn="cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
    flash_fp=(255, [128, 1, 1], 49152, 13), efficient_fp=(128, [32, 4, 1], 18_944, 25),
    cudnn_fp=(168, [384, 1, 1], 134_144, 0),  # as the real H100 traces (tests/data/h100) launch them
    fused_us=(150.0, 95.0, 61.0), cpu_us=(55.0, 62.0, 150.0), gemm_us=(190.0, 1400.0))

A100_PROPS = (("totalGlobalMem", 85_051_572_224), ("maxThreadsPerBlock", 1024), ("maxThreadsPerMultiprocessor", 2048),
              ("regsPerBlock", 65536), ("regsPerMultiprocessor", 65536), ("warpSize", 32), ("sharedMemPerBlock", 49152),
              ("sharedMemPerMultiprocessor", 167936), ("sharedMemPerBlockOptin", 166912))
H200_PROPS = (("totalGlobalMem", 150_110_011_392), ("maxThreadsPerBlock", 1024), ("maxThreadsPerMultiprocessor", 2048),
              ("regsPerBlock", 65536), ("regsPerMultiprocessor", 65536), ("warpSize", 32), ("sharedMemPerBlock", 49152),
              ("sharedMemPerMultiprocessor", 233472), ("sharedMemPerBlockOptin", 232448))


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
    props: tuple = A100_PROPS  # deviceProperties beyond name, compute capability and SM count
    attn: Attn = A100_ATTN
    # a 4-byte Memset (cudaMemsetAsync) right before each GEMM whose name holds this, and before cuDNN's
    # attention kernel: H100 traces (torch 2.11) show one before every cooperative nvjet_..._coopA GEMM
    memset_before: Optional[str] = None


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
    launch="cuLaunchKernelEx", query=None, bias_copy=False, props=H200_PROPS, attn=H200_ATTN, memset_before="coopA")
H200_CLUSTER = replace(H200, label="H200 (cluster query)", query="cudaOccupancyMaxActiveClusters")
# the H100 runs of 01 (tests/data/h100/runs/p1_4096, p1_4096_compile): compiled, the copy, a 4-byte memset, the GEMM
H100_COPY = replace(H200, label="H100 (bias copy)", gpu="NVIDIA H100 80GB HBM3", bias_copy=True,
                    mm_gemm="nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
                    addmm_gemm="nvjet_sm90_tst_256x128_64x4_1x2_h_badd_coopA_NNT")
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
               smem: int = 0, regs: int = 32, grid: Optional[list] = None, block: Optional[list] = None,
               occupancy: Optional[float] = None) -> None:
        if query:
            self.call(query, correlation=self.corr + 100_000)
        corr = self._next()
        self.call(launch, 4.0, correlation=corr)
        start = max(self.gpu_t, self.t + 5.0)
        args = {"shared memory": smem, "registers per thread": regs, "grid": grid or [8, 1, 1], "block": block or [128, 1, 1]}
        if occupancy is not None:  # as Kineto writes them (blocks/warps per SM: the launch's, not the resident ones)
            sms = 132 if self.style.major >= 9 else 108
            blocks = args["grid"][0] * args["grid"][1] * args["grid"][2] / sms
            args.update({"blocks per SM": blocks, "warps per SM": blocks * args["block"][0] * args["block"][1] / 32,
                         "est. achieved occupancy %": occupancy})
        self._x(name, start, dur, "kernel", pid=0, tid=7, correlation=corr, device=0, stream=7, **args)
        self.gpu_t = start + dur

    def busy(self, us: float) -> None:
        """CPU time spent in the current op itself (its self time)."""
        self.t += us

    def gemm(self, name: str, dur: float, query="style", launch: Optional[str] = None, split_k: bool = False) -> None:
        query = self.style.query if query == "style" else query
        if self.style.memset_before and self.style.memset_before in name:
            self.memset(4)
        self.kernel(name, dur, launch or self.style.launch, query, smem=98_304, regs=232)
        if split_k:
            self.kernel(SPLITK_REDUCE, 2.0, self.style.launch)

    def graph_launch(self, kernels: tuple, correlate: bool = True) -> None:
        """One ``cudaGraphLaunch`` replaying ``kernels`` ((name, µs), ...) back to back: each carries the
        launch's correlation id, as CUPTI writes a replay, or (``correlate=False``) none at all."""
        corr = self._next()
        self.call("cudaGraphLaunch", 8.0, correlation=corr)
        start = max(self.gpu_t, self.t + 5.0)
        for name, dur in kernels:
            args = {"correlation": corr} if correlate else {}
            self._x(name, start, dur, "kernel", pid=0, tid=7, device=0, stream=7, grid=[8, 1, 1], block=[128, 1, 1],
                    **args)
            start += dur + 0.5
        self.gpu_t = start

    def memcpy(self, nbytes: int, dur: float, name: str = "Memcpy DtoD (Device -> Device)") -> None:
        corr = self._next()
        self.call("cudaMemcpyAsync", 3.0, correlation=corr)
        start = max(self.gpu_t, self.t + 5.0)
        self._x(name, start, dur, "gpu_memcpy", pid=0, tid=7, correlation=corr, device=0, stream=7, bytes=nbytes)
        self.gpu_t = start + dur

    def memset(self, nbytes: int, dur: float = 0.7) -> None:
        corr = self._next()
        self.call("cudaMemsetAsync", 3.0, correlation=corr)
        start = max(self.gpu_t, self.t + 5.0)
        self._x("Memset (Device)", start, dur, "gpu_memset", pid=0, tid=7, correlation=corr, device=0, stream=7,
                bytes=nbytes)
        self.gpu_t = start + dur

    def _next(self) -> int:
        self.corr += 1
        return self.corr

    def doc(self) -> dict:
        self.call("cudaDeviceSynchronize", 30.0)
        props = [{"id": 0, "name": self.style.gpu, "computeMajor": self.style.major, "computeMinor": 0,
                  "numSms": 132 if self.style.major >= 9 else 108, **dict(self.style.props)}]
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


# ----------------------------------------------------------------------------- Part 3: attention

ATTN_BYTES = 8 * 16 * 1024 * 1024 * 2  # the [8, 16, 1024, 1024] bf16 scores the out-of-place masked_fill copies


def _matmul(b: TraceBuilder, gemm: str, dur: float, op: str = "aten::bmm") -> None:
    with b.cpu("aten::matmul"):
        with b.cpu("aten::expand"):
            pass
        with b.cpu("aten::reshape"), b.cpu("aten::view"):
            pass
        with b.cpu(op):
            b.gemm(gemm, dur)
        with b.cpu("aten::_unsafe_view"):
            pass


def naive_attention(style: Style, *, steps: int = 3, inplace: bool = False, copy: Optional[bool] = None,
                    stray_copy: bool = False, gemms: Optional[tuple] = None, gemm_us: Optional[float] = None,
                    ops: Optional[tuple] = None) -> dict:
    """04_a_naive_attention.py (04_b with ``inplace``): attn_fwd -> matmul (bmm), mul, masked_fill (->
    clone -> copy_: the Memcpy, then masked_fill_) or masked_fill_, softmax, matmul.
    ``copy`` (default: not ``inplace``) says whether the mask step copies the scores first;
    ``stray_copy`` adds a Memcpy from an aten::copy_ of its own; ``ops`` replaces the ops' order."""
    b = TraceBuilder(style)
    copy = not inplace if copy is None else copy
    qk, av = gemms or style.attn.bf16_gemms
    gemm_us = gemm_us if gemm_us is not None else style.attn.gemm_us[0]

    def mask():
        if inplace and not copy:
            with b.cpu("aten::masked_fill_"):
                b.kernel(MASKED_FILL, 240.0)
            return
        with b.cpu("aten::masked_fill_" if inplace else "aten::masked_fill"):
            with b.cpu("aten::clone"):
                with b.cpu("aten::empty_like"), b.cpu("aten::empty_strided"):
                    pass
                with b.cpu("aten::copy_"):
                    if copy:
                        b.memcpy(ATTN_BYTES, 190.0)
            with b.cpu("aten::masked_fill_"):
                b.kernel(MASKED_FILL, 240.0)

    def scale():
        with b.cpu("aten::mul"):
            b.kernel(MUL_BF16, 150.0)

    def softmax():
        with b.cpu("aten::softmax"), b.cpu("aten::_softmax"):
            b.kernel(SOFTMAX, 400.0)

    steps_of = {"matmul": None, "mul": scale, "mask": mask, "softmax": softmax}
    for _, step in _steps(b, steps):
        with step, b.cpu("attn_fwd", "user_annotation"):
            gemm_names = [qk, av]
            for what in ops or ("matmul", "mul", "mask", "softmax", "matmul"):
                if what == "matmul":
                    if len(gemm_names) == 2:
                        with b.cpu("aten::transpose"), b.cpu("aten::as_strided"):  # k.transpose(-2, -1): a view
                            pass
                    _matmul(b, gemm_names.pop(0), gemm_us)
                else:
                    steps_of[what]()
            if stray_copy:
                with b.cpu("aten::copy_"):
                    b.memcpy(ATTN_BYTES, 190.0)
    return b.doc()


def math_attention(style: Style, *, steps: int = 3, gemms: Optional[tuple] = None, mask: bool = True,
                   safe_softmax: bool = True, upcast: bool = True, gemm_us: Optional[float] = None) -> dict:
    """04_c_sdpa_attention.py --backend math: sdpa_fwd -> aten::scaled_dot_product_attention ->
    aten::_scaled_dot_product_attention_math: q, k, v to fp32, the causal mask built (ones -> tril,
    logical_not, scalar_tensor -> fill_, where), two fp32 bmm, add_, _safe_softmax, back to bf16: 20 kernels."""
    b = TraceBuilder(style)
    qk, av = gemms or style.attn.fp32_gemms
    gemm_us = gemm_us if gemm_us is not None else style.attn.gemm_us[1]

    def op(name, *kernels, dur=60.0):
        with b.cpu(name):
            for k in kernels:
                b.kernel(k, dur)

    def scalar_tensor():
        with b.cpu("aten::scalar_tensor"), b.cpu("aten::fill_"):
            b.kernel(FILL_F32, 2.0)

    for _, step in _steps(b, steps):
        with step, b.cpu("sdpa_fwd", "user_annotation"), b.cpu("aten::scaled_dot_product_attention"), \
                b.cpu("aten::_scaled_dot_product_attention_math"):
            if upcast:
                for _ in range(3):
                    with b.cpu("aten::to"), b.cpu("aten::_to_copy"), b.cpu("aten::copy_"):
                        b.kernel(TO_FLOAT, 30.0)
            op("aten::mul", MUL_F32, dur=25.0)
            if mask:
                with b.cpu("aten::ones"), b.cpu("aten::fill_"):
                    b.kernel(FILL, 3.0)
                op("aten::tril", TRIU_TRIL, dur=4.0)
                op("aten::logical_not", LOGICAL_NOT, dur=3.0)
                scalar_tensor()
                op("aten::where", WHERE, dur=5.0)
            with b.cpu("aten::transpose"), b.cpu("aten::as_strided"):
                pass
            op("aten::mul", MUL_F32, dur=25.0)
            _matmul(b, qk, gemm_us)
            if mask:
                op("aten::add_", ADD_F32, dur=500.0)
            if safe_softmax:
                with b.cpu("aten::_safe_softmax"):
                    with b.cpu("aten::softmax"), b.cpu("aten::_softmax"):
                        b.kernel(SOFTMAX_F32, 600.0)
                    scalar_tensor()
                    op("aten::eq", EQ, dur=400.0)
                    op("aten::all", ALL, dur=300.0)
                    scalar_tensor()
                    op("aten::where", WHERE, dur=500.0)
            else:
                with b.cpu("aten::softmax"), b.cpu("aten::_softmax"):
                    b.kernel(SOFTMAX_F32, 600.0)
            _matmul(b, av, gemm_us)
            with b.cpu("aten::to"), b.cpu("aten::_to_copy"), b.cpu("aten::copy_"):
                b.kernel(TO_BF16, 20.0)
    return b.doc()


FUSED_OPS = {"efficient": ("aten::_scaled_dot_product_efficient_attention", "aten::_efficient_attention_forward"),
             "flash": ("aten::_scaled_dot_product_flash_attention", "aten::_flash_attention_forward"),
             "cudnn": ("aten::_scaled_dot_product_cudnn_attention", "aten::_cudnn_attention_forward")}
FUSED_GRIDS = {"efficient": [16, 16, 8], "flash": [8, 8, 16], "cudnn": [8, 16, 8]}


def sdpa_fused(style: Style, backend: str, *, steps: int = 3, kernels: Optional[tuple] = None,
               launch: Optional[str] = None, transposes: Optional[int] = None, fp: Optional[tuple] = None,
               device_us: Optional[float] = None, cpu_us: Optional[float] = None) -> dict:
    """04_c_sdpa_attention.py --backend efficient|flash|cudnn: sdpa_fwd -> aten::scaled_dot_product_attention ->
    the backend's op: flash and efficient transpose q, k, v (3) and the output (1) around one fused kernel
    (cudaLaunchKernel); cuDNN launches its generated kernel with cuLaunchKernelEx and no transpose, its
    CPU time in the ops' self time. Keywords replace the kernel names, the launch, the transpose count,
    the footprint (registers, block, shared memory, est. occupancy %) or the times."""
    a = style.attn
    index = ("efficient", "flash", "cudnn").index(backend)
    name = (EFFICIENT, FLASH, a.cudnn)[index]
    regs, block, smem, occupancy = fp or (a.efficient_fp, a.flash_fp, a.cudnn_fp)[index]
    device_us = device_us if device_us is not None else a.fused_us[index]
    cpu_us = cpu_us if cpu_us is not None else a.cpu_us[index]
    launch = launch or ("cuLaunchKernelEx" if backend == "cudnn" else "cudaLaunchKernel")
    transposes = transposes if transposes is not None else (0 if backend == "cudnn" else 4)
    outer, inner = FUSED_OPS[backend]
    b = TraceBuilder(style)

    def transpose():
        with b.cpu("aten::transpose"), b.cpu("aten::as_strided"):
            pass

    for _, step in _steps(b, steps):
        with step, b.cpu("sdpa_fwd", "user_annotation"):
            start = b.t
            with b.cpu("aten::scaled_dot_product_attention"):
                b.busy(0.6 * cpu_us if backend == "cudnn" else 0.2 * cpu_us)
                with b.cpu(outer):
                    for _ in range(min(transposes, 3)):
                        transpose()
                    with b.cpu(inner):
                        b.busy(0.3 * cpu_us if backend == "cudnn" else 0.1 * cpu_us)
                        for _ in range(2):
                            with b.cpu("aten::empty"):
                                pass
                        if backend == "cudnn" and style.memset_before:
                            b.memset(4)
                        for k in kernels or (name,):
                            b.kernel(k, device_us / len(kernels or (name,)), launch=launch, regs=regs, smem=smem,
                                     grid=FUSED_GRIDS[backend], block=block, occupancy=occupancy)
                    for _ in range(max(transposes - 3, 0)):
                        transpose()
            b.busy(max(cpu_us - (b.t - start) - 2.0, 0.0))  # the rest: Python around the call
    return b.doc()


def hub_attention(style: Style, *, steps: int = 3, kernels: tuple = (HUB_FLASH,)) -> dict:
    """04_d_kernels_attention.py: kernels_attn_fwd -> the Hub kernel's op -> one flash forward kernel."""
    b = TraceBuilder(style)
    regs, block, smem, occupancy = style.attn.flash_fp
    for _, step in _steps(b, steps):
        with step, b.cpu("kernels_attn_fwd", "user_annotation"), b.cpu(HUB_OP):
            for _ in range(2):
                with b.cpu("aten::empty"):
                    pass
            for k in kernels:
                b.kernel(k, 140.0, regs=regs, smem=smem, grid=[8, 8, 16], block=block, occupancy=occupancy)
    return b.doc()


ATTN_TAG = "8x16x1024x64_bf16_warm_eager"


def attention_runs(style: Style) -> dict:
    """Part 3's runs (tests/gpu/lesson_runs.py keys): key -> (trace, table, file tag)."""
    return dict(attn_naive=(naive_attention(style), table(0.4, 2.1), ATTN_TAG),
                attn_inplace=(naive_attention(style, inplace=True), table(0.4, 1.9), ATTN_TAG),
                sdpa_math=(math_attention(style), table(0.9, 7.2), f"{ATTN_TAG}_backend-math"),
                sdpa_efficient=(sdpa_fused(style, "efficient"), table(0.4, 0.8), f"{ATTN_TAG}_backend-efficient"),
                sdpa_flash=(sdpa_fused(style, "flash"), table(0.4, 0.5), f"{ATTN_TAG}_backend-flash"),
                sdpa_cudnn=(sdpa_fused(style, "cudnn"), table(0.7, 0.6), f"{ATTN_TAG}_backend-cudnn"),
                attn_hub=(hub_attention(style), table(0.3, 0.4), ATTN_TAG))


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
    """GPU_RUNS_DIR-style folders (tests/gpu/lesson_runs.py keys, Part 3's included) of synthetic runs in one style.
    ``broken`` maps a key to the trace to use instead (to make one claim fail)."""
    docs = dict(p1_64=(matmul_add(style), table(2.314, 0.012)),
                p1_4096=(matmul_add(style, gemm_us=200.0, add_us=20.0), table(0.8, 0.65)),
                p1_4096_compile=(compiled_matmul_add(style), table(1.6, 1.8)),
                linear=(linear(style), table(0.9, 0.02)),
                mlp=(mlp(style), table(1.2, 0.9)),
                mlp_compile=(compiled_mlp(style), table(1.5, 0.8)))
    for key, (doc, text) in docs.items():
        write_run(base / key, broken.get(key, doc), text)
    for key, (doc, text, tag) in attention_runs(style).items():
        write_run(base / key, broken.get(key, doc), text, tag)
    return base


CUDNN_SM80 = "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x64_4x1x1_cga1x1x1_kernel0_0"


def llm_graphs(style: Style = H200, *, steps: int = 3, layers: int = 2, decodes: int = 2, correlate: bool = True,
               mask_kernels: int = 0) -> dict:
    """05_llm.py under ``reduce-overhead`` with a static cache: an eager ``prefill`` (per layer SDPA ->
    cuDNN's op -> ``mask_kernels`` elementwise kernels (cudaLaunchKernel: the static cache's mask) and its
    attention kernel (cuLaunchKernelEx)), then ``decode`` calls that each replay one CUDA graph holding, per
    layer, a GEMM, cuDNN's sm80 attention kernel and a mul; the replays carry the graph launch's correlation
    id, or (``correlate=False``) none."""
    b = TraceBuilder(style)
    a = style.attn
    for _, step in _steps(b, steps):
        with step:
            with b.cpu("prefill", "user_annotation"):
                for _ in range(layers):
                    with b.cpu("aten::scaled_dot_product_attention"), b.cpu(FUSED_OPS["cudnn"][0]), \
                            b.cpu(FUSED_OPS["cudnn"][1]):
                        for _ in range(mask_kernels):
                            b.kernel(MUL_BF16, 1.5)
                        b.kernel(a.cudnn, 8.0, launch="cuLaunchKernelEx", grid=FUSED_GRIDS["cudnn"])
            for _ in range(decodes):
                with b.cpu("decode", "user_annotation"), b.cpu("## Call CompiledFxGraph abc123 ##"):
                    b.graph_launch(tuple(k for _ in range(layers)
                                         for k in ((style.linear_gemm, 2.5), (CUDNN_SM80, 4.5), (MUL_BF16, 1.2))),
                                   correlate)
                    b.busy(60.0)  # the compiled graph's Python after the launch: the host is the slower side
    return b.doc()


def slow_launch_gap(style: Style = H200, *, steps: int = 3, launch_us: float = 50.0, slow_step: int = 1) -> dict:
    """Two GEMMs a step (aten::mm each); in step ``slow_step`` the second one's launch call takes ``launch_us``
    and begins while the first GEMM still runs: the GPU idles from the first GEMM's end until the slow call
    hands the second over (a gap the launch spans, not one the device side made)."""
    b = TraceBuilder(style)
    for i, step in _steps(b, steps):
        with step, b.cpu("mm2", "user_annotation"):
            with b.cpu("aten::mm"):
                b.kernel(style.mm_gemm, 10.0, launch=style.launch)
            with b.cpu("aten::mm"):
                if i != slow_step:
                    b.kernel(style.mm_gemm, 10.0, launch=style.launch)
                    continue
                corr = b._next()
                b.call(style.launch, launch_us, correlation=corr)
                start = max(b.gpu_t, b.t - 1.0)
                b._x(style.mm_gemm, start, 10.0, "kernel", pid=0, tid=7, correlation=corr, device=0, stream=7,
                     grid=[8, 1, 1], block=[128, 1, 1])
                b.gpu_t = start + 10.0
    return b.doc()
