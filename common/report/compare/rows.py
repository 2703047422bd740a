"""What changed between two runs, name by name: the device work (kernels, memcpys, memsets) and the
ops, in calls and time per step.

Per step means the median over the steps compare judges (:func:`judged_steps`: every step but the
profiler's first when a run has three or more; that step is the profiler starting, wider in every
run). Device work belongs to the step its launch is in (the model's ``dev.step``, by correlation).
A kernel only in A and one only in B whose names decode to the same GEMM (library, tile, stages,
cluster, layout, dtype) and differ only in flags (nvjet's ``bz`` -> ``badd``) are one kernel,
changed, not one gone and one new.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median

import numpy as np

from common.report.model import names as trace_names
from common.report.model.build import ANNOTATION, KERNEL, MEMCPY, MEMSET, OP, STEP_RE
from common.report.facts.steps import RunSteps

KIND_NAMES = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}
FIRST_STEP_LEFT_OUT_FROM = 3  # a run with this many steps or more is judged without its first one


def judged_steps(t: RunSteps) -> np.ndarray:
    """The step indices compare judges: all of them, less the profiler's first when there are 3 or more."""
    n = len(t.step_rows)
    return np.arange(1 if n >= FIRST_STEP_LEFT_OUT_FROM and t.model.window_source == "ProfilerStep" else 0, n)


@dataclass(frozen=True)
class Series:
    """One name's calls and time (µs) in each judged step."""

    calls: tuple
    time_us: tuple

    @property
    def calls_per_step(self) -> float:
        return float(median(self.calls)) if self.calls else 0.0

    @property
    def us_per_step(self) -> float:
        return float(median(self.time_us)) if self.time_us else 0.0


def series_of(keys: np.ndarray, steps: np.ndarray, weights: np.ndarray, judged: np.ndarray, names) -> dict:
    """{name: Series} of the events ``keys`` (ids into ``names``) in ``steps`` (step index per event):
    one bincount over (key, judged step), whatever the number of events and names."""
    pos = np.full(int(max(judged.max(initial=-1), steps.max(initial=-1))) + 2, -1)
    pos[judged] = np.arange(judged.size)
    column = np.where(steps >= 0, pos[np.maximum(steps, 0)], -1)
    inside = column >= 0
    if not inside.any():
        return {}
    found, key = np.unique(keys[inside], return_inverse=True)
    cells = key * judged.size + column[inside]
    size = found.size * judged.size
    calls = np.bincount(cells, minlength=size).reshape(found.size, judged.size)
    time = np.bincount(cells, weights=weights[inside], minlength=size).reshape(found.size, judged.size)
    return {names[int(k)]: Series(tuple(calls[i].tolist()), tuple(time[i].tolist())) for i, k in enumerate(found.tolist())}


def device_series(t: RunSteps) -> dict:
    """{name: (kind, Series)} of every kernel, memcpy and memset launched in the judged steps."""
    m = t.model
    if not m.has_gpu:
        return {}
    dev = m.dev
    found = series_of(dev.name, dev.step, dev.dur, judged_steps(t), m.names)
    ids, first = np.unique(dev.name, return_index=True)
    kinds = {m.names[n]: int(k) for n, k in zip(ids.tolist(), dev.kind[first].tolist())}
    return {name: (KIND_NAMES[kinds[name]], s) for name, s in found.items()}


def op_series(t: RunSteps) -> dict:
    """{op: (CPU Series, device Series or None)}: each op's calls and CPU time per step (an op directly
    inside an op of its name is the same call), and the device time of the work it launched itself."""
    m = t.model
    cpu = m.cpu
    step_name = m.name_mask(lambda s: bool(STEP_RE.match(s)))
    up = np.maximum(cpu.parent, 0)
    outer = (cpu.parent < 0) | (cpu.name[up] != cpu.name)
    rows = np.flatnonzero(((cpu.kind == OP) | (cpu.kind == ANNOTATION)) & ~step_name[cpu.name] & outer)
    judged = judged_steps(t)
    out = {name: (s, None) for name, s in series_of(cpu.name[rows], cpu.step[rows], cpu.dur[rows], judged,
                                                   m.names).items()}
    if m.has_gpu:
        dev = m.dev
        by_op = np.flatnonzero(dev.op >= 0)
        launched = series_of(cpu.name[dev.op[by_op]], dev.step[by_op], dev.dur[by_op], judged, m.names)
        zero = Series((0,) * judged.size, (0.0,) * judged.size)
        out = {name: (s, launched.get(name, zero)) for name, (s, _) in out.items()}
    return out


