"""Reading kernel and op names: categories, GEMM names, Inductor's fused kernel names.

Heuristics on names only (that is all a trace carries). Each function takes one name and is
called once per distinct name, never per event.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from common.report.model.short_names import short_name  # noqa: F401  (the names' readers import it from here)

# ----------------------------------------------------------------------------- categories

CATEGORIES = {
    "triton_pointwise": "Triton pointwise",
    "triton_reduction": "Triton reduction",
    "triton_persistent": "Triton persistent reduction",
    "triton_other": "Triton (template, user kernel)",
    "attention": "fused attention (flash/efficient/cuDNN)",
    "gemm": "GEMM (cuBLAS/CUTLASS)",
    "cudnn": "cuDNN (conv)",
    "normalization": "softmax/normalisation (reduction)",
    "aten": "ATen elementwise/reduce",
    "memcpy": "memcpy",
    "memset": "memset",
    "communication": "NCCL/communication",
    "other": "other",
}

# one kernel for all of attention: xformers' CUTLASS fmha (SDPA's efficient backend), FlashAttention
# (SDPA's flash backend, pytorch_flash::, or the flash-attn library / the Hub's, flash::), cuDNN's
# generated SDPA kernels
_ATTENTION = re.compile(r"^(?:void )?(?:fmha_cutlass|[\w:]*flash_(?:fwd|bwd)\w*_kernel|cudnn_generated\w*_sdpa_)", re.I)
_COMM = re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|sendrecv", re.I)
_CUDNN = re.compile(r"cudnn|cask_|miopen|implicit_convolve|_fprop_|_dgrad_|_wgrad_|winograd|convolve|"
                    r"conv2d|conv_?kernel|fft2d|\bconv", re.I)
_GEMM = re.compile(r"gemm|gemv|cutlass|xmma|nvjet|cublas|Cijk_|splitKreduce|wgmma|matmul", re.I)
_ATEN = re.compile(r"at::native|elementwise|reduce_kernel|at::cuda|vectorized|unrolled", re.I)
# softmax and the norms: a reduction over each row, then each element scaled by it (PyTorch's and others')
_NORMALIZATION = re.compile(r"softmax|layer_?norm|rms_?norm|batch_?norm|group_?norm|instance_?norm", re.I)
_PLAIN = re.compile(r"^[A-Za-z_]\w*$")  # a kernel named like a Python function: no C++ signature, scope or template


@lru_cache(maxsize=None)
def kernel_category(name: str, kind: str = "kernel") -> str:
    """One of :data:`CATEGORIES` for a device event (``kind`` kernel/memcpy/memset)."""
    if kind in ("memcpy", "memset"):
        return kind
    if name.startswith("triton_"):
        tag = name[7:10]
        return {"poi": "triton_pointwise", "red": "triton_reduction", "per": "triton_persistent"}.get(
            tag, "triton_other")
    if _ATTENTION.search(name):
        return "attention"
    if _COMM.search(name):
        return "communication"
    if _CUDNN.search(name):
        return "cudnn"
    if _GEMM.search(name):
        return "gemm"
    if _NORMALIZATION.search(name):
        return "normalization"
    if _ATEN.search(name):
        return "aten"
    return "other"


_TENSOR_CORE = re.compile(r"16816|1688|884|16832|161616|8816|tensorop|xmma|wgmma|hmma|imma|nvjet|"
                          r"tensor\d+x\d+|_tc_|s16|h16|bf16_s", re.I)


_CUDA_CORES = re.compile(r"ffma|simt|sgemm|dgemm|hgemm_?simt", re.I)  # fp32 FMA on CUDA cores (not tf32)


@lru_cache(maxsize=None)
def uses_tensor_cores(name: str) -> bool:
    """Whether a kernel name says it runs on tensor cores (MMA shape, ``tensorop``, ``xmma``, a 16-bit
    fused attention kernel...). An fp32 FMA kernel (``sgemm``, ``..._ffma_...``, ``simt``) does not,
    even when its family (``xmma``) also has tensor-core members."""
    if _CUDA_CORES.search(name) and "tf32" not in name.lower():
        return False
    if kernel_category(name) == "attention":
        d = decode_attention(name)
        return bool(d and d.get("dtype") in ("bf16", "fp16", "16-bit"))
    return bool(_TENSOR_CORE.search(name))


def jit_category(name: str, launch: str) -> str:
    """A kernel's category once its launch is known: a kernel of no known family, named like a Python
    function and launched through the driver API (``cuLaunchKernel[Ex]``: Triton's launcher; PyTorch's
    own kernels go through ``cudaLaunchKernel``), is a Triton kernel written by hand (Liger's
    ``_geglu_tanh_forward_kernel``) or another JIT-compiled one; else :func:`kernel_category`'s."""
    category = kernel_category(name)
    if category == "other" and _PLAIN.match(name) and launch.startswith("cuLaunchKernel"):
        return "triton_other"
    return category


