"""Copies you did not write: a device-to-device copy right before a GEMM (addmm's bias seed)."""

from __future__ import annotations

import numpy as np

from common.report import names as trace_names
from common.report.columns import factorize
from common.report.model import CATEGORY_CODES, KERNEL, MEMCPY
from common.report.rules import Finding
from common.report.rules.judge import names_of
from common.report.tables import Tables
from common.report.units import fmt_us


def _dtod_before_gemm(t: Tables) -> list:
    """(memcpy, kernel) index pairs in ``t.model.dev``: a Memcpy DtoD followed on its stream by a GEMM kernel."""
    dev = t.model.dev
    dtod = t.model.name_mask(lambda s: "DtoD" in s or "Device -> Device" in s)
    cand = np.flatnonzero((dev.kind == MEMCPY) & dtod[dev.name])
    if not cand.size:
        return []
    cat, gemm_code = dev.category, CATEGORY_CODES["gemm"]
    # next device event on the same device and stream
    sid, _ = factorize(list(zip(dev.device.tolist(), dev.stream)))
    order = np.lexsort((dev.ts, sid))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    pairs = []
    for c in cand.tolist():
        r = rank[c] + 1
        if r >= order.size:
            continue
        nxt = int(order[r])
        if sid[nxt] == sid[c] and dev.kind[nxt] == KERNEL and cat[nxt] == gemm_code:
            pairs.append((c, nxt))
    return pairs


def _addmm_gemms(t: Tables) -> np.ndarray:
    """GEMM kernels launched from inside an aten::addmm (indices into ``t.model.dev``)."""
    dev, cpu = t.model.dev, t.model.cpu
    if "aten::addmm" not in t.model.names:
        return np.empty(0, np.int64)
    addmm = t.model.names.index("aten::addmm")
    has_op = dev.op >= 0
    by_addmm = has_op & (cpu.name[np.where(has_op, dev.op, 0)] == addmm)
    return np.flatnonzero(by_addmm & (dev.kind == KERNEL) & (dev.category == CATEGORY_CODES["gemm"]))


def hidden_dtod_copy(t: Tables):
    """A cudaMemcpyAsync you didn't write / Memcpy DtoD immediately before a GEMM: often a hidden
    device-to-device copy, e.g. addmm seeding its output with the bias before the GEMM epilogue
    (the "fusion" is at the dispatcher level, not in the kernel). Whether addmm copies depends on
    the torch version and the bias: the rule says which the trace shows."""
    dev, cpu = t.model.dev, t.model.cpu
    if not t.has_gpu:
        return None
    pairs = _dtod_before_gemm(t)
    if not pairs:
        return _no_bias_copy(t)
    c, g = pairs[0]
    chain = []
    if dev.launch[c] >= 0:
        p = int(dev.launch[c])
        chain.append(t.model.names[cpu.name[p]])
        p = int(cpu.parent[p])
        while p >= 0 and len(chain) < 5:
            chain.append(t.model.names[cpu.name[p]])
            p = int(cpu.parent[p])
    byt = dev.bytes[[p[0] for p in pairs]]
    b = float(np.nanmedian(byt)) if np.isfinite(byt).any() else None
    size = f", {b / 1e6:.1f} MB" if b else ""
    gname = t.model.names[dev.name[g]]
    via = f" (issued by {' ← '.join(chain[:4])})" if chain else ""
    return Finding("hidden_dtod_copy", f"hidden copy: {len(pairs)} Memcpy DtoD{size}, median "
                   f"{fmt_us(float(np.median(dev.dur[[p[0] for p in pairs]])))}, each right before GEMM "
                   f"{trace_names.short_name(gname, 60)}{via}",
                   "the bias seed copy of addmm (out = bias, then GEMM with beta=1): fused at the dispatcher, not in "
                   "the kernel; torch versions differ (recent ones may hand the bias to the GEMM without this copy)",
                   dict(variant="copy", pairs=len(pairs), bytes=b, gemm=gname, issued_by=chain))


def _no_bias_copy(t: Tables):
    """aten::addmm's GEMMs with no Memcpy DtoD before them: the other variant of the bias seed copy."""
    gemms = _addmm_gemms(t)
    if not gemms.size:
        return None
    names = names_of(t, t.model.dev.name[gemms])
    return Finding("hidden_dtod_copy", f"no bias seed copy: aten::addmm launches {gemms.size:,} GEMM kernels "
                   f"({', '.join(trace_names.short_name(n, 60) for n in names[:2])}) with no Memcpy DtoD before them: the GEMM "
                   "reads the bias itself", "the posts' Part 1 (compiled, A100, an older torch) shows a Memcpy DtoD "
                   "seeding the output before the GEMM; whether addmm copies depends on the torch version and on the "
                   "bias (a bias vector can ride in the GEMM's epilogue)",
                   dict(variant="no_copy", pairs=0, addmm_gemms=int(gemms.size), gemm=names[0]))
