"""The copies theme's numbers (:mod:`common.report.rules.copies`): copies you did not write, a Memcpy DtoD
right before a GEMM on its stream (addmm seeding its output with the bias), and the GEMMs launched from
inside aten::addmm. One record, :class:`CopiesFacts` (``t.copies``); each holds the spans a finding points at."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.findings import Span
from common.report.load.columns import factorize
from common.report.model.build import CATEGORY_CODES, KERNEL, MEMCPY, MEMSET, Model

TINY_SHARE, TINY_SKIPPED = 0.1, 3  # at most 3 memsets or non-GEMM events under 10% of the copy between it and its GEMM


@dataclass(frozen=True)
class CopiesFacts:
    """What the copies rules read."""

    dtod_before_gemm: Optional[DtodBeforeGemm]  # Memcpy DtoD right before a GEMM on its stream
    addmm_gemms: AddmmGemms  # GEMMs launched from inside aten::addmm


def copies_facts(m: Model) -> CopiesFacts:
    """The copies theme's record of one model."""
    return CopiesFacts(dtod_before_gemm=dtod_before_gemm(m), addmm_gemms=addmm_gemms(m))


@dataclass(frozen=True)
class DtodBeforeGemm:
    """Memcpy DtoD events followed on their stream by a GEMM kernel (with at most a few memsets or tiny
    events between them: cuBLAS's 4-byte memset before a Hopper GEMM)."""

    copies: tuple  # Span of each copy
    median_bytes: Optional[float]
    median_us: float
    gemm: str  # the first copy's GEMM
    issued_by: tuple  # the first copy's launch and up to 4 of its ancestors, innermost first
    between: tuple = ()  # (name, memset?, bytes) of the events between the first copy and its GEMM


def dtod_before_gemm(m: Model) -> Optional[DtodBeforeGemm]:
    """None without such a pair (or without a device lane)."""
    if not m.has_gpu:
        return None
    dev, cpu = m.dev, m.cpu
    dtod = m.name_mask(lambda s: "DtoD" in s or "Device -> Device" in s)
    cand = np.flatnonzero((dev.kind == MEMCPY) & dtod[dev.name])
    if not cand.size:
        return None
    sid, _ = factorize(list(zip(dev.device.tolist(), dev.stream)))
    order = np.lexsort((dev.ts, sid))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    copies = cand[_gemm_follows(m, order, sid, rank, cand)].tolist()
    if not copies:
        return None
    c = copies[0]
    g, between = _gemm_after(m, order, sid, int(rank[c]), c)
    chain = []
    if dev.launch[c] >= 0:
        p = int(dev.launch[c])
        chain.append(m.names[cpu.name[p]])
        p = int(cpu.parent[p])
        while p >= 0 and len(chain) < 5:
            chain.append(m.names[cpu.name[p]])
            p = int(cpu.parent[p])
    byt = dev.bytes[copies]
    return DtodBeforeGemm(tuple(Span(float(dev.ts[i]), float(dev.dur[i])) for i in copies),
                          float(np.nanmedian(byt)) if np.isfinite(byt).any() else None,
                          float(np.median(dev.dur[copies])), m.names[dev.name[g]], tuple(chain),
                          tuple((m.names[dev.name[j]], bool(dev.kind[j] == MEMSET), float(dev.bytes[j]))
                                for j in between))


def _gemm_after(m: Model, order: np.ndarray, sid: np.ndarray, at: int, copy: int) -> tuple:
    """(the GEMM kernel that next runs on the copy's stream, the memsets and tiny events before it), or (None, ())."""
    dev, skipped = m.dev, []
    for j in order[at + 1:at + 2 + TINY_SKIPPED].tolist():
        if sid[j] != sid[copy]:
            break
        if dev.kind[j] == KERNEL and dev.category[j] == CATEGORY_CODES["gemm"]:
            return j, tuple(skipped)
        if dev.kind[j] != MEMSET and dev.dur[j] >= TINY_SHARE * dev.dur[copy]:
            break
        skipped.append(j)
    return None, ()


def _gemm_follows(m: Model, order: np.ndarray, sid: np.ndarray, rank: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Per copy of ``cand``: whether :func:`_gemm_after` finds a GEMM, for every copy at once (a step per event
    looked at after it)."""
    dev = m.dev
    found, alive = np.zeros(cand.size, dtype=bool), np.ones(cand.size, dtype=bool)
    for k in range(1, TINY_SKIPPED + 2):
        at = rank[cand] + k
        j = order[np.minimum(at, order.size - 1)]
        alive &= (at < order.size) & (sid[j] == sid[cand])
        gemm = alive & (dev.kind[j] == KERNEL) & (dev.category[j] == CATEGORY_CODES["gemm"])
        found |= gemm
        alive &= ~gemm & ((dev.kind[j] == MEMSET) | ~(dev.dur[j] >= TINY_SHARE * dev.dur[cand]))
    return found


@dataclass(frozen=True)
class AddmmGemms:
    """GEMM kernels launched from inside an aten::addmm."""
    count: int
    names: tuple  # their kernel names, sorted
    spans: tuple = ()  # Span of each kernel


def addmm_gemms(m: Model) -> AddmmGemms:
    dev, cpu = m.dev, m.cpu
    if "aten::addmm" not in m.names:
        return AddmmGemms(0, ())
    addmm = m.names.index("aten::addmm")
    has_op = dev.op >= 0
    by_addmm = has_op & (cpu.name[np.where(has_op, dev.op, 0)] == addmm)
    gemms = np.flatnonzero(by_addmm & (dev.kind == KERNEL) & (dev.category == CATEGORY_CODES["gemm"]))
    return AddmmGemms(int(gemms.size), tuple(_names_of(m, dev.name[gemms])), tuple(map(Span, dev.ts[gemms], dev.dur[gemms])))


def _names_of(m: Model, ids) -> list:
    """The names of these name ids, sorted, each once."""
    return sorted({m.names[i] for i in np.asarray(ids).tolist()})