# ----------------------------------------------------------------------------- runtime API names

# Kernel launches as the profiler names them: the runtime API (cudaLaunchKernel, and cudaLaunchKernelExC
# for launches with attributes such as a cluster shape), the driver API (cuLaunchKernel, and
# cuLaunchKernelEx, with which cuBLAS launches its Hopper nvjet kernels) and AMD's hip forms.
_LAUNCH = re.compile(r"^(?:cudaLaunchKernel(?:ExC)?|cuLaunchKernel(?:Ex)?|hipLaunchKernel|hip(?:Ext)?ModuleLaunchKernel)"
                     r"(?:_v\d+)?(?:_ptsz)?$")
# The occupancy queries: cudaOccupancyMaxActiveBlocksPerMultiprocessor[WithFlags] (the posts' A100),
# cudaOccupancyMaxActiveClusters (Hopper's cluster launches), the driver's cuOccupancy... and hipOccupancy...
OCCUPANCY_PREFIXES = ("cudaOccupancy", "cuOccupancy", "hipOccupancy")


def is_launch(name: str) -> bool:
    """Whether a runtime/driver call launches a kernel (cudaLaunchKernel, cuLaunchKernelEx, ...)."""
    return bool(_LAUNCH.match(name))


def is_occupancy_query(name: str) -> bool:
    """Whether a runtime/driver call is an occupancy query (cudaOccupancyMaxActiveBlocksPerMultiprocessor, ...)."""
    return name.startswith(OCCUPANCY_PREFIXES)


# ----------------------------------------------------------------------------- GEMM names

_ARCHS = ("maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")
_ARCH_RE = re.compile(r"(?:^|[^a-z0-9])(" + "|".join(_ARCHS) + r"|sm_?\d{2,3}a?)(?=_)", re.I)
_CUTLASS_ARCH = re.compile(r"cutlass(?:3x)?_(?:sm)?(\d{2,3})_")
_TILE = re.compile(r"(?:tilesize)?(?<![\dx])(\d{2,3})x(\d{2,3})(?:x(\d{1,3}))?(?![\dx])")
_LAYOUT = re.compile(r"_([nt]{2,3})(?=_|>|$|\))", re.I)
_MMA = re.compile(r"(?:^|_)([sdhci])?(\d{3,6})gemm", re.I)
_CUTLASS_TYPES = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "tf32": "tf32", "f64": "fp64", "e4m3": "e4m3",
                  "e5m2": "e5m2", "s8": "int8", "s32": "int32"}
# nvjet's type code, one letter per operand: inputs, accumulator, output (tst = bf16 in, fp32 accumulate,
# bf16 out). Read off names of runs whose dtypes are known; NVIDIA does not document the scheme.
_NVJET_TYPES = {"t": "bf16", "h": "fp16", "s": "fp32"}
EPILOGUE_FLAGS = ("bias", "relu", "gelu")  # nvjet flags naming an epilogue fused into the GEMM


def _dtype(name: str) -> str | None:
    low = name.lower()
    m = re.search(r"(?:^|_)(bf16|fp16|f16|tf32|e4m3|e5m2|fp8|int8|i8|f32|fp32|f64)(?:bf16|f16|f32)?_", low)
    if m:
        return {"f16": "fp16", "f32": "fp32", "i8": "int8"}.get(m.group(1), m.group(1))
    m = re.search(r"(?:^|_)([sdhcz])gemm", low)
    if m:
        return {"s": "fp32", "d": "fp64", "h": "fp16", "c": "complex64", "z": "complex128"}[m.group(1)]
    m = re.search(r"(?:^|_)([hs])\d{3,6}gemm", low)
    if m:
        return {"h": "fp16", "s": "fp32 (accumulate)"}[m.group(1)]
    return None


