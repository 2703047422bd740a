"""One op call's arithmetic from its ``record_shapes``: FLOPs, ideal bytes, its shape in words.

The roofline (:mod:`.roofline`) counts these ops (:mod:`~common.report.load.shapes` names them):

- **GEMMs** (``aten::mm``, ``addmm``, ``bmm``, ``baddbmm``, ``_scaled_mm``): ``[M,K] @ [K,N]`` does
  ``2·M·N·K`` FLOPs (times the batch for ``bmm``), plus ``M·N`` for a bias (``addmm``, ``baddbmm``,
  ``_scaled_mm`` given one). Ideal bytes: every input read once and the output written once, each at
  its own dtype's size. ``_scaled_mm`` (fp8): its fp8 inputs at 1 byte an element, its scales and bias
  at theirs (a 0-dim scale's 4 bytes are not counted: record_shapes gives it no sizes), and its output
  at ``out_dtype`` (``Concrete Inputs``; the inputs' dtype when not given).
- **Attention forward** (SDPA and its backends' ops): its two GEMMs, ``q·kᵀ`` and ``scores·v``:
  ``2·B·H·Sq·Sk·(D + Dv)`` (``4·B·H·S²·D`` for square heads), halved when the op's ``is_causal`` says
  the kernel skips the masked half; softmax and scaling are not counted (as
  :func:`common.attention.flops`). Ideal bytes: q, k, v read and the output written, at q's dtype:
  the ``[seq, seq]`` scores are not in it.
- **Attention backward** (``aten::_scaled_dot_product_flash_attention_backward``,
  ``_efficient_attention_backward``, ``_flash_attention_backward``, the cuDNN and CPU ones...): the
  five GEMMs of FlashAttention's backward pass, which recomputes the scores instead of reading them:
  ``S = q·kᵀ`` (D), ``dV = Pᵀ·dO`` (Dv), ``dP = dO·vᵀ`` (Dv), ``dQ = dS·k`` (D), ``dK = dSᵀ·q`` (D):
  ``2·B·H·Sq·Sk·(3·D + 2·Dv)``, halved when causal. For square heads that is 2.5x the forward's
  FLOPs: the convention of FlashAttention's own benchmarks (Dao-AILab/flash-attention,
  ``benchmarks/benchmark_flash_attention.py``: ``flops(..., mode="bwd") = 2.5 * f``) and of the
  FlashAttention-2 paper's figures (Dao, 2023, section 4.1), so rates compare with theirs. Ideal
  bytes: dO, q, k, v and the output read, the logsumexp (fp32, one per query row) read, dq, dk, dv
  written, at q's dtype.

Plain Python over :class:`~common.report.load.shapes.OpShapes` (no numpy).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Optional

from common.dtypes import element_bytes
from common.report.load.shapes import (ATTENTION_OPS, BACKWARD_OPS, DTYPE_NAMES, FLASH_BACKWARD_OPS,
                                  FLASH_OPS, GEMM_OPS, SCALAR_TYPES, OpShapes)

# where an attention op's is_causal sits among its inputs (its schema's position)
CAUSAL_AT = {"aten::scaled_dot_product_attention": 5, "aten::_scaled_dot_product_flash_attention": 4,
             "aten::_scaled_dot_product_efficient_attention": 6, "aten::_scaled_dot_product_cudnn_attention": 6,
             "aten::_scaled_dot_product_flash_attention_for_cpu": 4,
             "aten::_scaled_dot_product_fused_attention_overrideable": 5, "aten::_flash_attention_forward": 8,
             "aten::_scaled_dot_product_flash_attention_backward": 11,
             "aten::_scaled_dot_product_efficient_attention_backward": 11,
             "aten::_scaled_dot_product_cudnn_attention_backward": 14,
             "aten::_scaled_dot_product_flash_attention_for_cpu_backward": 7,
             "aten::_scaled_dot_product_fused_attention_overrideable_backward": 13,
             "aten::_flash_attention_backward": 11}
# the xformers-style kernels take a custom_mask_type instead: 1 and 2 are causal
MASK_TYPE_AT = {"aten::_efficient_attention_forward": 9, "aten::_efficient_attention_backward": 14}
SCALED_MM_OUT_DTYPE_AT = 6
LOGSUMEXP_BYTES = 4  # fp32, one per query row and head


@dataclass(frozen=True)
class Work:
    """One call's arithmetic: FLOPs, ideal bytes (None where a dtype is unknown), its shape in words."""

    flops: int
    bytes: Optional[int]
    shape: str  # the tensor inputs' sizes: "64x64 @ 64x64"
    dtype: str  # bf16 | fp16 | fp32 | ... ("" unknown)
    causal: Optional[bool] = None  # attention: whether the FLOPs were halved (None: not attention, or not recorded)


