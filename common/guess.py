"""Guess first, then look: the habit the series closes on, as data.

A lesson declares what its post expects one annotated call to run, item by item (a matmul, a
mul, a softmax...), each with the ops that would do that work. The lesson writes the guess into
the trace's knobs; the report lines it up against what ran, mismatches first: on a GPU the kernels
and copies the call launched (each named by the op that launched it), on the CPU the ops that did
the arithmetic (the same ops: a GPU kernel's launching op is the CPU's compute op).

No torch, no numpy: the lessons import this before torch, the report when it reads the knobs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# The ops that do one kind of work, as the trace names them (a GPU kernel's launching op is one of these).
MATMUL = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm")
SOFTMAX = ("aten::_softmax", "aten::softmax", "aten::_safe_softmax")
MASKED_FILL = ("aten::masked_fill_", "aten::masked_fill")
# the ops that run attention as one fused kernel: SDPA's flash, efficient and cuDNN backends (GPU), its
# fused CPU kernel, and the Hub's flash-attn2 (a custom op named after its function)
FUSED_ATTENTION = ("aten::_flash_attention_forward", "aten::_efficient_attention_forward",
                   "aten::_cudnn_attention_forward", "aten::_scaled_dot_product_flash_attention_for_cpu",
                   "aten::_scaled_dot_product_fused_attention_overrideable")


@dataclass(frozen=True)
class Expected:
    """One piece of work the post expects: in words (ASCII: the profiler's metadata writer mangles a
    backslash escape), and the ops that would do it."""

    what: str
    ops: tuple[str, ...]


@dataclass(frozen=True)
class Guess:
    annotation: str  # the record_function whose calls are guessed about
    source: str  # where the guess comes from, in the post's words
    items: tuple[Expected, ...]

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Any) -> "Guess | None":
        """The guess from a trace's knobs; None when absent or malformed."""
        if not isinstance(raw, dict):
            return None
        try:
            items = tuple(Expected(str(i["what"]), tuple(str(o) for o in i["ops"])) for i in raw["items"])
            annotation, source = str(raw["annotation"]), str(raw.get("source", ""))
        except (KeyError, TypeError, ValueError):
            return None
        return cls(annotation, source, items) if items and annotation else None


def guess(annotation: str, source: str, *items: tuple[str, str | tuple[str, ...]]) -> Guess:
    """``guess("attn_fwd", "Part 3", ("matmul q @ k.T", MATMUL), ("mul", "aten::mul"))``."""
    return Guess(annotation, source, tuple(Expected(what, (ops,) if isinstance(ops, str) else tuple(ops))
                                           for what, ops in items))