def _decode_nvjet(name: str) -> dict | None:
    """cuBLAS's nvjet kernels (Hopper and newer), read token by token:

    ``nvjet_sm90_tst_192x208_64x4_2x1_v_bz_coopB_bias_TNT`` -> arch sm90, type code tst (bf16 in, fp32
    accumulate, bf16 out), CTA tile 192x208 (M x N), k-tile 64 x 4 stages, cluster 2x1, flags v/bz/coopB
    (kept verbatim), epilogue bias, layout TNT (op(A), op(B), then a third letter). Older cuBLAS names
    leave out the arch (``nvjet_tst_...``).
    """
    m = re.search(r"nvjet_\w+", name)
    if not m:
        return None
    parts = m.group(0).split("_")[1:]
    out: dict = {"library": "cuBLAS (nvjet)"}
    if parts and re.fullmatch(r"sm\d{2,3}[a-z]?", parts[0]):
        out["arch"] = parts.pop(0)
    if parts and re.fullmatch(r"[a-z]{3,5}", parts[0]):
        code = parts.pop(0)
        out["types"] = code
        if len(code) == 3 and all(c in _NVJET_TYPES for c in code):
            out["dtype"], out["accumulate"], out["output"] = (_NVJET_TYPES[c] for c in code)
    shapes = []
    while parts and re.fullmatch(r"\d+x\d+", parts[0]):
        shapes.append(parts.pop(0))
    out.update(zip(("tile", "stages", "cluster"), shapes))
    if parts and re.fullmatch(r"[NT]{2,3}", parts[-1]):
        out["layout"] = parts.pop()
    out["flags"] = [p for p in parts if p and p not in EPILOGUE_FLAGS]
    out["epilogue"] = [p for p in parts if p in EPILOGUE_FLAGS]
    return out


_CUTLASS3X = re.compile(r"cutlass3x_(sm\d+a?)_([a-z]+)_([a-z]+)_((?:[a-z0-9]+_)+?)(\d+x\d+x\d+)_(\d+x\d+x\d+)_(\d+)_"
                        r"([nt]{2,3})_align(\d+)(?:_(\w+))?")


def _decode_cutlass3x(name: str) -> dict | None:
    """CUTLASS 3 kernels, named by CUTLASS's generator:

    ``cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnn_align8_warpspecialized_
    cooperative_epi_tma`` -> arch sm90, tensor-op GEMM, element types A bf16, B bf16, accumulator f32,
    C bf16, D bf16, CTA tile 128x256x64 (M x N x K), cluster 2x1x1, stages 0 (= chosen by CUTLASS's
    builder: auto), layouts tnn (A, B, C), 8-element alignment, kernel schedule warp-specialized
    cooperative, epilogue schedule TMA.
    """
    m = _CUTLASS3X.search(name.lower())
    if not m:
        return None
    arch, opcode, op, types, tile, cluster, stages, layout, align, schedule = m.groups()
    elems = [_CUTLASS_TYPES.get(t, t) for t in types.rstrip("_").split("_")]
    out: dict = {"library": "CUTLASS 3", "arch": arch, "op": f"{opcode} {op}", "tile": tile, "cluster": cluster,
                 "stages": "auto" if stages == "0" else stages, "layout": layout, "align": int(align)}
    if len(elems) >= 3:
        out["dtype"] = elems[0] if elems[0] == elems[1] else f"{elems[0]} x {elems[1]}"
        out["accumulate"] = elems[2]
        out["output"] = elems[-1]
    if schedule:
        kernel, _, epi = schedule.partition("epi_")
        if kernel.strip("_"):
            out["schedule"] = kernel.strip("_").replace("_", " ")
        if epi:
            out["epilogue_schedule"] = epi.replace("_", " ")
    return out


