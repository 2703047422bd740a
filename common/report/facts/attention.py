"""The attention theme's numbers (:mod:`common.report.rules.attention`, Part 3): what ran inside the ops
Part 3 reads (``aten::masked_fill``, SDPA and its math backend), as :class:`~.subtrees.Subtree`. One
record, :class:`AttentionFacts` (``t.attention``)."""

from __future__ import annotations

from dataclasses import dataclass

from common.report.facts.subtrees import subtree
from common.report.model.build import Model

# the ops whose insides the attention rules read
ATTENTION_PARENTS = ("aten::masked_fill", "aten::_scaled_dot_product_attention_math",
                     "aten::scaled_dot_product_attention")


@dataclass(frozen=True)
class AttentionFacts:
    """What the attention rules read."""

    subtrees: dict  # {op: subtrees.Subtree}: what ran inside the ops of ATTENTION_PARENTS that ran


def attention_facts(m: Model) -> AttentionFacts:
    """The attention theme's record of one model."""
    return AttentionFacts(subtrees=attention_subtrees(m))


def attention_subtrees(m: Model) -> dict:
    """{op: Subtree} for the ops Part 3 reads inside (:data:`ATTENTION_PARENTS`) that ran."""
    out = {}
    for op in ATTENTION_PARENTS:
        found = subtree(m, op)
        if found is not None:
            out[op] = found
    return out