def work_of(op: str, shapes: Optional[OpShapes]) -> Optional[Work]:
    """The arithmetic of one call of ``op`` from its record_shapes; None where the shapes do not say."""
    if shapes is None:
        return None
    if op in GEMM_OPS:
        return _gemm(op, shapes)
    if op in ATTENTION_OPS:
        return _attention(op, shapes)
    return None


def _gemm(op: str, s: OpShapes) -> Optional[Work]:
    bias_first = op in ("aten::addmm", "aten::baddbmm")
    a_at = 1 if bias_first else 0
    a, b = s.tensor(a_at), s.tensor(a_at + 1)
    if len(a) != len(b) or len(a) not in (2, 3) or a[-1] != b[-2]:
        return None
    batch = a[0] if len(a) == 3 else 1
    m, k, n = a[-2], a[-1], b[-1]
    out = batch * m * n
    scaled = op == "aten::_scaled_mm"
    bias = bias_first or (scaled and bool(s.tensor(4)))
    flops = 2 * batch * m * n * k + (out if bias else 0)
    if scaled:
        nbytes = _scaled_mm_bytes(s, out)
    else:
        size = element_bytes(s.dtype(a_at))
        tensors = [a, b] + ([s.tensor(0)] if bias_first else [])
        nbytes = size * (sum(_numel(t) for t in tensors) + out) if size is not None else None
    shape = " @ ".join("x".join(map(str, t)) for t in (a, b)) + (
        f" + {'x'.join(map(str, s.tensor(0)))}" if bias_first else "")
    return Work(flops, nbytes, shape, DTYPE_NAMES.get(s.dtype(a_at), s.dtype(a_at)))


def _scaled_mm_bytes(s: OpShapes, out: int) -> Optional[int]:
    """``_scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, ...)``: every tensor input at
    its own dtype's size, the output at ``out_dtype`` (the inputs' dtype where not given)."""
    recorded = s.concrete[SCALED_MM_OUT_DTYPE_AT].strip() if len(s.concrete) > SCALED_MM_OUT_DTYPE_AT else ""
    out_dtype = SCALAR_TYPES.get(recorded) if recorded else s.dtype(0)
    sizes = [(element_bytes(s.dtype(i)), _numel(s.tensor(i))) for i in range(5) if s.tensor(i)]
    out_size = element_bytes(out_dtype or "")
    if out_size is None or any(size is None for size, _ in sizes):
        return None
    return sum(size * n for size, n in sizes) + out_size * out


def _attention(op: str, s: OpShapes) -> Optional[Work]:
    backward = op in BACKWARD_OPS
    q_at = 1 if backward else 0  # a backward op takes grad_out first
    q, k, v = s.tensor(q_at), s.tensor(q_at + 1), s.tensor(q_at + 2)
    if not (len(q) == len(k) == len(v) == 4):
        return None
    if op in FLASH_OPS or op in FLASH_BACKWARD_OPS:  # [batch, seq, heads, dim]
        (b, sq, h, d), sk, dv = q, k[1], v[3]
    else:  # [batch, heads, seq, dim]
        (b, h, sq, d), sk, dv = q, k[2], v[3]
    causal = _causal(op, s)
    flops = 2 * b * h * sq * sk * ((3 * d + 2 * dv) if backward else (d + dv))
    if causal:
        flops //= 2
    size = element_bytes(s.dtype(q_at))
    out = b * h * sq * dv
    tensors = _numel(q) + _numel(k) + _numel(v)
    if size is None:
        nbytes = None
    elif backward:  # read dO, q, k, v, out and the logsumexp; write dq, dk, dv
        nbytes = size * (2 * out + 2 * tensors) + LOGSUMEXP_BYTES * b * h * sq
    else:  # read q, k, v; write out
        nbytes = size * (tensors + out)
    shape = ", ".join("x".join(map(str, t)) for t in (q, k, v)) + (" causal" if causal else "") + (
        " backward" if backward else "")
    return Work(flops, nbytes, shape, DTYPE_NAMES.get(s.dtype(q_at), s.dtype(q_at)), causal)


def _causal(op: str, s: OpShapes) -> Optional[bool]:
    if op in MASK_TYPE_AT:
        at = MASK_TYPE_AT[op]
        value = s.concrete[at].strip() if len(s.concrete) > at else ""
        return {"0": False, "1": True, "2": True}.get(value)
    return s.flag(CAUSAL_AT[op]) if op in CAUSAL_AT else None


def _numel(dims: tuple) -> int:
    return prod(dims) if dims else 0