def _decode_named(name: str) -> dict:
    """cuBLAS/CUTLASS 2 names (ampere_..., volta_sgemm_..., sm90_xmma_..., cutlass_80_...), by pattern."""
    low = name.lower()
    out: dict = {}
    if "cutlass" in low and "cublas" not in low:
        out["library"] = "CUTLASS"
    elif "cijk_" in low:
        out["library"] = "rocBLAS/hipBLASLt"
    elif "gemv" in low:
        out["library"] = "cuBLAS (gemv)"
    else:
        out["library"] = "cuBLAS"
    m = _ARCH_RE.search(low)
    if m:
        out["arch"] = m.group(1)
    else:
        m = _CUTLASS_ARCH.search(low)
        if m:
            out["arch"] = f"sm{m.group(1)}"
    dt = _dtype(name)
    if dt:
        out["dtype"] = dt
    m = _MMA.search(low)
    if m and m.group(2):
        out["mma"] = (m.group(1) or "") + m.group(2)
    m = re.search(r"tilesize(\d+x\d+(?:x\d+)?)", low)
    if m:
        out["tile"] = m.group(1)
    else:
        # the first AxB after the gemm token (skip MMA digits like 16816)
        pos = low.find("gemm")
        m = _TILE.search(low, pos if pos >= 0 else 0) or _TILE.search(low)
        if m:
            out["tile"] = "x".join(g for g in m.groups() if g)
    m = re.search(r"stages?_?(\d+x\d+|\d+)", low)
    if m:
        out["stages"] = m.group(1)
    elif "cutlass" in low:
        m = re.search(r"\d+x\d+_(\d+x\d+)_", low)
        if m:
            out["stages"] = m.group(1)
    lays = _LAYOUT.findall(name)
    if lays:
        out["layout"] = lays[0].lower() if len(lays[0]) == 2 or not lays[0].isupper() else lays[0]
    return out


@lru_cache(maxsize=None)
def decode_gemm(name: str) -> dict | None:
    """Library, arch, dtype, tile, stages, cluster, layout, flags read off a GEMM kernel name; None if not a GEMM.

    ``ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nn`` -> cuBLAS, ampere, bf16,
    MMA s16816 (tensor cores, fp32 accumulate), tile 128x256, k-tile 64 x 3 stages, layout nn.
    Hopper's ``nvjet_sm90_...`` and ``cutlass3x_sm90_...``: see :func:`_decode_nvjet`, :func:`_decode_cutlass3x`.
    ``stages`` is "k-tile x stages" where the name gives both (``64x3``), else the stage count.
    """
    if kernel_category(name) != "gemm":
        return None
    out = _decode_nvjet(name) or _decode_cutlass3x(name) or _decode_named(name)
    out["tensor_cores"] = uses_tensor_cores(name)
    return out


def has_bias_epilogue(d: dict) -> bool:
    """Whether a decoded GEMM name says the bias add runs in the GEMM's epilogue (nvjet's ``bias`` flag)."""
    return "bias" in d.get("epilogue", ())


def describe_gemm(d: dict) -> str:
    parts = [d.get("library", "?")]
    stages = d.get("stages")
    stage_label = "k-tile x stages " if stages and "x" in stages else "stages "
    for key, label in (("arch", ""), ("op", ""), ("dtype", ""), ("accumulate", "accumulate "), ("mma", "MMA "),
                       ("tile", "tile "), ("stages", stage_label), ("cluster", "cluster "), ("layout", "layout "),
                       ("schedule", "schedule "), ("epilogue_schedule", "epilogue schedule ")):
        if d.get(key):
            parts.append(f"{label}{d[key]}")
    if d.get("flags"):
        parts.append("flags " + "/".join(d["flags"]))
    if d.get("epilogue"):
        parts.append("epilogue " + "+".join(d["epilogue"]))
    if d.get("tensor_cores"):
        parts.append("tensor cores")
    return ", ".join(parts)


# ----------------------------------------------------------------------------- fused attention names

_FMHA = re.compile(r"fmha_cutlass([FB])_([a-z0-9]+)_(aligned|notaligned)_(\d+x\d+)(?:_(rf))?_(sm\d+)")
_FLASH_TRAITS = re.compile(r"(pytorch_flash|flash)::(flash_(?:fwd|bwd)\w*_kernel)<\w*traits\w*<(\d+), (\d+), (\d+), (\d+)"
                           r"[^<]*?cutlass::(bfloat16_t|half_t)")
