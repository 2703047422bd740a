"""Attention (Part 3): the out-of-place masked_fill's copy, SDPA's math backend (fp32 upcast, a causal
mask rebuilt on every call, the guarded softmax), and a fused backend's one op or kernel."""

from __future__ import annotations

from collections import Counter

from common.report.facts import knob_work
from common.report.model import names as trace_names
from common.report.findings import Finding, in_window
from common.report.facts.tables import Tables
from common.report.units import fmt_us, rounded

MATH = "aten::_scaled_dot_product_attention_math"
SDPA = "aten::scaled_dot_product_attention"
MASK_OPS = ("aten::ones", "aten::tril", "aten::scalar_tensor", "aten::where", "aten::add_")  # the math op's own children
SAFE_SOFTMAX_GUARDS = ("aten::isneginf", "aten::all", "aten::where")
FUSED_OPS = ("aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_flash_attention",
             "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
             "aten::_flash_attention_forward", "aten::_efficient_attention_forward", "aten::_cudnn_attention_forward")


def _each(count: float, calls: int) -> str:
    """How many per call: ``2``, or ``1.33`` when the calls differ."""
    each = count / calls if calls else 0.0
    return f"{each:.3g}" if each != int(each) else f"{int(each)}"


def _per(count: float, calls: int) -> str:
    return f"{_each(count, calls)} per call"


def _copy_kernels(kernels: dict) -> dict:
    return {k: n for k, n in kernels.items() if k.startswith("Memcpy") or "copy" in k.lower()}


def _spans_of(t: Tables, spans: dict, names) -> tuple:
    """The spans (in the window) of every name in ``names`` in ``spans`` ({name: (Span, ...)})."""
    return in_window(t, [span for name in names for span in spans.get(name, ())])


def out_of_place_copy(t: Tables):
    """P3.2/P3.3: ``scores.masked_fill(mask, -inf)`` copies the whole scores first (``aten::clone`` ->
    ``aten::copy_``; on a GPU a Memcpy or copy kernel); ``masked_fill_`` does not.

    masked_fill returns a new tensor: it copies the whole ``[batch, heads, seq, seq]`` scores and fills the copy.
    ``masked_fill_`` fills the scores in place: no copy, one score-sized allocation less per forward (not always a
    lower peak: ``attention_scores_memory`` says, where the run recorded its memory)."""
    s = t.attention.subtrees.get("aten::masked_fill")
    clones = s.ops.get("aten::clone", 0) if s is not None else 0
    if not clones:
        return None
    copies = _copy_kernels(s.kernels) if t.has_gpu else {}
    if t.has_gpu and copies:
        spent, whole, of = sum(s.kernels_us[k] for k in copies), sum(s.kernels_us.values()), "device time"
        what = ", ".join(trace_names.short_name(k, 50) for k in copies)
    else:
        spent, whole, of = s.ops_us.get("aten::clone", 0.0), s.wall_us, "time"
        what = "aten::clone -> aten::copy_"
    where = knob_work.inplace_command(t.knobs) or "Tensor.masked_fill_"
    share = f", {100 * spent / whole:.0f}% of masked_fill's {of}" if whole > 0 else ""
    return Finding("out_of_place_copy", f"aten::masked_fill is out of place: it copies its input before filling "
                   f"({what}, {_per(clones, s.calls)}, {fmt_us(spent)} in all{share})",
                   f"fill in place ({where}): the copy goes, its time and its allocation (Part 3)",
                   dict(calls=s.calls, clones=clones, copy_us=spent, copy_kernels=copies), level="warn",
                   spans=_spans_of(t, s.path_spans, ["aten::clone"]) + _spans_of(t, s.device_spans, copies))


def fp32_upcast(t: Tables):
    """P3.6: SDPA's math backend casts 16-bit q, k, v up to fp32 (``aten::_to_copy``) and the output back; on a GPU
    its GEMMs are fp32 ``sgemm`` kernels (CUDA cores) where the hand-written attention's run on tensor cores. An
    fp32 run has nothing to cast."""
    s = t.attention.subtrees.get(MATH)
    if s is None:
        return None
    casts = s.paths.get("aten::to > aten::_to_copy", 0)  # its own casts (not a scalar's, inside aten::mul)
    gemms = {k: n for k, n in s.kernels.items() if trace_names.kernel_category(k) == "gemm"}
    fp32_gemms = [k for k in gemms if not trace_names.uses_tensor_cores(k)]
    dtype = t.knobs.dtype if t.knobs is not None else ""
    evidence = dict(calls=s.calls, casts=casts, gemm_kernels=gemms, fp32_gemm_kernels=fp32_gemms, dtype=dtype)
    if not casts and not fp32_gemms:
        if dtype == "fp32":
            return Finding("fp32_upcast", "SDPA's math backend: this run is fp32, so there is nothing to upcast "
                           "(with 16-bit inputs it casts q, k, v to fp32 and the output back)",
                           "run with --dtype bf16 to see the casts (Part 3)", evidence, level="note")
        return None
    gpu = (f"; its GEMMs are fp32 kernels, not tensor-core ones: "
           f"{', '.join(trace_names.short_name(k, 50) for k in fp32_gemms[:2])}") if fp32_gemms else ""
    cast = (f"{casts} aten::to -> aten::_to_copy ({_per(casts, s.calls)}: q, k, v cast up to fp32, the results "
            "cast back)") if casts else "no casts"
    return Finding("fp32_upcast", f"SDPA's math backend computes in fp32: {cast}{gpu}",
                   "a fused backend keeps the 16-bit inputs (--backend flash; on a GPU also efficient, cudnn)",
                   evidence, level="warn", spans=_spans_of(t, s.path_spans, ["aten::to > aten::_to_copy"])
                   + _spans_of(t, s.device_spans, fp32_gemms))


