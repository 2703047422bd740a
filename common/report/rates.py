"""How the roofline's rates are written: FLOP/s and bytes/s with a unit that suits them (FLOPs and sizes in bytes:
:mod:`common.amounts`)."""

from __future__ import annotations

from typing import Optional

from common.amounts import HUGE, scaled



def fmt_tflops(x: Optional[float]) -> str:
    """A rate given in TFLOP/s, in TFLOP/s from 1 up, in GFLOP/s (or MFLOP/s) below."""
    if x is None:
        return "n/a"
    return scaled(float(x) * 1e12, ((1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s"), (1.0, "FLOP/s")))


def fmt_gbs(x: Optional[float]) -> str:
    """A bandwidth given in GB/s, three figures kept where they are zeros (decimal units, as a card's datasheet
    gives them): ``3.00 TB/s``, ``289 GB/s``, ``1.20 GB/s``."""
    if x is None:
        return "n/a"
    return scaled(float(x) * 1e9, ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s")),
                   zeros=True)


def fmt_pct(x: Optional[float]) -> str:
    """A share: two significant digits below 1% (``0.031%``), one decimal above."""
    if x is None:
        return "n/a"
    return f"{x:.2g}%" if x < 1 else f"{x:.1f}%" if x < HUGE else f"{x:.3g}%"


def compact(x: Optional[float]) -> str:
    """A number in SI shorthand for a narrow column: ``137G``, ``24.6k``, ``0.105``; ``n/a`` for None."""
    if x is None:
        return "n/a"
    x = float(x)
    if abs(x) >= 1e18:  # past P: an impossible value (flagged), written short so that the table keeps its width
        return f"{x:.0e}".replace("e+", "e")
    for scale, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            value = x / scale
            return f"{value:.0f}{suffix}" if value >= 100 else f"{value:.3g}{suffix}"
    return f"{x:.3g}"
