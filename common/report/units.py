"""How the report writes numbers: durations and sizes with a unit that suits them, rounded evidence, JSON-safe
values. Sizes in bytes have one formatter per kind of unit, named for it: :func:`fmt_bytes_decimal` (kB, MB, GB:
powers of 1000, as file sizes and bandwidths are given), :func:`fmt_bytes_binary` (KiB, MiB, GiB: powers of 1024,
as the allocator and the memory view count) and :func:`fmt_bytes_exact` (every byte)."""

from __future__ import annotations

import math


def fmt_us(x) -> str:
    """A duration given in µs, written with a unit that suits it (``n/a`` for None)."""
    if x is None:
        return "n/a"
    x = float(x)
    if abs(x) < 0.05:  # -0.0 and a rounding's -0.01 read as what they are: nothing
        return "0.0 µs"
    if abs(x) >= 1e6:
        return f"{x / 1e6:.2f} s"
    if abs(x) >= 1e3:
        return f"{x / 1e3:.2f} ms"
    if abs(x) >= 10:
        return f"{x:.0f} µs"
    return f"{x:.1f} µs"


DECIMAL_UNITS = (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3))
BINARY_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def fmt_bytes_decimal(x, figures: int | None = None) -> str:
    """A size in bytes with a decimal unit: one decimal (``4 B``, ``33.6 MB``, ``412.6 kB``), or with ``figures``
    significant figures, whole from ten to the ``figures`` on (``figures=3``: ``538 MB``, ``24.6 kB``, ``1 MB``);
    ``n/a`` for None."""
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
    negative size signed; ``n/a`` for None)."""
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


def rounded(x, digits: int = 1):
    """``x`` rounded for a finding's evidence (None stays None)."""
    return None if x is None else round(float(x), digits)


def json_ready(x):
    """JSON-safe: numpy scalars to Python, NaN/inf to null, floats rounded to 0.001."""
    if isinstance(x, dict):
        return {str(k): json_ready(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_ready(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        x = x.item()
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return None
        return round(x, 3)
    return x
