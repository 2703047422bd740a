"""Bytes per element, by every name a dtype goes by here and in the traces the report reads: the one table.

Plain Python: the lessons import it before torch, the report without it.
"""

from __future__ import annotations

from typing import Optional

ELEMENT_BYTES = {
    # the lessons' names: --dtype, the knobs' dtype, the work count's (common/work.py)
    "bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "fp8": 1,
    # torch's own, where the count meets a dtype the lessons do not name (torch.int64 -> int64)
    "bfloat16": 2, "float16": 2, "float32": 4, "float64": 8, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint8": 1, "bool": 1,
    # record_shapes' ``Input type`` (GEMMs, attention, a collective's annotation)
    "float": 4, "double": 8, "c10::BFloat16": 2, "c10::Half": 2, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1, "long int": 8, "int": 4, "short int": 2,
    "signed char": 1, "unsigned char": 1,
    # NCCL kernels' ``dtype`` argument
    "Float": 4, "Double": 8, "BFloat16": 2, "Half": 2, "Long": 8, "Int": 4, "Short": 2, "Char": 1, "Byte": 1,
    "Bool": 1,
}


def element_bytes(name) -> Optional[int]:
    """Bytes per element of the dtype called ``name`` (any of the spellings above), or None."""
    return ELEMENT_BYTES.get(name) if isinstance(name, str) else None
