"""Memory: what the [memory] events (--profile-memory) say about the lessons' allocations.

Each rule reads :class:`~common.report.facts.memory.Memory` (``t.memory``, None without memory events) and the
lesson's knobs for the shapes; a trace without either gets no finding.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from common.dtypes import ELEMENT_BYTES
from common.report.facts import knob_work, workload
from common.report.findings import Finding
from common.amounts import fmt_bytes_exact
from common.report.facts.tables import Tables

ROUNDING = 512  # the CUDA caching allocator rounds blocks up to 512 B: a scores block may be that much larger
MIN_FIT = 0.8  # R² of a per-token trend before the rule calls it one


def attention_scores_memory(t: Tables):
    """With ``--profile-memory``, 04: the allocations of the score tensors' size per forward (``[batch, heads, seq,
    seq]``), at each dtype they come in (the math backend's fp32 scores: twice a 16-bit matrix), named by the ops
    that make them (inside SDPA's one op: ``aten::bmm``, ``aten::_softmax``, ``aten::_to_copy``); the out-of-place
    masked_fill's copy among them, and whether ``masked_fill_`` lowers the peak or only the allocations (how many
    score matrices are live at once with and without the copy); none in a fused backend.

    Naive attention allocates several (the matmul's scores, the scale, softmax); the out-of-place ``masked_fill``
    one more, its copy (``masked_fill_`` writes in place: 04_b): one allocation and one copy less, and a lower peak
    only where the copy is what the peak holds; a fused kernel (SDPA flash) none: the scores are never materialised
    as a tensor."""
    k, mem = t.knobs, t.memory
    if mem is None or k is None:
        return None
    matrix = workload.scores(k.work) if k.work else knob_work.legacy_scores(k)
    if matrix is None:
        return None
    rows = [a for a in mem.annotations
            if (a.name == matrix.annotation if matrix.annotation else a.name.endswith("_fwd"))]
    if not rows:
        return None
    a = max(rows, key=lambda r: r.allocated_bytes_per_call)
    uses = _score_sized(a, matrix)
    score_sized = sum(u.per_call for _, u in uses)
    copy = next((o.bytes_per_call for o in a.ops if o.name == "aten::masked_fill"), 0.0)
    head = (f"{a.name} allocates {fmt_bytes_exact(a.allocated_bytes_per_call)} per forward in "
            f"{a.allocations_per_call:g} allocations on the {a.device}")
    peak = _copy_at_peak(uses)
    if score_sized:
        message = f"{head}: {_score_list(uses, matrix, score_sized)}"
        if copy:
            message += f"; aten::masked_fill's copy is {fmt_bytes_exact(copy)} of it per forward"
        hint = (_in_place_hint(peak) if copy else
                "a fused attention kernel (SDPA's flash backend) never materialises the score matrix")
    else:
        message = (f"{head}, none as large as a {_shape(matrix)} {matrix.dtype} score matrix "
                   f"({fmt_bytes_exact(matrix.bytes)}): the largest is {fmt_bytes_exact(a.largest_allocation_bytes)}; "
                   "the scores are never materialised")
        hint = ""
    return Finding("attention_scores_memory", message, hint, dict(
        annotation=a.name, device=a.device, allocated_bytes_per_call=a.allocated_bytes_per_call,
        allocations_per_call=a.allocations_per_call, scores_shape=list(matrix.shape), scores_bytes=matrix.bytes,
        score_sized_per_call=score_sized,
        score_sized_by_dtype={dtype: u.per_call for dtype, u in uses},
        score_sized_ops={dtype: {s.inner: s.per_call for s in u.sources} for dtype, u in uses},
        scores_live_at_once=max((u.max_live for _, u in uses), default=0),
        peak_without_copy=peak, largest_bytes=a.largest_allocation_bytes,
        masked_fill_copy_bytes_per_call=copy, ops={o.name: o.bytes_per_call for o in a.ops}))


def _shape(matrix) -> str:
    return f"[{', '.join(map(str, matrix.shape))}]"


def _score_sized(a, matrix) -> list:
    """(dtype, SizeUse) of the annotation's blocks the size of the score matrix at the workload's dtype or at
    fp32 (the math backend's upcast), largest first."""
    elements = matrix.bytes // ELEMENT_BYTES[matrix.dtype]
    dtypes = {matrix.dtype: matrix.bytes, "fp32": elements * ELEMENT_BYTES["fp32"]}
    return [(dtype, u) for u in a.sizes for dtype, size in dtypes.items() if size <= u.bytes <= size + ROUNDING]


def _score_list(uses: list, matrix, total: float) -> str:
    """``4 of them the size of a [2, 4, 256, 256] bf16 score matrix (1,048,576 B): aten::matmul, ...``, or by
    dtype: ``3 ...: 2 in fp32 (2,097,152 B: aten::bmm, aten::_softmax), 1 in bf16 (...)``. An op under the
    annotation that makes one of them is named; one that makes several, by the ops inside it that do."""
    per_top: dict = {}
    for _, u in uses:
        for s in u.sources:
            per_top[s.op] = per_top.get(s.op, 0.0) + s.per_call
    inside = sorted({s.op for _, u in uses for s in u.sources if per_top[s.op] > 1})

    def names(u) -> str:
        labels = {}
        for s in u.sources:
            label = s.inner if s.op in inside else s.op
            labels[label] = labels.get(label, 0.0) + s.per_call
        return ", ".join(name + (f" x{n:g}" if n != 1 else "") for name, n in labels.items())

    where = f" (inside {', '.join(inside)})" if inside else ""
    if len(uses) == 1:
        (dtype, u), = uses
        return (f"{total:g} of them the size of a {_shape(matrix)} {dtype} score matrix ({fmt_bytes_exact(u.bytes)}): "
                f"{names(u)}{where}")
    parts = ", ".join(f"{u.per_call:g} in {dtype} ({fmt_bytes_exact(u.bytes)}{' each' if u.per_call != 1 else ''}: "
                      f"{names(u)})" for dtype, u in uses)
    return f"{total:g} of them the size of a {_shape(matrix)} score matrix: {parts}{where}"


def _copy_at_peak(uses: list) -> Optional[dict]:
    """Whether masked_fill's copy sets how many score matrices a forward holds at once: the most live at once,
    right after the copy is made, and right after any other score-sized allocation (None: no copy)."""
    for _, u in uses:
        copy = [s for s in u.sources if s.op == "aten::masked_fill"]
        if copy:
            others = max((s.live_after for s in u.sources if s.op != "aten::masked_fill"), default=0)
            at_peak = list(dict.fromkeys(s.op for s in u.sources
                                         if s.op != "aten::masked_fill" and s.live_after == u.max_live))
            return dict(live_at_once=u.max_live, after_copy=max(s.live_after for s in copy), after_others=others,
                        others_at_peak=at_peak, peak_drops=others < u.max_live)
    return None


def _in_place_hint(peak: Optional[dict]) -> str:
    """masked_fill_: the copy's allocation goes; the peak only where the copy is what it holds."""
    saved = "masked_fill_ writes in place: one score matrix less allocated (and copied) per forward"
    if peak is None:
        return saved
    if peak["peak_drops"]:
        return (f"{saved}, and one less at the forward's peak: {peak['live_at_once']} score matrices are live at "
                "once only while the copy sits beside its input")
    return (f"{saved}, but not at the forward's peak: {peak['live_at_once']} score matrices are live at once with or "
            f"without the copy ({', '.join(peak['others_at_peak'])} make their output while their input is still "
            "live), so the peak memory stays")


def kv_cache_growth(t: Tables):
    """With ``--profile-memory``, 05: bytes allocated and live per decoded token (the dynamic KV cache grows by 2 x
    layers x batch x kv_heads x head_dim x bytes a token; a static cache is allocated once); cannot tell when the
    trend is neither growth nor flat.

    A cache that grows by concatenation (transformers' DynamicCache) allocates more in every decode, and the memory
    live after each decode rises by the new token's keys and values; a preallocated cache (StaticCache) is written
    in place: every decode allocates the same."""
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
        live = (f"; the memory live after each decode rises by {fmt_bytes_exact(live_slope)} per token"
                if live_slope else "")
        low, high = min(a.allocated_bytes_of_calls), max(a.allocated_bytes_of_calls)
        return Finding("kv_cache_growth", f"each decode allocates {fmt_bytes_exact(alloc_slope)} more than the one "
                       f"before ({fmt_bytes_exact(low)} to {fmt_bytes_exact(high)} per decode "
                       f"on the {a.device}){live}: a cache that grows with every token (concatenated)",
                       f"a static cache ({_static_flag(t)}) is allocated once, before the decodes, and "
                       "written in place", evidence | dict(verdict="grows"))
    if flat:
        live = (f"; the memory live after each decode changes by {fmt_bytes_exact(live_slope)} per token"
                if live_slope is not None else "")
        return Finding("kv_cache_growth", f"every decode allocates the same "
                       f"{fmt_bytes_exact(a.allocated_bytes_per_call)} on the {a.device} ({alloc_slope:+,.0f} B per token){live}: no cache grows in the decodes (a "
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