def causal_mask_rebuilt(t: Tables):
    """P3.7: ``is_causal=True`` on the math backend builds the mask on every call (``aten::ones`` -> ``aten::tril``,
    ``aten::scalar_tensor``, ``aten::where``; on a GPU ``triu_tril``, ``where`` kernels and an ``add_``), where the
    hand-written attention built its mask once, outside the forward."""
    s = t.attention.subtrees.get(MATH)
    if s is None or not s.paths.get("aten::tril"):
        return None
    built = {op: s.paths[op] for op in MASK_OPS if s.paths.get(op)}
    return Finding("causal_mask_rebuilt", "SDPA's math backend rebuilds the causal mask on every call: "
                   + ", ".join(f"{op} {_each(n, s.calls)}" for op, n in built.items())
                   + " per call", "the hand-written attention builds its mask once; a fused backend never "
                   "builds it (it skips the masked blocks)", dict(calls=s.calls, ops=built),
                   spans=_spans_of(t, s.path_spans, built))


def safe_softmax(t: Tables):
    """P3.8: the math backend's ``aten::_safe_softmax``: a softmax plus a guard (``isneginf``, ``all``, ``where``)
    that turns a fully masked row into zeros, not NaN: more ops (and kernels) than ``aten::softmax``."""
    s = t.attention.subtrees.get(MATH)
    if s is None or not s.ops.get("aten::_safe_softmax"):
        return None
    guards = {op: s.paths[f"aten::_safe_softmax > {op}"] for op in SAFE_SOFTMAX_GUARDS
              if s.paths.get(f"aten::_safe_softmax > {op}")}
    return Finding("safe_softmax", f"SDPA's math backend calls aten::_safe_softmax "
                   f"({_per(s.ops['aten::_safe_softmax'], s.calls)}): aten::_softmax plus a guard ("
                   + ", ".join(guards) + ") so a fully masked row gives zeros, not NaN", "",
                   dict(calls=s.calls, guards=guards), spans=_spans_of(t, s.op_spans, ["aten::_safe_softmax"]))


def fused_attention(t: Tables):
    """P3.9/P3.10/P3.12/P3.13: a fused backend runs attention as one op (on a GPU one kernel, its name decoded:
    library, tile, dtype, architecture) after views that put q, k, v in its layout (``aten::transpose``; cuDNN reads
    ``[B, H, S, D]`` as is); the scores never exist as a tensor. The attention kernels that ran, each with its own
    launch calls (not the other kernels under SDPA), and those CUDA graphs replayed (``cudaGraphLaunch``: tied by
    correlation or, with no id, by the graph launch's time window)."""
    s = t.attention.subtrees.get(SDPA)
    if s is None or s.ops.get(MATH):
        return None
    fused = {op: s.ops[op] for op in FUSED_OPS if s.ops.get(op)}
    if not fused:
        return None
    op, n = next(iter(fused.items()))
    launched = {k: c for k, c in s.kernels.items() if trace_names.kernel_category(k) == "attention"}
    replayed = t.attention.replayed
    kernels = Counter(launched) + Counter({k: r.kernels for k, r in replayed.items()})
    launches = Counter()
    for k in launched:
        launches.update(s.kernel_launches.get(k, {}))
    transposes = s.ops.get("aten::transpose", 0)
    ahead, behind = _before_and_after(s, op, "aten::transpose")
    before = (f"after {ahead} aten::transpose per call" if ahead
              else "with no transpose before it (it reads [batch, heads, seq, head_dim] as is)")
    if behind:
        before += f" and {behind} after its compute, on the output"
    msg = f"SDPA runs one fused op: {op} ({_per(n, s.calls)}), {before}"
    ran = [k for k, _ in kernels.most_common()]
    decoded = [trace_names.describe_attention(d) for d in map(trace_names.decode_attention, ran) if d]
    if kernels:
        msg += (f"; {len(kernels)} attention kernel{'s' if len(kernels) > 1 else ''}: "
                + "; ".join(_attention_kernel(k, s.kernel_launches.get(k, {}) if k in launched else {},
                                              replayed.get(k)) for k in ran))
    return Finding("fused_attention", msg, "", dict(calls=s.calls, ops=fused, transposes=transposes,
                                                   transposes_before_per_call=ahead, transposes_after_per_call=behind,
                                                   kernels=dict(kernels.most_common()), decoded=decoded,
                                                   launches=dict(launches.most_common()),
                                                   replayed={k: r.kernels for k, r in replayed.items()}),
                   spans=_spans_of(t, s.op_spans, fused) + _spans_of(t, s.device_spans, launched))


