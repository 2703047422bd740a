"""The attention theme's numbers (:mod:`common.report.rules.attention`, Part 3): what ran inside the ops
Part 3 reads (``aten::masked_fill``, SDPA and its math backend), as :class:`~.subtrees.Subtree`. One
record, :class:`AttentionFacts` (``t.attention``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from common.report.facts.compile import graph_replays
from common.report.facts.subtrees import subtree
from common.report.model.build import CATEGORY_CODES, KERNEL, Model

# the ops whose insides the attention rules read
ATTENTION_PARENTS = ("aten::masked_fill", "aten::_scaled_dot_product_attention_math",
                     "aten::scaled_dot_product_attention")


@dataclass(frozen=True)
class AttentionFacts:
    """What the attention rules read."""

    subtrees: dict  # {op: subtrees.Subtree}: what ran inside the ops of ATTENTION_PARENTS that ran
    replayed: dict = field(default_factory=dict)  # {attention kernel name: ReplayedKernel}: those CUDA graphs replayed


@dataclass(frozen=True)
class ReplayedKernel:
    """One fused attention kernel (the ``attention`` category) that CUDA graphs replayed in the window: no op
    on the CPU launched it, a graph launch did (:func:`~.compile.graph_replays`)."""

    kernels: int  # its replays
    graph_launches: int  # the graph launches that replayed it
    launcher: str  # their call's name (``cudaGraphLaunch``)


def attention_facts(m: Model) -> AttentionFacts:
    """The attention theme's record of one model."""
    return AttentionFacts(subtrees=attention_subtrees(m), replayed=replayed_attention(m))


def replayed_attention(m: Model) -> dict:
    """{kernel name: ReplayedKernel} for the fused attention kernels graph launches replayed, most first."""
    dev = m.dev
    if not m.has_gpu:
        return {}
    by = graph_replays(m)
    rows = np.flatnonzero((by >= 0) & (dev.kind == KERNEL) & (dev.category == CATEGORY_CODES["attention"]))
    counts = Counter(dev.name[rows].tolist())
    out = {}
    for name_id, n in counts.most_common():
        launches = by[rows[dev.name[rows] == name_id]]
        out[m.names[name_id]] = ReplayedKernel(int(n), int(np.unique(launches).size),
                                               m.names[m.cpu.name[launches[0]]])
    return out


def attention_subtrees(m: Model) -> dict:
    """{op: Subtree} for the ops Part 3 reads inside (:data:`ATTENTION_PARENTS`) that ran."""
    out = {}
    for op in ATTENTION_PARENTS:
        found = subtree(m, op)
        if found is not None:
            out[op] = found
    return out