_CUDNN_SDPA = re.compile(r"cudnn_generated_\w*?_sdpa_(sm\d+)_(\w+?)_(wg?mma)_([a-z0-9]+)_knob_(\d+)_(\d+x\d+x\d+)"
                         r"(?:_(\d+x\d+x\d+))?(?:_cga(\d+x\d+x\d+))?")
_CUTLASS_DTYPES = {"bfloat16_t": "bf16", "half_t": "fp16", "bf16": "bf16", "f16": "16-bit", "fp16": "fp16",
                   "f32": "fp32", "fp32": "fp32"}


@lru_cache(maxsize=None)
def decode_attention(name: str) -> dict | None:
    """The parts of a fused attention kernel's name; None for other kernels.

    ``fmha_cutlassF_bf16_aligned_64x64_rf_sm80`` -> SDPA's efficient backend (xformers' memory-efficient
    attention on CUTLASS): forward, bf16, aligned inputs, 64x64 tile, output kept in the register file,
    built for sm80. ``pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, ...bfloat16_t``
    -> SDPA's flash backend (FlashAttention-2, vendored in PyTorch): head dim 64, 128x128 tile, 4 warps,
    bf16. ``cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_6_128x64x64_4x1x1_cga1x1x1``
    -> cuDNN's generated SDPA kernel: sm80, a flash-style forward, WMMA tensor-core instructions on
    16-bit floats, pre-tuned configuration ("knob") 6, tile 128x64x64, cluster 1x1x1. The ``4x1x1``
    after the tile is not read: it is not the warps (H100's sm90 kernel named ``..._4x1x1_...`` runs
    384 threads, 12 warps), and cuDNN does not document it.
    """
    if kernel_category(name) != "attention":
        return None
    m = _FMHA.search(name)
    if m:
        direction, dtype, aligned, tile, rf, arch = m.groups()
        return {"backend": "efficient", "library": "xformers' memory-efficient attention (CUTLASS)",
                "pass": "forward" if direction == "F" else "backward", "dtype": _CUTLASS_DTYPES.get(dtype, dtype),
                "aligned": aligned == "aligned", "tile": tile, "register_file": bool(rf), "arch": arch}
    m = _FLASH_TRAITS.search(name)
    if m:
        ns, kernel, head_dim, block_m, block_n, warps, dtype = m.groups()
        vendored = ns == "pytorch_flash"
        return {"backend": "flash" if vendored else "flash-attn",
                "library": "FlashAttention-2, vendored in PyTorch" if vendored else "FlashAttention (flash-attn)",
                "pass": "backward" if "bwd" in kernel else "forward", "split_kv": "splitkv" in kernel,
                "head_dim": int(head_dim), "tile": f"{block_m}x{block_n}", "warps": int(warps),
                "dtype": _CUTLASS_DTYPES[dtype]}
    m = _CUDNN_SDPA.search(name)
    if m:
        arch, algorithm, mma, dtype, knob, tile, _, cluster = m.groups()
        return {"backend": "cudnn", "library": "cuDNN, generated for this problem", "arch": arch,
                "algorithm": algorithm.replace("_", " "), "pass": "backward" if "bprop" in algorithm else "forward",
                "mma": mma, "dtype": _CUTLASS_DTYPES.get(dtype, dtype), "knob": int(knob), "tile": tile,
                "cluster": cluster}
    flash = "flash" in name.lower()
    return {"backend": "flash" if flash else "attention", "library": "FlashAttention" if flash else "fused attention"}


def describe_attention(d: dict) -> str:
    """``SDPA efficient (xformers' memory-efficient attention (CUTLASS)): forward, bf16, aligned, tile 64x64, ...``."""
    parts = [d.get("pass"), d.get("dtype"), "aligned" if d.get("aligned") else None,
             f"head dim {d['head_dim']}" if d.get("head_dim") else None, f"tile {d['tile']}" if d.get("tile") else None,
             f"{d['warps']} warps" if d.get("warps") else None,
             "register file" if d.get("register_file") else None, d.get("algorithm"),
             f"{d['mma'].upper()} tensor cores" if d.get("mma") else None,
             f"knob {d['knob']}" if d.get("knob") is not None else None,
             f"cluster {d['cluster']}" if d.get("cluster") else None, f"built for {d['arch']}" if d.get("arch") else None]
    return f"{d['library']}: " + ", ".join(p for p in parts if p)


