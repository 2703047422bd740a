"""How the report writes numbers: durations with a unit that suits them, rounded evidence, JSON-safe values (sizes
in bytes: :mod:`common.amounts`, which the lessons and the viewer share; rates: :mod:`.rates`)."""

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
