"""The op chains the lessons set side by side: per call of each phase (a user annotation), how many
times a few named ops ran inside it.

The LLM lesson's variants differ in exactly these ops: its KV cache is written by ``aten::cat``
(a dynamic cache: every token, each layer's keys and values are copied into a new, longer tensor)
or by ``aten::index_copy_`` (a static cache: written in place into the preallocated tensor), and
its attention runs as one ``aten::scaled_dot_product_attention`` per layer (Part 3's 04_c) or as
``aten::bmm`` + ``aten::softmax`` (``--attn eager``: Part 3's 04_a chain). Counting them per call
is what the rules read; which op means what is the rules' business.
"""

from __future__ import annotations

import numpy as np

from common.report.model.build import ANNOTATION, OP, Model
from common.report.facts.phases import calls_in_window, subtree_ends

CHAIN_OPS = ("aten::cat", "aten::index_copy_", "aten::scaled_dot_product_attention", "aten::softmax", "aten::bmm",
             "aten::matmul")


def phase_chains(m: Model, phase_names) -> dict[str, dict[str, float]]:
    """{phase: {op: calls per call of the phase}} for the ops of :data:`CHAIN_OPS` nested in the
    phase's calls on their thread (only the ops that ran; phases with none are left out)."""
    cpu = m.cpu
    ids = {m.names.index(op): op for op in CHAIN_OPS if op in m.names}
    if not ids:
        return {}
    is_op = cpu.kind == OP
    running = {op: np.concatenate(([0], np.cumsum(is_op & (cpu.name == nid)))) for nid, op in ids.items()}
    out = {}
    for phase in phase_names:
        idx = calls_in_window(m, phase, ANNOTATION)
        if not idx.size:
            continue
        ends = subtree_ends(m, idx)
        counts = {op: int((seen[ends] - seen[idx + 1]).sum()) for op, seen in running.items()}
        per_op = {op: n / idx.size for op, n in counts.items() if n}
        if per_op:
            out[phase] = per_op
    return out