def _attention_kernel(name: str, launchers: dict, replayed) -> str:
    """One attention kernel: its name decoded (or shortened), and how it ran: ``launched by cuLaunchKernelEx
    x12``, and ``replayed 96x by 24 cudaGraphLaunch`` where CUDA graphs replayed it."""
    decoded = trace_names.decode_attention(name)
    how = [f"launched by {', '.join(f'{call} x{c}' for call, c in launchers.items())}"] if launchers else []
    if replayed is not None:
        how.append(f"replayed {replayed.kernels}x by {replayed.graph_launches} {replayed.launcher}: captured in a "
                   "CUDA graph, no SDPA op on the CPU")
    said = trace_names.describe_attention(decoded) if decoded else trace_names.short_name(name, 60)
    return said + (f" ({'; '.join(how)})" if how else "")


def _before_and_after(s, op: str, name: str) -> tuple[int, int]:
    """How many ``name`` ops (nested in a call) start before the fused ``op``'s compute, and how many after
    it, in the typical call (the split most calls show: a busy machine's pause can outlast a small compute
    in one call). The compute is the longest stretch inside the fused op: its longest nested op (on a GPU,
    the op that launches the kernel) or its longest stretch of own time with no op in it (on the CPU,
    where the op computes in its own time)."""
    nested = [span for spans in s.op_spans.values() for span in spans]
    splits = []
    for fused in s.op_spans.get(op, ()):
        end = fused.start_us + fused.dur_us
        inside = sorted((n.start_us, n.start_us + n.dur_us) for n in nested
                        if fused.start_us <= n.start_us < end and n is not fused)
        at = _compute_at(fused.start_us, end, inside)
        mine = [n.start_us for n in s.op_spans.get(name, ()) if fused.start_us <= n.start_us < end]
        splits.append((sum(ts < at for ts in mine), sum(ts >= at for ts in mine)))
    return Counter(splits).most_common(1)[0][0] if splits else (0, 0)


def _compute_at(start: float, end: float, inside: list) -> float:
    """The middle of the longest stretch from ``start`` to ``end``: a run of overlapping ``inside``
    intervals (sorted), or a gap between them."""
    best, best_len, cursor = (start + end) / 2, -1.0, start
    run_start = run_end = None
    for lo, hi in inside + [(end, end)]:
        if run_end is not None and lo <= run_end:
            run_end = max(run_end, hi)
            continue
        if run_end is not None and run_end - run_start > best_len:
            best, best_len = (run_start + run_end) / 2, run_end - run_start
        gap_from = run_end if run_end is not None else cursor
        if lo - gap_from > best_len:
            best, best_len = (gap_from + lo) / 2, lo - gap_from
        run_start, run_end = lo, hi
    return best


LIBRARY_SHARE = 0.5  # the calls' own time beyond this share of SDPA's CPU: the cost lives inside the library call


def sdpa_cpu_in_library(t: Tables):
    """GPU, a fused SDPA backend (P3.15): its CPU per call, and the share that is the own time of
    ``aten::scaled_dot_product_attention`` and the backend's op (cuDNN: nearly all, the work moved into the
    library).

    cuDNN spends the most CPU (A100: 214 µs vs flash 138, efficient 117), almost all of it the own time of the two
    ops (``_cudnn_attention_forward``): choosing and building the kernel's plan and launching it moved into the
    library, not into ops of its own the trace could show."""
    s = t.attention.subtrees.get(SDPA)
    if s is None or not t.has_gpu or s.ops.get(MATH) or not s.kernels or not s.calls or s.wall_us <= 0:
        return None
    per_call = s.wall_us / s.calls
    library = {op: us for op, us in (s.self_us or {}).items() if op == SDPA or op in FUSED_OPS}
    own = sum(library.values())
    share = own / s.wall_us
    others = sum(n for op, n in s.ops.items() if op not in FUSED_OPS)
    names = ", ".join(library)
    return Finding("sdpa_cpu_in_library", f"SDPA costs {fmt_us(per_call)} of CPU per call; {100 * share:.0f}% of it "
                   f"is the own time of {names} (besides {_each(others, s.calls)} other nested op(s) per call)"
                   + (": the work moved into the library, and none of it shows as ops of its own"
                      if share >= LIBRARY_SHARE else ""),
                   "compare the backends' CPU per call side by side: uv run -m common.report --glance DIR",
                   dict(cpu_us_per_call=rounded(per_call), library_self_us_per_call={op: rounded(us / s.calls)
                                                                                    for op, us in library.items()},
                        library_share_pct=rounded(100 * share), nested_ops_per_call=rounded(others / s.calls, 2)),
                   spans=in_window(t, s.call_spans))
