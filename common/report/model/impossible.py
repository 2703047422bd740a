"""Numbers that cannot be true never reach the user.

A trace is written by a profiler, but a file can hold anything: a duration of 1e30 µs, an occupancy of 1e30 %,
an SM count of -5, ids too large for any counter, a tensor size of 2^63. Each such value is dropped (an event)
or cleared (one argument) here, before the model is built, and a note counts what was dropped, so that every
number the report prints comes from values a profiler could have written.

The memory events are held to the same, whole (:func:`drop_impossible_memory`): each event on a named device
(:mod:`.memory_devices`) must carry a ``Bytes`` that is a whole number no larger (an allocation) or smaller (a free)
than the device can hold, and, where the trace records them, a ``Total Allocated`` and ``Total Reserved`` that are
whole numbers from 0 to what the device holds. Where the trace records no totals, the running sum of ``Bytes`` (the
level the report reconstructs) must stay within that too. One event that breaks this means the file was not written
by a profiler as it stands: every memory figure (peaks, counts, per-annotation and per-op bytes) would rest on it,
so the memory view is left out and the note names the field, the value and the event.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import compress

import numpy as np

from common.report.load.columns import EXACT_ID_LIMIT, Columns, Group
from common.report.model.lanes import MemoryLane
from common.report.model.memory_devices import GPU, MAX_GPU_INDEX, device_capacity, device_codes, gpu_index

MAX_EVENT_US = 7 * 24 * 3600 * 1e6  # an event longer than a week: a corrupt duration, not a profile
MAX_ABS_TS_US = 1e17  # µs since 1970 (Kineto's clock) stay far below this until the year 5138
MAX_SMS = 100_000  # SMs (or compute units) of one device
MAX_DIM = 2**63  # torch's sizes are int64: a dimension at or past this is no tensor's
# launch arguments: the range a real value lies in
ARG_RANGES = {"dev_occupancy": (0.0, 100.0, "est. achieved occupancy %"),
              "dev_blocks_per_sm": (0.0, 1e9, "blocks per SM"),
              "dev_blocks": (1.0, 1e15, "grid"),
              "dev_threads": (1.0, 1e6, "block"),
              "dev_registers": (0.0, 1e6, "registers per thread"),
              "dev_shared_memory": (0.0, 1e12, "shared memory"),
              "dev_bytes": (0.0, 1e15, "bytes")}


def drop_impossible(columns: Columns) -> tuple[Columns, list[str]]:
    """The columns without impossible values, and one note per kind of value dropped."""
    notes = []
    bad_time = ~np.isfinite(columns.ts) | ~np.isfinite(columns.dur) | (np.abs(columns.ts) > MAX_ABS_TS_US) | \
        (columns.dur > MAX_EVENT_US)
    bad_side_lanes = sum(not _plausible(e[1], e[2]) for e in [*columns.gpu_annotations, *columns.overheads]) + \
        int(_bad_time(columns.memory[:, 0]).sum())
    if bad_time.any() or bad_side_lanes:
        notes.append(f"dropped {int(bad_time.sum()) + bad_side_lanes:,} event(s) whose time cannot be true (not a number, or a "
                     f"duration over a week)")
        columns = _keep_events(columns, ~bad_time)
    negative = columns.dur < 0
    if negative.any():
        notes.append(f"{int(negative.sum()):,} event(s) with a negative duration counted as zero")
        columns = replace(columns, dur=np.maximum(columns.dur, 0.0))
    cleared = []
    for key, (low, high, label) in ARG_RANGES.items():
        values = getattr(columns, key)
        wrong = np.isfinite(values) & ((values < low) | (values > high)) | np.isinf(values)
        if wrong.any():
            cleared.append(f"{int(wrong.sum()):,} '{label}'")
            columns = replace(columns, **{key: np.where(wrong, np.nan, values)})
    if cleared:
        notes.append(f"ignored launch arguments out of any real range: {', '.join(cleared)}")
    if columns.ids_out_of_range:
        notes.append(f"ignored {columns.ids_out_of_range:,} correlation id(s) or device id(s) that are not "
                     f"integers below {EXACT_ID_LIMIT:,} (those events are not linked to a launch or device)")
    return columns, notes


def _keep_events(columns: Columns, keep: np.ndarray) -> Columns:
    """The columns of the events where ``keep`` is True (per-event, per-CPU and per-device rows alike)."""
    is_cpu = columns.group <= Group.PYTHON
    is_device = (columns.group >= Group.KERNEL) & (columns.group <= Group.MEMSET)
    keep_cpu, keep_device = keep[is_cpu], keep[is_device]
    device_rows = np.flatnonzero(keep_device).tolist()
    return replace(
        columns, group=columns.group[keep], ts=columns.ts[keep], dur=columns.dur[keep], name=columns.name[keep],
        thread=columns.thread[keep_cpu], corr=columns.corr[keep_cpu], op_shapes=columns.op_shapes[keep_cpu],
        dev_corr=columns.dev_corr[keep_device], dev_device=columns.dev_device[keep_device],
        dev_stream=[columns.dev_stream[i] for i in device_rows],
        dev_blocks=columns.dev_blocks[keep_device], dev_blocks_per_sm=columns.dev_blocks_per_sm[keep_device],
        dev_threads=columns.dev_threads[keep_device],
        dev_occupancy=columns.dev_occupancy[keep_device], dev_registers=columns.dev_registers[keep_device],
        dev_shared_memory=columns.dev_shared_memory[keep_device], dev_bytes=columns.dev_bytes[keep_device],
        gpu_annotations=[a for a in columns.gpu_annotations if _plausible(a[1], a[2])],
        overheads=[o for o in columns.overheads if _plausible(o[1], o[2])],
        memory=columns.memory[~_bad_time(columns.memory[:, 0])],
        memory_tids=list(compress(columns.memory_tids, ~_bad_time(columns.memory[:, 0]))),
    )


def _bad_time(ts: np.ndarray) -> np.ndarray:
    """Per instant event, whether its time cannot be true (``_plausible`` for a whole column)."""
    return ~np.isfinite(ts) | (np.abs(ts) > MAX_ABS_TS_US)


def _plausible(ts: float, dur: float) -> bool:
    return bool(np.isfinite(ts) and np.isfinite(dur) and abs(ts) <= MAX_ABS_TS_US and dur <= MAX_EVENT_US)


def sane_device_properties(props: dict) -> tuple[dict, list[str]]:
    """A deviceProperties entry without values no device has (an SM count of -5...), and what was removed."""
    removed = []
    clean = dict(props)
    for key, low, high in (("numSms", 1, MAX_SMS), ("computeMajor", 0, 100), ("computeMinor", 0, 100)):
        value = clean.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            removed.append(f"{key} {value!r}")
            del clean[key]
    name = clean.get("name")
    if name is not None and not isinstance(name, str):
        removed.append("a name that is not text")
        del clean["name"]
    return clean, removed


def drop_impossible_shapes(columns: Columns) -> tuple[Columns, list[str]]:
    """The columns without the ``Input Dims`` no tensor has (a size of 2^63 or more: torch's sizes are
    int64), and a note naming the ops whose shapes were ignored (the roofline leaves those calls out)."""
    shapes = columns.op_shapes
    given = np.flatnonzero(shapes)  # the calls with shapes: an OpShapes is true, None is not
    bad = [i for i, s in zip(given.tolist(), shapes[given].tolist()) if any(n >= MAX_DIM for d in s.dims for n in d)]
    if not bad:
        return columns, []
    cleared = shapes.copy()
    cleared[bad] = None
    cpu_rows = np.flatnonzero(columns.group <= Group.PYTHON)
    ops = sorted({columns.names[columns.name[cpu_rows[i]]] for i in bad})
    named = ", ".join(ops[:3]) + (", ..." if len(ops) > 3 else "")
    note = (f"ignored the Input Dims of {len(bad):,} op call(s) ({named}): a size of 2^63 or more, which no tensor "
            "has; the roofline leaves those calls out")
    return replace(columns, op_shapes=cleared), [note]


TOTALS = (("total_allocated", "Total Allocated"), ("total_reserved", "Total Reserved"))


LEFT_OUT = "memory view left out"  # how the note starts (the short report finds it by that)


def drop_impossible_memory(mem: MemoryLane, devices: dict, t0: float = 0.0) -> tuple[MemoryLane, list[str]]:
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
