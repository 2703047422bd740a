"""Which GPU generation each heavy matrix kernel was designed for, against the card it ran on.

A kernel's name often says the architecture its code targets: ``fmha_cutlassF_..._sm80`` (CUTLASS's
``Sm80`` arch tag), ``cudnn_generated_..._sdpa_sm90_..._wgmma_...``, ``nvjet_sm90_...``, ``ampere_...gemm``;
FlashAttention-2's kernels (``flash_fwd_kernel<Flash_fwd_kernel_traits<...``) are one design, Ampere's (sm80:
``mma.sync`` and ``cp.async``), whichever card they are compiled for. The card's own generation is its compute
capability (``deviceProperties``). A kernel of an older design runs on a newer card, but issues only the
instructions of its own generation: on Hopper (sm_90) an sm80 kernel's tensor-core work is warp-level
``mma.sync``, not Hopper's warpgroup ``wgmma``.

Per matrix kernel (attention, and GEMMs on tensor cores) whose design the name says, by device time
(:class:`ArchKernel`): the design, the card's, its share of the steps' device time, its launch (blocks and
threads, median) and whether its grid is the card's SM count (a persistent kernel: one block per SM, each
working through many tiles). Numbers only (:mod:`~common.report.rules.arch` words them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.facts.header import gpu_of_trace
from common.report.model import names as trace_names
from common.report.model.build import KERNEL, Model

_GENERATIONS = {"volta": 7, "turing": 7, "ampere": 8, "ada": 8, "hopper": 9, "blackwell": 10}
FLASH_ATTENTION_2 = ("FlashAttention-2, vendored in PyTorch", "FlashAttention (flash-attn)")  # its traits-named kernels


@dataclass(frozen=True)
class ArchKernel:
    """One matrix kernel (all its calls in the steps) and the generation its name says it was designed for."""

    name: str
    kind: str  # "attention" | "gemm"
    design: str  # ``sm80``, ``sm90``, ``ampere`` (as its name, or its library, says)
    major: int  # the design's compute capability major (8 for sm80 and ampere)
    from_library: bool  # the design is its library's (FlashAttention-2's), not written in its name
    mma: Optional[str]  # the tensor-core instruction its name says (``wgmma``, ``wmma``), if any
    share: float  # of the steps' device time
    blocks: Optional[int]  # per launch, median
    threads: Optional[int]  # per block, median


@dataclass(frozen=True)
class ArchFacts:
    """The card's generation and its matrix kernels' designs, heaviest first."""

    card: Optional[str] = None  # ``sm_90``
    card_major: Optional[int] = None
    sms: Optional[int] = None  # the card's SM count
    kernels: tuple = ()  # ArchKernel


def arch_facts(m: Model) -> ArchFacts:
    """The designs of a GPU trace's matrix kernels against its card; an empty record elsewhere."""
    gpu = gpu_of_trace(m)
    if not m.has_gpu or gpu.major is None or gpu.vendor != "nvidia":
        return ArchFacts()
    dev = m.dev
    in_step = (dev.step >= 0) & (dev.kind == KERNEL)
    total = float(dev.dur[dev.step >= 0].sum())
    props = m.devices.get(int(dev.device[0])) or next(iter(m.devices.values()), {})
    sms = props.get("numSms") if isinstance(props.get("numSms"), int) else None
    out = []
    for name_id in np.unique(dev.name[in_step]).tolist():
        name = m.names[name_id]
        design = _design(name)
        if design is None or total <= 0:
            continue
        rows = np.flatnonzero(in_step & (dev.name == name_id))
        blocks, threads = dev.blocks[rows], dev.threads[rows]
        out.append(ArchKernel(name, *design, share=float(dev.dur[rows].sum()) / total,
                              blocks=_median(blocks), threads=_median(threads)))
    out.sort(key=lambda k: -k.share)
    return ArchFacts(gpu.sm, gpu.major, sms, tuple(out))


def _design(name: str) -> Optional[tuple]:
    """(kind, design, major, from_library, mma) of a matrix kernel whose name (or library) says its design."""
    attention = trace_names.decode_attention(name)
    if attention is not None:
        if attention.get("arch"):
            major = _major(attention["arch"])
            return None if major is None else ("attention", attention["arch"], major, False, attention.get("mma"))
        if attention.get("library") in FLASH_ATTENTION_2:
            return "attention", "sm80", 8, True, None
        return None
    gemm = trace_names.decode_gemm(name)
    if gemm is None or not gemm.get("tensor_cores") or not gemm.get("arch"):
        return None  # an fp32 FMA GEMM has no tensor-core path to miss
    major = _major(gemm["arch"])
    mma = "wgmma" if "wgmma" in name.lower() or "warpgroup" in name.lower() else None
    return None if major is None else ("gemm", gemm["arch"].lower(), major, False, mma)


def _major(arch: str) -> Optional[int]:
    """``sm80`` -> 8, ``sm_90a`` -> 9, ``sm100`` -> 10, ``ampere`` -> 8; None where it does not say."""
    low = arch.lower()
    if low in _GENERATIONS:
        return _GENERATIONS[low]
    found = re.fullmatch(r"sm_?(\d{2,3})a?", low)
    return int(found.group(1)) // 10 if found else None


def _median(values: np.ndarray) -> Optional[int]:
    known = values[np.isfinite(values)]
    return int(np.median(known)) if known.size else None
