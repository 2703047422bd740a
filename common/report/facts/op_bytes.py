"""The least bytes a memory op must move, from its ``record_shapes`` (:data:`~common.report.load.shapes.MEMORY_OPS`).

Each tensor input read once and the output written once, at their element sizes (``Input type``):

- an in-place op (``aten::mul_``, ``masked_fill_``...): its tensors read, its first (itself) written;
- ``aten::copy_(self, src)``: ``src`` read, ``self`` written;
- any other (``mul``, ``masked_fill``, ``where``, ``_softmax``, ``clone``...): its tensors read, and an output
  the broadcast of their shapes written, at the smallest element size among them (type promotion only widens
  it: a lower bound either way).

A scalar (``[]``) moves nothing; an input whose size or type the trace does not give, or shapes that do not
broadcast, leave the op's bytes unknown (None). Plain Python over :class:`~common.report.load.shapes.OpShapes`.
"""

from __future__ import annotations

from math import prod
from typing import Optional

from common.dtypes import element_bytes
from common.report.load.shapes import OpShapes


def memory_bytes(op: str, shapes: Optional[OpShapes]) -> Optional[int]:
    """The least bytes one call of the memory op ``op`` moves, by its shapes; None where they do not say."""
    if shapes is None:
        return None
    tensors = [(dims, element_bytes(shapes.dtype(i))) for i, dims in enumerate(shapes.dims) if dims]
    if not tensors or any(size is None for _, size in tensors):
        return None
    read = sum(prod(dims) * size for dims, size in tensors)
    if op == "aten::copy_":
        if len(tensors) < 2:
            return None
        (dst, dst_size), (src, src_size) = tensors[:2]
        return prod(src) * src_size + prod(dst) * dst_size
    if op.endswith("_"):
        dims, size = tensors[0]
        return read + prod(dims) * size
    out = _broadcast([dims for dims, _ in tensors])
    return None if out is None else read + prod(out) * min(size for _, size in tensors)


def _broadcast(shapes: list) -> Optional[tuple]:
    """The broadcast of ``shapes`` (numpy's rule, from the last axis), None where they do not broadcast."""
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(-rank, 0):
        sizes = {s[axis] for s in shapes if len(s) >= -axis} - {1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)
