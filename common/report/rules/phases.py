"""Phases (one row per annotation name): a phase that dispatches as many ops as another for far less
work is overhead-bound."""

from __future__ import annotations

from common.report.facts import knob_work, workload
from common.report.findings import Finding, in_window
from common.report.rules import advice
from common.report.facts.tables import Tables
from common.report.units import fmt_us, rounded


def _tokens_per_call(t: Tables) -> dict:
    """Tokens per call of each phase that embeds token ids, from the workload's count (a language model's
    prefill and decode: :func:`~common.report.facts.workload.tokens_per_call`), else from an LLM lesson's
    knobs; empty for any other trace."""
    knobs = t.knobs
    if knobs is None:
        return {}
    return workload.tokens_per_call(knobs.work) if knobs.work else knob_work.llm_tokens(knobs)


def _phase_cost_us(p) -> float:
    """A call's cost: its host span, or the device time of its work when the GPU took longer."""
    return max(p.mean_us, p.device_us_per_call or 0.0)


def _same_op_graph(a, b) -> bool:
    return a.ops_per_call >= 10 and b.ops_per_call >= 10 and 0.5 <= a.ops_per_call / b.ops_per_call <= 2


def overhead_bound_phase(t: Tables):
    """An annotation whose calls dispatch about as many ops as another's but do far less work: ``decode`` (1 token)
    vs ``prefill`` (the prompt), its time per token N x prefill's (tokens from ``05_llm.py``'s knobs); without token
    counts, on a GPU: the GPU mostly idle in it, busy in the other.

    Its time goes to dispatching the same op graph again, not to the work. Fewer, bigger calls (batching), fewer ops
    (torch.compile) or one launch for them all (CUDA graphs) help; faster kernels do not."""
    tokens = _tokens_per_call(t)
    pairs = [(a, b) for a in t.phases for b in t.phases if a is not b and _same_op_graph(a, b)]
    best = None
    for light, heavy in pairs:
        if light.name in tokens and heavy.name in tokens and tokens[light.name] < tokens[heavy.name]:
            per_light = _phase_cost_us(light) / tokens[light.name]
            per_heavy = _phase_cost_us(heavy) / tokens[heavy.name]
            ratio = per_light / per_heavy if per_heavy > 0 else 0.0
            if ratio >= 3 and (best is None or ratio > best[2]):
                best = (light, heavy, ratio, per_light, per_heavy)
        elif not tokens and t.has_gpu and light.calls >= 2 and light.gpu_busy_pct < 50 \
                and heavy.gpu_busy_pct >= 2 * max(light.gpu_busy_pct, 1.0):
            ratio = heavy.gpu_busy_pct / max(light.gpu_busy_pct, 1.0)
            if best is None or ratio > best[2]:
                best = (light, heavy, ratio, None, None)
    if best is None:
        return None
    light, heavy, ratio, per_light, per_heavy = best
    same = (f"each call dispatches {light.ops_per_call:,.0f} ops, about as many as a {heavy.name} call "
            f"({heavy.ops_per_call:,.0f}, {light.ops_per_call / heavy.ops_per_call:.2f}x)")
    busy = (f"; the GPU is busy {light.gpu_busy_pct:.0f}% of {light.name}'s time vs {heavy.gpu_busy_pct:.0f}% "
            f"of {heavy.name}'s" if t.has_gpu else "")
    if per_light is not None:
        n = tokens[light.name]
        work = (f", for {n:,} token{'s' if n != 1 else ''} instead of {tokens[heavy.name]:,}: {fmt_us(per_light)} per token "
                f"vs {fmt_us(per_heavy)} in {heavy.name} ({ratio:,.0f}x)")
    else:
        work = ""
    return Finding("overhead_bound_phase", f"{light.name} is overhead-bound: {same}{work}{busy}",
                   f"the cost of a {light.name} call is the dispatch of its ops, not its work: " + advice.joined([
                       "batch more sequences per call", advice.fuse_ops(t, "cut the ops (torch.compile)"),
                       advice.cut_launches(t, "replay them as one CUDA graph (torch.compile mode='reduce-overhead' "
                                              "with a static KV cache)")]),
                   dict(phase=light.name, reference=heavy.name, ops_per_call=rounded(light.ops_per_call),
                        reference_ops_per_call=rounded(heavy.ops_per_call), calls=light.calls,
                        us_per_call=rounded(_phase_cost_us(light)), reference_us_per_call=rounded(_phase_cost_us(heavy)),
                        tokens_per_call=tokens.get(light.name), reference_tokens_per_call=tokens.get(heavy.name),
                        us_per_token=rounded(per_light, 2), reference_us_per_token=rounded(per_heavy, 3),
                        per_token_ratio=rounded(ratio, 1) if per_light is not None else None,
                        gpu_busy_pct=rounded(light.gpu_busy_pct), reference_gpu_busy_pct=rounded(heavy.gpu_busy_pct)),
                   level="warn", spans=in_window(t, t.per_phase.spans.get(light.name, ())))


