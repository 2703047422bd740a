"""Copies you did not write: a device-to-device copy right before a GEMM (addmm's bias seed)."""

from __future__ import annotations

import math

from common.report.model import names as trace_names
from common.report.findings import Finding, in_window
from common.report.facts.tables import Tables
from common.report.units import fmt_us
from common.amounts import fmt_bytes_decimal


def hidden_dtod_copy(t: Tables):
    """A ``cudaMemcpyAsync`` you did not write: ``Memcpy DtoD`` right before a GEMM (addmm's bias seed; a memset or
    tiny event between them does not part them), or, when ``aten::addmm``'s GEMMs run without it, that there is no
    copy (it depends on the torch version and the bias).

    addmm seeds its output with the bias before the GEMM epilogue: the "fusion" is at the dispatcher level, not in
    the kernel. cuBLAS's 4-byte memset before a Hopper GEMM may sit between the copy and the GEMM."""
    if not t.has_gpu:
        return None
    found = t.copies.dtod_before_gemm
    if found is None:
        return _no_bias_copy(t)
    b = found.median_bytes
    size = f", {fmt_bytes_decimal(b)}" if b else ""
    chain = list(found.issued_by)
    via = f" (issued by {' ← '.join(chain[:4])})" if chain else ""
    between = (f" (with {', '.join(_event(*e) for e in found.between)} between)" if found.between else "")
    return Finding("hidden_dtod_copy", f"hidden copy: {len(found.copies)} Memcpy DtoD{size}, median "
                   f"{fmt_us(found.median_us)}, each right before GEMM "
                   f"{trace_names.short_name(found.gemm, 60)}{between}{via}",
                   "the bias seed copy of addmm (out = bias, then GEMM with beta=1): fused at the dispatcher, not in "
                   "the kernel; torch versions differ (recent ones may hand the bias to the GEMM without this copy)",
                   dict(variant="copy", pairs=len(found.copies), bytes=b, gemm=found.gemm, issued_by=chain,
                        between=[name for name, _, _ in found.between]),
                   spans=in_window(t, found.copies))


def _event(name: str, memset: bool, written: float) -> str:
    if memset:
        return f"a {fmt_bytes_decimal(written)} memset" if math.isfinite(written) else "a memset"
    return trace_names.short_name(name, 40)


def _no_bias_copy(t: Tables):
    """aten::addmm's GEMMs with no Memcpy DtoD before them: the other variant of the bias seed copy."""
    gemms = t.copies.addmm_gemms
    if not gemms.count:
        return None
    names = gemms.names
    return Finding("hidden_dtod_copy", f"no bias seed copy: aten::addmm launches {gemms.count:,} GEMM kernels "
                   f"({', '.join(trace_names.short_name(n, 60) for n in names[:2])}) with no Memcpy DtoD before them: the GEMM "
                   "reads the bias itself", "the posts' Part 1 (compiled, A100, an older torch) shows a Memcpy DtoD "
                   "seeding the output before the GEMM; whether addmm copies depends on the torch version and on the "
                   "bias (a bias vector can ride in the GEMM's epilogue)",
                   dict(variant="no_copy", pairs=0, addmm_gemms=gemms.count, gemm=names[0]), spans=in_window(t, gemms.spans))

