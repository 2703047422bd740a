"""Rates that cannot be true are never a result: the roofline's numbers held to what a device can do (the
facts stage's check of its own :class:`~.roofline.Roofline`; the model stage drops the impossible input values
themselves: :mod:`~common.report.model.impossible`).

The roofline (:mod:`.roofline`) divides FLOPs and bytes, read from ``record_shapes``' ``Input Dims``
or the lesson's knobs, by times read from the trace. A trace can hold anything, so the quotient can
be a rate no device reaches. :func:`checked_roofline` runs on the judged roofline and:

- **a device name that names several GPUs** (``NVIDIA A100 H100 B200``): no datasheet peak at all,
  never the first one matched (:func:`gpus_named`); the rows keep their achieved rates only;
- **a row whose rate cannot be**: above 100 % of its device's datasheet peak (the datasheet's dense
  peak is the most the device does: a share above it is a wrong shape or a wrong time, never a
  result) or of its roof (ideal bytes faster than the device memory's bandwidth), beyond any
  device (:data:`ANY_DEVICE_TFLOPS`, :data:`ANY_DEVICE_GBS`; on the CPU :data:`ANY_CPU_TFLOPS`), or
  negative: the row is flagged ``impossible`` with the reason, and its
  share of peak, roof and bound are cleared, so no verdict (finding, table, plot) rests on it;
- **the steps' rate** (CPU traces) counts every call's FLOPs: with an impossible row among them, or
  beyond any CPU itself, it is flagged and not shown as a rate.

The note says how many rows were flagged; ``--json``, the text table and the page read the same
flags (``impossible`` on a row, ``impossible_step`` on the roofline).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from common.report.facts.roofline import Judged, Roofline
from common.report.rates import fmt_gbs, fmt_pct, fmt_tflops

# Above every single device's dense datasheet figure for any dtype, with an order of magnitude to spare
# (NVIDIA's B200 is 9 PFLOP/s dense at FP4; HBM3e devices move 8 TB/s): beyond these, a rate is wrong.
ANY_DEVICE_TFLOPS = 100_000.0  # 100 PFLOP/s
ANY_DEVICE_GBS = 1_000_000.0  # 1 PB/s (an op whose inputs sit in cache still reads them at cache speed)
ANY_CPU_TFLOPS = 1_000.0  # 1 PFLOP/s: a hundred times a many-core server CPU's matrix units
ANY_CPU_GBS = 100_000.0  # 100 TB/s: far above any CPU's caches
WRONG_INPUT = "a shape (Input Dims), the lesson's FLOPs or a time in the trace is wrong"

# Model names of GPUs (the datasheet table's and other current ones): a device name holding two of
# them names no one device. Matched as words, as :mod:`~common.report.model.peaks` matches (``L4`` is not ``L40``).
GPU_MODELS = ("B300", "B200", "B100", "GB200", "GB300", "GH200", "H200", "H100", "H800", "H20", "A100", "A800",
              "A40", "A30", "A10", "A10G", "L40S", "L40", "L20", "L4", "V100", "V100S", "P100", "T4",
              "RTX 6000", "RTX A6000", "RTX 4090", "RTX 3090", "RTX 5090", "MI300X", "MI250X", "MI210", "MI100")


def _words(name: str) -> str:
    """A name as words between spaces (as :mod:`~common.report.model.peaks` reads names: ``-`` and ``_`` split words)."""
    return f" {name.upper().replace('-', ' ').replace('_', ' ')} "


def _has(words: str, model: str) -> bool:
    return _words(model) in words


def gpus_named(device_name: Optional[str]) -> list[str]:
    """The GPU models a device name names, as words: ``NVIDIA H100 80GB HBM3`` -> ``["H100"]``,
    ``NVIDIA A100 H100 B200`` -> ``["B200", "H100", "A100"]``."""
    if not device_name:
        return []
    words = _words(device_name)
    return [m for m in GPU_MODELS if _has(words, m)]


def ambiguous_device(device_name: Optional[str]) -> Optional[str]:
    """Why a device name cannot choose a datasheet peak (it names several GPUs), or None."""
    models = gpus_named(device_name)
    if len(models) < 2:
        return None
    return (f"{device_name}: the name holds several GPUs ({', '.join(models)}), so which datasheet peak applies "
            "cannot be told: achieved rates only")


def cpu_rate_possible(gflops: float) -> bool:
    """Whether a CPU could run matrix arithmetic at ``gflops`` GFLOP/s (not negative, not beyond any CPU)."""
    return 0 <= gflops <= ANY_CPU_TFLOPS * 1e3


def impossible_row(j: Judged, on_cpu: bool) -> Optional[str]:
    """Why a judged row's numbers cannot be true, or None."""
    row = j.row
    if row.flops < 0 or (row.bytes is not None and row.bytes < 0):
        return f"a negative {'FLOP' if row.flops < 0 else 'byte'} count ({WRONG_INPUT})"
    if row.tflops is not None and j.pct_of_peak is not None and j.pct_of_peak > 100.0:
        return (f"{fmt_tflops(row.tflops)} is {fmt_pct(j.pct_of_peak)} of the {j.peak_unit} peak "
                f"({j.peak_tflops:g} TFLOP/s dense): no op runs above its device's datasheet peak; {WRONG_INPUT}")
    if j.pct_of_roof is not None and j.pct_of_roof > 100.0 and j.pct_of_bandwidth is not None:
        return (f"{fmt_gbs(row.gbs)} of ideal bytes is {fmt_pct(j.pct_of_bandwidth)} of the device memory's datasheet "
                f"bandwidth: above its memory roof (at {fmt_pct(j.pct_of_roof)} of it), which bytes from device "
                f"memory cannot pass; {WRONG_INPUT}")
    tflops_cap, gbs_cap, what = ((ANY_CPU_TFLOPS, ANY_CPU_GBS, "any CPU") if on_cpu else
                                 (ANY_DEVICE_TFLOPS, ANY_DEVICE_GBS, "any device"))
    if row.tflops is not None and row.tflops > tflops_cap:
        return f"{fmt_tflops(row.tflops)} is beyond {what} (over {fmt_tflops(tflops_cap)}); {WRONG_INPUT}"
    if row.gbs is not None and row.gbs > gbs_cap:
        return f"{fmt_gbs(row.gbs)} is beyond {what} (over {fmt_gbs(gbs_cap)}); {WRONG_INPUT}"
    return None


