"""The shapes ``record_shapes=True`` writes on an op, for the ops whose arithmetic the roofline counts.

The profiler gives each op's inputs in three parallel lists of its event's ``args``: ``Input Dims``
(one list of sizes per input; ``[]`` for a scalar or None), ``Input type`` (``float``,
``c10::BFloat16``, ``c10::Half``, ``Scalar``...) and, in newer torch, ``Concrete Inputs`` (the
values of scalar arguments as text: ``"True"``, ``"0.5"``). The loader keeps them only for the ops
named here (:func:`wants_shapes`), so a trace's other ops cost nothing. Plain Python (no numpy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from common.dtypes import element_bytes

# GEMMs: aten::matmul, aten::linear and friends dispatch to these, which carry plain 2-D/3-D shapes
GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm"})
# attention in one op, with [batch, heads, seq, head_dim] query/key/value (SDPA and its backends)
SDPA_OPS = frozenset({
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_fused_attention_overrideable",
})
# the kernels' own entry points, query/key/value in [batch, seq, heads, head_dim]
FLASH_OPS = frozenset({"aten::_flash_attention_forward", "aten::_efficient_attention_forward"})
# their backward ops: grad_out first, then query, key, value (same layouts as the forward's)
SDPA_BACKWARD_OPS = frozenset({
    "aten::_scaled_dot_product_flash_attention_backward", "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention_backward", "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    "aten::_scaled_dot_product_fused_attention_overrideable_backward",
})
FLASH_BACKWARD_OPS = frozenset({"aten::_flash_attention_backward", "aten::_efficient_attention_backward"})
BACKWARD_OPS = SDPA_BACKWARD_OPS | FLASH_BACKWARD_OPS
ATTENTION_OPS = SDPA_OPS | FLASH_OPS | BACKWARD_OPS

# a ScalarType argument (``_scaled_mm``'s out_dtype) as Concrete Inputs writes it: c10's enum number
SCALAR_TYPES = {"5": "c10::Half", "6": "float", "7": "double", "15": "c10::BFloat16", "23": "c10::Float8_e5m2",
                "24": "c10::Float8_e4m3fn", "25": "c10::Float8_e5m2fnuz", "26": "c10::Float8_e4m3fnuz"}
# the report's dtype names (the lessons' --dtype), for the peaks table
DTYPE_NAMES = {"float": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16", "double": "fp64",
               "c10::Float8_e4m3fn": "fp8", "c10::Float8_e5m2": "fp8"}


# ops that only move memory, whose least bytes their inputs' shapes give (:mod:`~common.report.facts.op_bytes`):
# an in-place form reads its tensors and writes its first; ``copy_`` reads its source and writes itself; the
# others read each input and write the broadcast of them
MEMORY_OPS = frozenset({
    "aten::mul", "aten::add", "aten::sub", "aten::div", "aten::masked_fill", "aten::where", "aten::clone",
    "aten::_softmax", "aten::_log_softmax", "aten::gelu", "aten::silu", "aten::relu", "aten::neg", "aten::exp",
    "aten::rsqrt", "aten::sigmoid", "aten::tanh", "aten::mul_", "aten::add_", "aten::sub_", "aten::div_",
    "aten::masked_fill_", "aten::copy_", "aten::gelu_", "aten::silu_", "aten::relu_", "aten::exp_",
})


def counts_flops(name: str) -> bool:
    """Whether the roofline counts the FLOPs of an op of this name (a GEMM or attention)."""
    return name in GEMM_OPS or name in ATTENTION_OPS


def wants_shapes(name: str) -> bool:
    """Whether the loader keeps the shapes of an op of this name: the roofline's, and the memory ops'."""
    return counts_flops(name) or name in MEMORY_OPS


@dataclass(frozen=True)
class OpShapes:
    """One op call's inputs as record_shapes gives them (positional, the op's schema order)."""

    dims: tuple  # tuple of tuples of ints per input (() for a scalar or None)
    types: tuple  # str per input ("" where not given)
    concrete: tuple  # str per input ("" where not given); () when the trace has no Concrete Inputs

    @classmethod
    def of(cls, dims, types, concrete) -> Optional["OpShapes"]:
        """From the event's three lists; None where ``Input Dims`` is absent or not lists of integers."""
        if not isinstance(dims, list):
            return None
        out = []
        for d in dims:
            if not isinstance(d, list) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                                                  for n in d):
                d = []  # a tensor list or an odd value: not a tensor's sizes
            out.append(tuple(d))
        return cls(tuple(out), _texts(types, len(out)), _texts(concrete, len(out)) if isinstance(concrete, list) else ())

    def tensor(self, i: int) -> tuple:
        return self.dims[i] if i < len(self.dims) else ()

    def dtype(self, i: int) -> str:
        return self.types[i] if i < len(self.types) else ""

    def flag(self, i: int) -> Optional[bool]:
        """A boolean argument's value from Concrete Inputs; None where not recorded."""
        value = self.concrete[i] if i < len(self.concrete) else ""
        return {"True": True, "False": False, "true": True, "false": False}.get(value.strip())


def _texts(values, n: int) -> tuple:
    values = values if isinstance(values, list) else []
    return tuple((v if isinstance(v, str) else "") for v in values) + ("",) * max(0, n - len(values))


# ----------------------------------------------------------------------------- collectives' messages


def message_bytes(dims, types) -> Optional[int]:
    """Bytes of the tensors a record_shapes op lists (``Input Dims`` and ``Input type``), or None."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    total = 0
    for shape, kind in zip(dims, types):
        if kind == "TensorList" and isinstance(shape, list):
            continue  # the tensors inside a list carry no type here
        size = element_bytes(kind)
        if size is None or not isinstance(shape, list):
            continue
        n = 1
        for d in shape:
            if not isinstance(d, int):
                return None
            n *= d
        total += n * size
    return total or None


def nccl_message_bytes(nelems, dtype) -> Optional[int]:
    """Bytes of a NCCL kernel's message (its ``In msg nelems`` and ``dtype`` arguments), or None."""
    if isinstance(nelems, bool) or not isinstance(dtype, str):
        return None
    try:
        n = int(nelems)
    except (TypeError, ValueError, OverflowError):
        return None
    size = element_bytes(dtype)
    return n * size if size else None
