"""Phases (one row per annotation name): a phase that dispatches as many ops as another for far less
work is overhead-bound."""

from __future__ import annotations

from common.report.rules import advice
from common.report.rules import Finding, in_window
from common.report.tables import Tables
from common.report.units import fmt_us, rounded


def _tokens_per_call(t: Tables) -> dict:
    """Tokens per call of 05_llm.py's phases (04_llm.py before Part 3), from the knobs the lesson writes into its trace
    (shape = batch x prompt length x new tokens); empty for any other trace."""
    knobs = t.knobs
    if knobs is None or knobs.script not in ("04_llm", "05_llm") or len(knobs.shape) != 3:
        return {}
    batch, prompt_len, _ = knobs.shape
    return {"prefill": batch * prompt_len, "decode": batch}


def _phase_cost_us(p) -> float:
    """A call's cost: its host span, or the device time of its work when the GPU took longer."""
    return max(p.mean_us, p.device_us_per_call or 0.0)


def _same_op_graph(a, b) -> bool:
    return a.ops_per_call >= 10 and b.ops_per_call >= 10 and 0.5 <= a.ops_per_call / b.ops_per_call <= 2


def overhead_bound_phase(t: Tables):
    """A phase whose calls dispatch about as many ops as another phase's calls but do far less work
    each (decode's one token per sequence vs prefill's whole prompt): its time goes to dispatching
    the same op graph again, not to the work, so per token it is many times slower (and on a GPU it
    leaves the GPU idle). Fewer, bigger calls (batching), fewer ops (torch.compile) or one launch
    for them all (CUDA graphs) help; faster kernels do not."""
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
                   level="warn", spans=in_window(t, t.phase_calls.get(light.name, ())))
