"""How the whole suite writes an amount, the lessons' console, the viewer and the report alike: FLOPs
(:func:`fmt_flops`) and sizes in bytes, one formatter per kind of unit, named for it: :func:`fmt_bytes_decimal`
(kB, MB, GB: powers of 1000, as file sizes and bandwidths are given), :func:`fmt_bytes_binary` (KiB, MiB, GiB:
powers of 1024, as the allocator and the memory view count) and :func:`fmt_bytes_exact` (every byte). Rates
(FLOP/s, GB/s): :mod:`common.report.rates`."""

from __future__ import annotations

import math
from typing import Optional

HUGE = 1e6  # a value this many of its largest unit (an impossible one, flagged) is written 1.23e+45, not in 46 digits

DECIMAL_UNITS = (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3))
BINARY_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def fmt_bytes_decimal(x, figures: int | None = None) -> str:
    """A size in bytes with a decimal unit: one decimal (``4 B``, ``33.6 MB``, ``412.6 kB``), or with ``figures``
    significant figures, whole from ten to the ``figures`` on (``figures=3``: ``538 MB``, ``24.6 kB``, ``1 MB``);
    ``n/a`` for None; a whole number too big for a float by its power of ten: ``10^400 B``."""
    if isinstance(x, int) and abs(x) >> 1000:
        return f"{'-' if x < 0 else ''}10^{len(str(abs(x))) - 1} B"
    if x is None or not math.isfinite(float(x)):
        return "n/a"
    x = float(x)
    if figures is None:
        for unit, scale in DECIMAL_UNITS:
            if abs(x) >= scale:
                return f"{x / scale:.1f} {unit}"
        return f"{x:.0f} B"
    for unit, scale in (*DECIMAL_UNITS, ("B", 1.0)):
        if abs(x) >= scale:
            value = x / scale
            return f"{value:,.0f} {unit}" if abs(value) >= 10 ** (figures - 1) else f"{value:.{figures}g} {unit}"
    return f"{x:.{figures}g} B" if x else "0 B"


def fmt_bytes_binary(x) -> str:
    """A size in bytes with a binary unit: ``512 B``, ``128.0 KiB``, ``2.60 GiB`` (two decimals in GiB; a
    negative size signed; ``n/a`` for None); a whole number too big for a float by its power of ten:
    ``10^311 GiB``."""
    if isinstance(x, int) and abs(x) >> 1000:
        return f"{'-' if x < 0 else ''}10^{len(str(abs(x) >> 30)) - 1} GiB"
    if x is None or not math.isfinite(float(x)):
        return "n/a"
    sign, x = ("-" if x < 0 else ""), abs(float(x))
    for unit, scale in BINARY_UNITS:
        if x >= scale:
            return f"{sign}{x / scale:,.{2 if unit == 'GiB' else 1}f} {unit}"
    return f"{sign}{x:,.0f} B"


def fmt_bytes_exact(x) -> str:
    """A size in bytes, every one of them: ``1,048,576 B``."""
    return f"{x:,.0f} B"


def scaled(x: float, units: tuple, zeros: bool = False) -> str:
    """``x`` in the largest of ``units`` it reaches, three significant figures (whole from 100 on); with ``zeros``,
    kept where they are zeros (``3.00``, not ``3``)."""
    three = "#.3g" if zeros else ".3g"
    for scale, unit in units:
        if abs(x) >= scale:
            value = x / scale
            return f"{value:,.0f} {unit}" if 100 <= value < HUGE else f"{value:{three}} {unit}"
    return f"{x:{three}} {units[-1][1]}" if x else f"0 {units[-1][1]}"


def fmt_flops(x: Optional[float]) -> str:
    """FLOPs: ``268 GFLOP``, ``524 kFLOP``."""
    if x is None:
        return "n/a"
    return scaled(float(x), ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP"),
                             (1.0, "FLOP")))