def llm_decode_chain(t: Tables):
    """``05_llm.py``: one decode call's attention (``aten::scaled_dot_product_attention`` per layer, or ``--attn
    eager``'s ``aten::bmm`` + ``aten::softmax``) and KV cache writes (``aten::cat``, 2 per layer under the dynamic
    cache; ``aten::index_copy_`` under ``--cache static``).

    What the LLM lesson's variants change, read from the ops the call ran: ``--attn sdpa`` is Part 3's 04_c,
    ``--attn eager`` its 04_a chain; ``--cache dynamic`` copies each layer's keys and values into a new, longer
    tensor every token, ``--cache static`` writes in place into a cache preallocated once."""
    knobs, ops = t.knobs, t.per_phase.chains.get("decode", {})
    if knobs is None or "decode" not in _tokens_per_call(t) or not ops:
        return None  # a language model's decode (it embeds token ids), run by a lesson (its flags are the hints)
    static = knobs.variants.get("cache", "dynamic") == "static"
    sdpa, softmax, bmm = (ops.get(op, 0) for op in ("aten::scaled_dot_product_attention", "aten::softmax", "aten::bmm"))
    layers = sdpa or softmax  # one attention per layer
    parts, hints = [], []
    if sdpa:
        parts.append(f"attention as aten::scaled_dot_product_attention {sdpa:g}x (one fused op per layer, Part 3's SDPA)")
    elif softmax:
        parts.append(f"attention as aten::bmm {bmm:g}x and aten::softmax {softmax:g}x (two matmuls and a softmax per "
                     "layer, Part 3's hand-written chain)")
        hints.append("the default --attn sdpa runs one fused op per layer instead")
    cat, index_copy = ops.get("aten::cat", 0), ops.get("aten::index_copy_", 0)
    if static and index_copy:
        per = f" ({index_copy / layers:g} per layer: keys and values)" if layers else ""
        parts.append(f"the static KV cache written in place by aten::index_copy_ {index_copy:g}x{per}, no copy of it")
    elif not static and cat:
        mine = f", {2 * layers:g} of them appending each layer's keys and values" if layers and cat >= 2 * layers else ""
        parts.append(f"aten::cat {cat:g}x{mine} (the dynamic KV cache: a new, longer tensor every token)")
        hints.append("--cache static preallocates the cache and writes it in place (aten::index_copy_), with fixed "
                     + ("shapes: one compiled graph for every token" if advice.compiled(t) else "shapes for torch.compile"))
    if not parts:
        return None
    return Finding("llm_decode_chain", "decode, per call: " + "; ".join(parts), "; ".join(hints),
                   dict(per_call={op: rounded(n, 2) for op, n in ops.items()}, layers=layers or None,
                        cache="static" if static else "dynamic", attention="sdpa" if sdpa else "eager" if softmax else None),
                   spans=in_window(t, t.per_phase.spans.get("decode", ())))