def same_gemm(a: str, b: str) -> bool:
    """Two kernel names that decode to the same GEMM and differ only in flags (or the epilogue they name)."""
    da, db = trace_names.decode_gemm(a), trace_names.decode_gemm(b)
    if not da or not db:
        return False
    strip = lambda d: {k: v for k, v in d.items() if k not in ("flags", "epilogue")}  # noqa: E731
    return strip(da) == strip(db) and da != db


def _row(name: str, kind: str, sa, sb) -> dict:
    a_us, b_us = (sa.us_per_step if sa else 0.0), (sb.us_per_step if sb else 0.0)
    return dict(name=name, kind=kind, a_calls_per_step=sa.calls_per_step if sa else 0.0,
                b_calls_per_step=sb.calls_per_step if sb else 0.0, a_per_step_us=a_us, b_per_step_us=b_us,
                change_pct=100.0 * (b_us - a_us) / a_us if sa and a_us > 0 else None)


def device_changes(a: RunSteps, b: RunSteps) -> dict:
    """The device work side by side: ``both`` (same name in both runs), ``changed`` (a GEMM renamed only
    in its flags: ``name`` is A's, ``b_name`` B's), ``only_a`` (gone) and ``only_b`` (new), each row with
    its kind, calls and time per step (medians over the judged steps), heaviest first."""
    return device_changes_between(device_series(a), device_series(b))


def device_changes_between(da: dict, db: dict) -> dict:
    """:func:`device_changes` over two runs' :func:`device_series`."""
    only_a = [n for n in da if n not in db]
    only_b = [n for n in db if n not in da]
    changed = []
    for n in list(only_a):
        partner = next((p for p in only_b if da[n][0] == db[p][0] == "kernel" and same_gemm(n, p)), None)
        if partner is not None:
            only_a.remove(n)
            only_b.remove(partner)
            changed.append(dict(_row(n, "kernel", da[n][1], db[partner][1]), b_name=partner))
    by_time = lambda rows: sorted(rows, key=lambda r: -max(r["a_per_step_us"], r["b_per_step_us"]))  # noqa: E731
    return dict(
        both=by_time([_row(n, da[n][0], da[n][1], db[n][1]) for n in da if n in db]),
        changed=by_time(changed),
        only_a=by_time([_row(n, da[n][0], da[n][1], None) for n in only_a]),
        only_b=by_time([_row(n, db[n][0], None, db[n][1]) for n in only_b]),
    )


def op_changes(a: RunSteps, b: RunSteps) -> list[dict]:
    """Per op in either run whose calls per step changed (gone and new ones too) or, on two GPU traces,
    whose device time per step (the work it launched itself) changed by more than a tenth: calls, CPU
    time and device time per step in A and B, the biggest change in time first (``time``: which of the
    two, device on GPU traces). An op's CPU time alone, which the host's load moves, does not list it."""
    return op_changes_between(op_series(a), op_series(b), a.has_gpu and b.has_gpu)


def op_changes_between(oa: dict, ob: dict, gpu: bool) -> list[dict]:
    """:func:`op_changes` over two runs' :func:`op_series` (``gpu``: both runs have a device lane)."""
    rows = []
    for name in list(oa) + [n for n in ob if n not in oa]:
        ca, da = oa.get(name, (None, None))
        cb, db = ob.get(name, (None, None))
        row = dict(name=name, a_calls_per_step=ca.calls_per_step if ca else 0.0,
                   b_calls_per_step=cb.calls_per_step if cb else 0.0,
                   a_cpu_us=ca.us_per_step if ca else 0.0, b_cpu_us=cb.us_per_step if cb else 0.0,
                   a_device_us=da.us_per_step if da else (0.0 if gpu else None),
                   b_device_us=db.us_per_step if db else (0.0 if gpu else None))
        key = "device" if gpu else "cpu"
        ta, tb = row[f"a_{key}_us"], row[f"b_{key}_us"]
        moved = key == "device" and abs(tb - ta) > 0.1 * max(ta, tb) and abs(tb - ta) >= 1.0
        if row["a_calls_per_step"] != row["b_calls_per_step"] or moved:
            rows.append(dict(row, time=key))
    return sorted(rows, key=lambda r: -abs(r[f"b_{r['time']}_us"] - r[f"a_{r['time']}_us"]))


def differing(name: str, other: str) -> list[str]:
    """The underscore-separated parts of ``name`` that ``other`` lacks (``bz`` of a GEMM renamed ``badd``)."""
    theirs = set(other.split("_"))
    return [p for p in name.split("_") if p not in theirs]