def _flagged(j: Judged, why: str) -> Judged:
    """The row with its reason, and without the share, roof and bound that would rest on its rate."""
    return replace(j, pct_of_peak=None, pct_of_bandwidth=None, bound=None, roof_tflops=None, impossible=why)


def _unjudged(j: Judged) -> Judged:
    return replace(j, peak_tflops=None, peak_unit="unknown device (several GPUs named)", pct_of_peak=None,
                   pct_of_bandwidth=None, ridge=None, bound=None, roof_tflops=None)


def checked_roofline(r: Optional[Roofline]) -> Optional[Roofline]:
    """The roofline with no peak for an ambiguous device name, and every impossible row flagged (the
    note says how many); None stays None."""
    if r is None:
        return None
    if r.timed_on == "device" and (why := ambiguous_device(r.device)) is not None:
        r = replace(r, rows=tuple(_unjudged(j) for j in r.rows), peak=None, note=why)
    on_cpu = r.timed_on == "cpu"
    rows, flagged = [], 0
    for j in r.rows:
        why = impossible_row(j, on_cpu)
        rows.append(j if why is None else _flagged(j, why))
        flagged += why is not None
    note = r.note
    if flagged:
        note += (f"; {flagged} row(s) flagged impossible, bound 'wrong' (above the device's peak or roof, beyond "
                 f"any device, or negative: {WRONG_INPUT}), kept out of shares and bounds")
    step = _impossible_step(r, flagged)
    if step is not None:
        note += f"; the steps' rate: {step}"
    return replace(r, rows=tuple(rows), note=note, impossible_step=step)


def _impossible_step(r: Roofline, flagged: int) -> Optional[str]:
    rate = r.step_tflops
    if rate is None:
        return None
    if r.step_flops < 0:
        return f"cannot be true (a negative FLOP count; {WRONG_INPUT})"
    if flagged:
        return "cannot tell (it counts the FLOPs of a row flagged impossible)"
    cap, what = (ANY_CPU_TFLOPS, "any CPU") if r.timed_on == "cpu" else (ANY_DEVICE_TFLOPS, "any device")
    if rate > cap:
        return f"cannot be true ({fmt_tflops(rate)} is beyond {what}; {WRONG_INPUT})"
    return None
