"""Memory numbers that cannot be true: the ``[memory]`` events are left out whole, with one note that says why.

Each event on a named device (:mod:`.memory_devices`) must carry a ``Bytes`` that is a whole number no larger
(an allocation) or smaller (a free) than the device can hold, and, where the trace records them, a ``Total
Allocated`` and ``Total Reserved`` that are whole numbers from 0 to what the device holds. Where the trace
records no totals, the running sum of ``Bytes`` (the level the report reconstructs) must stay within that too.
One event that breaks this means the file was not written by a profiler as it stands: every memory figure
(peaks, counts, per-annotation and per-op bytes) would rest on it, so the memory view is left out and the
note names the field, the value and the event.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from common.report.model.lanes import MemoryLane
from common.report.model.memory_devices import GPU, MAX_GPU_INDEX, device_capacity, device_codes, gpu_index

TOTALS = (("total_allocated", "Total Allocated"), ("total_reserved", "Total Reserved"))


LEFT_OUT = "memory view left out"  # how the note starts (the short report finds it by that)


def drop_implausible_memory(mem: MemoryLane, devices: dict, t0: float = 0.0) -> tuple[MemoryLane, list[str]]:
    """The memory lane, or an empty one (and a note) when one of its events holds an impossible number;
    ``t0``: the trace's start (the lane's times are relative to it), to name the event by its ``ts``."""
    if not mem.n:
        return mem, []
    codes, names = device_codes(mem.device_type, mem.device_id)
    capacities = [device_capacity(name, devices) for name in names]
    cap = np.array([c for c, _ in capacities] + [np.inf], dtype=np.float64)[codes]  # code -1: not checked
    problems = [(mask, label, why) for mask, label, why in _problems(mem, codes, cap) if mask.any()]
    if not problems:
        return mem, []
    bad = np.logical_or.reduce([mask for mask, _, _ in problems])
    first = int(np.flatnonzero(bad)[0])
    mask, label, why = next(p for p in problems if p[0][first])
    value = _value(mem, label, first)
    device = names[codes[first]] if codes[first] >= 0 else ""
    more = int(bad.sum()) - 1
    where = f"on {device}" if device else "on a GPU"
    note = (f"{LEFT_OUT}: the [memory] event at ts {mem.ts[first] + t0:.3f} ({first + 1:,} of {mem.n:,} by time, {where}) "
            f"has {label} {value}: {why(capacities[codes[first]][1] if device else '')}"
            + (f"; {more:,} more event(s) hold impossible numbers" if more else "")
            + "; every memory figure would rest on it")
    empty = np.empty(0)
    return replace(mem, n=0, ts=empty, thread=np.empty(0, np.int64), device_type=empty, device_id=empty, bytes=empty,
                   total_allocated=empty, total_reserved=empty, addr=empty), [note]


def _problems(mem: MemoryLane, codes: np.ndarray, cap: np.ndarray):
    """(mask of events, field, why(capacity text)) for each kind of impossible number."""
    named = codes >= 0
    wrong_id = (mem.device_type == GPU) & np.isfinite(mem.device_id) & ~gpu_index(mem.device_id)
    yield wrong_id, "Device Id", lambda c: f"not a GPU's index (a whole number from 0 to {MAX_GPU_INDEX:,})"
    b = mem.bytes
    yield named & np.isnan(b), "Bytes", lambda c: "every allocation and free has a size"
    yield named & ~np.isnan(b) & ~(np.abs(b) <= cap), "Bytes", lambda c: f"larger than {c}"
    yield named & np.isfinite(b) & (b != np.trunc(b)), "Bytes", lambda c: "not a whole number of bytes"
    for key, label in TOTALS:
        v = getattr(mem, key)
        yield named & (v < 0), label, lambda c: "below zero"
        yield named & ~np.isnan(v) & ~(v <= cap), label, lambda c: f"larger than {c}"
        yield named & np.isfinite(v) & (v != np.trunc(v)), label, lambda c: "not a whole number of bytes"
    yield _reconstructed_beyond(mem, codes, cap), "Bytes", \
        lambda c: f"the running sum of Bytes (this trace records no Total Allocated) goes beyond {c} there"


def _reconstructed_beyond(mem: MemoryLane, codes: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Per event, whether the reconstructed level (the running sum of Bytes on a device with no recorded
    totals) leaves [-capacity, capacity] there."""
    out = np.zeros(mem.n, dtype=bool)
    for code in np.unique(codes[codes >= 0]).tolist():
        rows = np.flatnonzero(codes == code)
        if np.isfinite(mem.total_allocated[rows]).all():
            continue
        with np.errstate(over="ignore", invalid="ignore"):  # a sum beyond every float is beyond the device too
            level = np.cumsum(np.nan_to_num(mem.bytes[rows], posinf=0.0, neginf=0.0))
        out[rows] = ~(np.abs(level) <= cap[rows])
    return out


def _value(mem: MemoryLane, label: str, i: int) -> str:
    v = float({"Bytes": mem.bytes, "Total Allocated": mem.total_allocated, "Total Reserved": mem.total_reserved,
               "Device Id": mem.device_id}[label][i])
    if np.isnan(v):
        return "missing or not a number"
    return f"{int(v):,}" if np.isfinite(v) and v == np.trunc(v) and abs(v) < 1e18 else f"{v:g}"
