"""Memory: what the [memory] events (--profile-memory) say about the lessons' allocations.

Each rule reads :class:`~common.report.facts.memory.Memory` (``t.memory``, None without memory events) and the
lesson's knobs for the shapes; a trace without either gets no finding.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from common.report.facts import knob_work, workload
from common.report.findings import Finding
from common.report.facts.tables import Tables

ROUNDING = 512  # the CUDA caching allocator rounds blocks up to 512 B: a scores block may be that much larger
MIN_FIT = 0.8  # R² of a per-token trend before the rule calls it one


def _b(n: float) -> str:
    return f"{n:,.0f} B"


def attention_scores_memory(t: Tables):
    """Attention's memory per forward (--profile-memory, 04_a/b/c/d): how many blocks the size of a
    [batch, heads, seq, seq] score matrix one forward allocates, and which ops allocate them. Naive
    attention allocates several (the matmul's scores, the scale, softmax); the out-of-place
    ``masked_fill`` one more, its copy (``masked_fill_`` writes in place: 04_b); a fused kernel
    (SDPA flash) none: the scores are never materialised as a tensor."""
    k, mem = t.knobs, t.memory
    if mem is None or k is None:
        return None
    matrix = workload.scores(k.work) if k.work else knob_work.legacy_scores(k)
    if matrix is None:
        return None
    scores = matrix.bytes
    rows = [a for a in mem.annotations
            if (a.name == matrix.annotation if matrix.annotation else a.name.endswith("_fwd"))]
    if not rows:
        return None
    a = max(rows, key=lambda r: r.allocated_bytes_per_call)
    score_sized = sum(per_call for size, per_call in a.largest_sizes if scores <= size <= scores + ROUNDING)
    copy = next((o.bytes_per_call for o in a.ops if o.name == "aten::masked_fill"), 0.0)
    shape = f"[{', '.join(map(str, matrix.shape))}] {matrix.dtype}"
    head = (f"{a.name} allocates {_b(a.allocated_bytes_per_call)} per forward in {a.allocations_per_call:g} "
            f"allocations on the {a.device}")
    if score_sized:
        ops = ", ".join(o.name for o in a.ops if scores <= o.largest_bytes <= scores + ROUNDING)
        message = f"{head}: {score_sized:g} of them the size of a {shape} score matrix ({_b(scores)}): {ops}"
        if copy:
            message += f"; aten::masked_fill's copy is {_b(copy)} of it per forward"
        hint = ("the out-of-place masked_fill copies the scores: masked_fill_ writes in place, one score "
                "matrix less per forward" if copy else
                "a fused attention kernel (SDPA's flash backend) never materialises the score matrix")
    else:
        message = (f"{head}, none as large as a {shape} score matrix ({_b(scores)}): the largest is "
                   f"{_b(a.largest_allocation_bytes)}; the scores are never materialised")
        hint = ""
    return Finding("attention_scores_memory", message, hint, dict(
        annotation=a.name, device=a.device, allocated_bytes_per_call=a.allocated_bytes_per_call,
        allocations_per_call=a.allocations_per_call, scores_shape=list(matrix.shape), scores_bytes=scores,
        score_sized_per_call=score_sized, largest_bytes=a.largest_allocation_bytes,
        masked_fill_copy_bytes_per_call=copy, ops={o.name: o.bytes_per_call for o in a.ops}))


def kv_cache_growth(t: Tables):
    """The KV cache on the memory curve (--profile-memory, an LLM's ``decode`` calls): a cache that grows
    by concatenation (transformers' DynamicCache) allocates more in every decode, and the memory live
    after each decode rises by the new token's keys and values (2 x layers x batch x kv_heads x head_dim
    x bytes); a preallocated cache (StaticCache) is written in place: every decode allocates the same."""
    mem = t.memory
    a = mem.annotation("decode") if mem is not None else None
    if a is None or a.calls < 3:
        return None
    alloc_slope, alloc_fit = _per_token(a.allocated_bytes_of_calls, a.step_of_calls)
    live_slope, live_fit = _per_token(a.allocated_at_call_end_bytes, a.step_of_calls)
    if alloc_slope is None:
        return None
    evidence = dict(annotation="decode", device=a.device, calls=a.calls,
                    allocated_bytes_per_call=a.allocated_bytes_per_call, allocated_growth_per_token=alloc_slope,
                    live_growth_per_token=live_slope, allocated_fit=alloc_fit, live_fit=live_fit)
    flat = abs(alloc_slope) * len(set(a.step_of_calls)) * a.calls < 0.01 * a.allocated_bytes_per_call
    if alloc_slope > 0 and alloc_fit >= MIN_FIT:
        live = f"; the memory live after each decode rises by {_b(live_slope)} per token" if live_slope else ""
        return Finding("kv_cache_growth", f"each decode allocates {_b(alloc_slope)} more than the one before "
                       f"({_b(min(a.allocated_bytes_of_calls))} to {_b(max(a.allocated_bytes_of_calls))} per decode "
                       f"on the {a.device}){live}: a cache that grows with every token (concatenated)",
                       f"a static cache ({_static_flag(t)}) is allocated once, before the decodes, and "
                       "written in place", evidence | dict(verdict="grows"))
    if flat:
        live = f"; the memory live after each decode changes by {_b(live_slope)} per token" if live_slope is not None else ""
        return Finding("kv_cache_growth", f"every decode allocates the same {_b(a.allocated_bytes_per_call)} on the "
                       f"{a.device} ({alloc_slope:+,.0f} B per token){live}: no cache grows in the decodes (a "
                       "preallocated cache is written in place)", "", evidence | dict(verdict="flat"))
    return Finding("kv_cache_growth", f"cannot tell whether a cache grows: the allocations per decode change by "
                   f"{alloc_slope:+,.0f} B per token, with no steady trend (R² {alloc_fit:.2f})", "",
                   evidence | dict(verdict="cannot tell"), level="note")


def _static_flag(t: Tables) -> str:
    """How this run asks for a static cache: its own script's flag, else transformers' name for it."""
    return f"{t.knobs.script}.py --cache static" if t.knobs is not None else "StaticCache"


def _per_token(values: tuple, steps: tuple) -> tuple[Optional[float], float]:
    """(slope per call, R²) of ``values`` against the call's position in its step (each step a request)."""
    x, y = [], []
    for step in dict.fromkeys(steps):
        mine = [v for v, s in zip(values, steps) if s == step]
        if len(mine) >= 2:
            position = np.arange(len(mine), dtype=np.float64)
            x.append(position - position.mean())
            y.append(np.array(mine, dtype=np.float64) - np.mean(mine))
    if not x:
        return None, 0.0
    x, y = np.concatenate(x), np.concatenate(y)
    if not (x ** 2).sum():
        return None, 0.0
    slope = float((x * y).sum() / (x ** 2).sum())
    total = float((y ** 2).sum())
    fit = 1.0 - float(((y - slope * x) ** 2).sum()) / total if total else 1.0
    return slope, fit
