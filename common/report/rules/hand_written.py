"""Kernels written by hand in Triton (Liger's, the Hub's ``kernels``): not Inductor's, launched by
Triton's launcher from the op or autograd function that wraps them."""

from __future__ import annotations

from common.report.findings import Finding
from common.report.facts.tables import Tables
from common.report.units import fmt_us, rounded


def hand_written_kernels(t: Tables):
    """A Triton kernel written by hand: a plain function name launched through the driver API
    (``cuLaunchKernel[Ex]``, Triton's launcher), not named as Inductor names its kernels (Liger's
    ``_geglu_tanh_forward_kernel`` from ``LigerGELUMulFunction``, P2.9), with the op it is launched from, its device
    time per call (median) and whether the trace has torch.compile frames; its per-call time is what Inductor's
    fusion competes with (P2.10).

    Inductor names its own ``triton_<poi|red|per|tem>_fused_...``; where the trace has no torch.compile frames,
    nothing in the run was compiled by Inductor. P2.10: Inductor's fusion of the same ops is close, not always
    faster."""
    rows = [(k, t.kernel_sources.get(k.name)) for k in t.kernels
            if k.category == "triton_other" and not k.name.startswith("triton_")]
    if not rows:
        return None
    compiled = t.compile is not None
    calls_of = {o.name: o.calls for o in t.ops}
    said = "; ".join(f"{k.name}, launched from {_launches(k, s, calls_of)}, {fmt_us(k.median_us)} per call on the "
                     f"device (median), {k.share_pct:.1f}% of kernel time" for k, s in rows[:3])
    more = f" (+{len(rows) - 3} more)" if len(rows) > 3 else ""
    why = ("the trace has torch.compile frames, but these names are not Inductor's" if compiled else
           "the trace has no torch.compile frames: nothing in it ran through Inductor")
    hint = ("its time per call is what Inductor's fusion of the same ops competes with: run the model under "
            "torch.compile and --compare the two runs (P2.10: the hand-tuned kernel is close, not always faster)"
            if not compiled else "its time per call is the figure to weigh against another implementation's")
    return Finding("hand_written_kernels", f"Triton kernels written by hand (a plain function name launched "
                   f"through the driver API, as Triton's launcher does; not an Inductor name): {said}{more}; {why}", hint,
                   dict(kernels=[dict(name=k.name, calls=k.calls, median_us=rounded(k.median_us),
                                      total_us=rounded(k.total_us), share_pct=rounded(k.share_pct, 1),
                                      launched_from=[c for c, _ in s.callers] if s else [],
                                      launchers=[n for n, _ in s.launchers] if s else []) for k, s in rows[:20]],
                        compiled=compiled))


def _launches(k, source, calls_of: dict) -> str:
    """``LigerGELUMulFunction (3 calls, one launch each, with cuLaunchKernelEx)``."""
    if source is None:
        return f"an op the trace does not say ({k.calls}x)"
    how = ", ".join(n for n, _ in source.launchers)
    (caller, launches), = source.callers[:1]
    calls = calls_of.get(caller, 0) if len(source.callers) == 1 else 0
    each = (f"{calls} calls, one launch each" if calls == launches else
            f"{launches} launches in {calls} calls") if calls else f"{k.calls}x"
    return f"{source.launched_from} ({each}, with {how})"