# ----------------------------------------------------------------------------- Inductor names

_FUSED = re.compile(r"^(?:graph_\d+_)?(triton_(poi|red|per|tem|for)_|cpp_)?fused_(.*?)(?:_(\d+))?$")
_WORD = re.compile(r"_*[A-Za-z][A-Za-z0-9]*_?")  # an op name with no underscore inside (gelu, _softmax, copy_)


@lru_cache(maxsize=1)
def _aten_names() -> frozenset:
    """ATen's op names and higher-order ops with an underscore inside (aten_op_names.txt, from torch)."""
    text = Path(__file__).with_name("aten_op_names.txt").read_text()
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


def split_fused_ops(body: str) -> list[str] | None:
    """The ATen ops a fused kernel's name lists: Inductor joins the sorted names of the ops it fused
    with '_' (``_unsafe_view_gelu_mul`` -> _unsafe_view, gelu, mul;
    ``_scaled_dot_product_flash_attention_for_cpu`` -> that one op). Each part is an ATen name with
    underscores or one word, the parts in sorted order, the fewest parts; None where no split is sorted
    (names Inductor made otherwise, such as its graph's node names ``mul_1``)."""
    cuts = [i for i, c in enumerate(body) if c == "_"] + [len(body)]
    known = _aten_names()

    @lru_cache(maxsize=None)
    def fewest(start: int, last: str) -> tuple | None:
        if start >= len(body):
            return ()
        best = None
        for end in (c for c in reversed(cuts) if c > start):  # longest first
            part = body[start:end]
            if part <= last or not (part in known or _WORD.fullmatch(part)):
                continue
            rest = fewest(end + 1, part)
            if rest is not None and (best is None or len(rest) + 1 < len(best)):
                best = (part,) + rest
        return best

    ops = fewest(0, "")
    return list(ops) if ops else None


@lru_cache(maxsize=None)
def decode_fused(name: str) -> dict | None:
    """``triton_poi_fused__unsafe_view_gelu_mul_0`` -> Triton, pointwise, fuses _unsafe_view+gelu+mul.

    Also Inductor's CPU kernels, ``cpp_fused_...`` and ``graph_0_cpp_fused_...`` (C++/OpenMP).
    None for names that are not Inductor fused kernels.
    """
    m = _FUSED.match(name)
    if not m or not (m.group(1) or name.startswith("graph_")):
        return None
    kind = m.group(2)
    backend = "Triton" if kind else "C++ (Inductor CPU)"
    what = {"poi": "pointwise", "red": "reduction", "per": "persistent reduction", "tem": "template",
            "for": "foreach", None: "fused loop"}[kind]
    ops = split_fused_ops(m.group(3))
    return {"backend": backend, "kind": what, "ops": ops or [], "index": m.group(4), "fused_name": m.group(3)}


def describe_fused(d: dict) -> str:
    """``Triton, pointwise, fuses _unsafe_view+gelu+mul``; the name's middle whole where it does not split."""
    fuses = "+".join(d["ops"]) if d["ops"] else f"the ops named in '{d['fused_name']}'"
    return f"{d['backend']}, {d['kind']}, fuses {fuses}"


# ----------------------------------------------------------------------------- op names

# Ops that only make a new view of the same memory, or read/allocate metadata: no arithmetic, no
# data moved (on a GPU: no kernel, 0 CUDA time).
VIEW_OPS = ("aten::t", "aten::transpose", "aten::view", "aten::reshape", "aten::as_strided", "aten::_unsafe_view",
            "aten::permute", "aten::expand", "aten::unsqueeze", "aten::squeeze", "aten::slice", "aten::select",
            "aten::alias", "aten::detach", "aten::numpy_T", "aten::view_as", "aten::unflatten", "aten::flatten",
            "aten::_reshape_alias")
METADATA_OPS = frozenset(VIEW_OPS + (
    "aten::resolve_conj", "aten::resolve_neg", "aten::empty", "aten::empty_like", "aten::empty_strided",
    "aten::lift_fresh", "aten::result_type", "aten::_has_compatible_shallow_copy_type", "aten::is_same_size",
    "aten::size", "aten::stride", "aten::dim",
))
