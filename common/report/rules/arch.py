"""The GPU generation a heavy matrix kernel was designed for, against the card's
(:mod:`common.report.facts.arch`'s numbers)."""

from __future__ import annotations

from common.report.facts.arch import ArchKernel
from common.report.facts.tables import Tables
from common.report.findings import Finding
from common.report.model import names as trace_names
from common.report.rates import fmt_pct
from common.report.units import rounded

HEAVY = 0.25  # a kernel holding this share of the steps' device time or more sets the run's speed
# what each generation's tensor cores added, that a kernel of an older design does not issue
ADDED = {9: "Hopper's warpgroup MMA (wgmma)", 10: "Blackwell's fifth-generation tensor-core MMA (tcgen05)"}
OLD_MMA = {8: "Ampere's warp-level mma.sync", 9: "Hopper's wgmma"}


def _what(k: ArchKernel) -> str:
    """The kernel by its library (decoded) and short name."""
    decoded = trace_names.decode_attention(k.name) if k.kind == "attention" else trace_names.decode_gemm(k.name)
    library = (decoded or {}).get("library")
    short = trace_names.short_name(k.name, 70)
    return f"{short} ({library})" if library else short


def _design(k: ArchKernel) -> str:
    said = "as every FlashAttention-2 kernel" if k.from_library else "its name says so"
    return f"an {k.design} design ({said})"


def _peak_share(t: Tables) -> str:
    r = t.roofline
    top = r.rows[0] if r is not None and r.rows else None
    if top is None or top.pct_of_peak is None:
        return ""
    return f"; the roofline's {top.row.op.split(' (')[0]}: {fmt_pct(top.pct_of_peak)} of the {top.peak_unit} peak"


def _launch(k: ArchKernel, sms) -> str:
    """``; 132 blocks of 384 threads, one per SM of the 132 (a persistent kernel: ...)``: its grid as launched."""
    if k.blocks is None or k.threads is None:
        return ""
    persistent = (f", one per SM of the {sms} (a persistent kernel: each block works through many tiles)"
                  if sms and k.blocks == sms else "")
    return f"; {k.blocks:,} blocks of {k.threads} threads{persistent}"


def kernel_arch(t: Tables):
    """On a GPU, a matrix kernel holding a quarter of the device time or more whose design is older than the card's
    generation (``common/report/facts/arch.py``: the architecture its name says, ``..._sm80``, ``nvjet_sm90``;
    FlashAttention-2's kernels are sm80 designs; the card's from its compute capability): it issues only its own
    generation's tensor-core instructions (on Hopper: warp-level ``mma.sync``, not ``wgmma``), with the roofline's
    share of peak beside it; an attention kernel designed for the card's own generation is said too (cuDNN's sm90
    kernel: ``wgmma``, a persistent grid of one block per SM). The hint names an attention backend designed for the
    card, never the one the run already uses.

    Its share of the peak is that design's on this card: what the older designs lack is what the card's own
    generation issues."""
    heavy = [k for k in t.arch.kernels if k.share >= HEAVY]
    if not t.has_gpu or t.arch.card_major is None or not heavy:
        return None
    older = [k for k in heavy if k.major < t.arch.card_major]
    native = [k for k in heavy if k.major == t.arch.card_major and k.kind == "attention"]
    if not older and not native:
        return None
    k = (older or native)[0]
    ev = dict(card=t.arch.card, kernel=k.name, kind=k.kind, design=k.design, from_library=k.from_library, mma=k.mma,
              share_pct=rounded(100 * k.share), blocks=k.blocks, threads=k.threads, sms=t.arch.sms)
    card = f"{t.gpu.name} ({t.arch.card})"
    share = f"{100 * k.share:.0f}% of the steps' device time"
    if older:
        added = ADDED.get(t.arch.card_major, f"the tensor-core instructions sm_{t.arch.card_major}0 added")
        issues = OLD_MMA.get(k.major, f"sm{k.major}0's instructions")
        msg = (f"{_what(k)} is {_design(k)} running on {card}: it issues {issues}, not {added}, through which "
               f"this card's tensor cores reach their datasheet rate; {share}{_peak_share(t)}")
        return Finding("kernel_arch", msg, _older_hint(k, t.arch.card), ev)
    mma = f"{k.mma} tensor-core instructions (its name)" if k.mma else "its generation's instructions"
    msg = (f"{_what(k)} is designed for this card's generation: {k.design}, on {card}; {mma}"
           f"{_launch(k, t.arch.sms)}; {share}{_peak_share(t)}")
    return Finding("kernel_arch", msg, "a kernel of an older design (sm80: FlashAttention-2, xformers' CUTLASS "
                   "kernel) issues warp-level mma.sync here instead: compare the backends side by side: "
                   "uv run -m common.report --glance DIR", ev)


def _older_hint(k: ArchKernel, card: str) -> str:
    """Where a design for the card's own generation is to be had, never the one the run already uses."""
    decoded = trace_names.decode_attention(k.name) or {}
    if k.kind == "attention" and decoded.get("backend") != "cudnn":
        return (f"attention kernels designed for {card} exist: SDPA's cuDNN backend (torch.nn.attention.sdpa_kernel("
                "SDPBackend.CUDNN_ATTENTION)) or FlashAttention-3; compare the backends side by side: "
                "uv run -m common.report --glance DIR")
    return (f"the library chose this design for this problem (shape, dtype, layout); a kernel designed for {card} "
            "issues them")
