"""The CPU analogue of overhead-bound vs compute-bound: each step's wall time split into the
compute ops' own work and the dispatch around them.

On a GPU the posts read the two totals of the profiler table: Self CPU (dispatch) against Self
CUDA (the work). On the CPU both happen on the same thread, so the split is made in the call
tree instead:

- **compute**: the self time of the ops that do the arithmetic: ``aten::*`` ops that are neither
  views/metadata (``aten::t``, ``aten::view``, ``aten::resolve_conj``...) nor dispatchers, and
  Inductor's fused C++ kernels (``graph_0_cpp_fused_...``). An op is a *dispatcher* when its
  child ops take at least half of its time (``aten::matmul`` -> ``aten::mm``, ``aten::linear`` ->
  ``aten::addmm``): its own time is the hand-off, not the work.
- **dispatch**: everything else in the step: the annotation, the dispatcher chain, views,
  torch.compile's guards and wrappers, Python, the profiler's own bookkeeping.

An op's self time still holds its own fixed cost (argument checks, allocation, picking a BLAS
routine), so for tiny ops "compute" is an upper bound on the arithmetic; the time per call says
which regime a run is in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from common.report.model import names as trace_names

LONG_NO_OP_US = 1000.0  # an op's dispatch takes µs: a stretch this long with no op running is something else
DISPATCHER_SHARE = 0.5  # an op whose child ops take this share of its time is a dispatcher
STEP_LABEL = "ProfilerStep (Python and the profiler between ops)"


@dataclass(frozen=True)
class StepWork:
    wall_us: float
    compute_us: float
    compute_calls: int
    no_op_us: float = 0.0  # time in the step with no op running on its thread (Python, freeing memory, the profiler)
    longest_no_op_us: float = 0.0  # the longest such stretch
    freed_in_stretches: float = float("nan")  # bytes freed (``[memory]``) in its stretches of LONG_NO_OP_US or more; nan: no memory events

    @property
    def compute_pct(self) -> float:
        return 100.0 * self.compute_us / self.wall_us if self.wall_us > 0 else 0.0

    @property
    def dispatch_us(self) -> float:
        """The step's time outside the compute ops' own work: the dispatch around them."""
        return max(self.wall_us - self.compute_us, 0.0)


@dataclass(frozen=True)
class OpTime:
    name: str
    self_us: float  # over all the steps
    calls: int

    @property
    def per_call_us(self) -> float:
        return self.self_us / self.calls if self.calls else 0.0


@dataclass(frozen=True)
class CpuWork:
    """Per step: the compute ops' self time; which ops those were, and what the dispatch was."""

    steps: tuple[StepWork, ...]
    compute_ops: tuple[OpTime, ...]  # heaviest first
    dispatch: tuple[OpTime, ...]  # the other events' self time by name, heaviest first (ProfilerStep#N as one)
    heaviest_per_step: tuple[StepWork, ...] = ()  # the typical step's heaviest compute op's own time and calls in each step
    by_step: tuple[tuple[str, tuple[float, ...]], ...] = ()  # (name, its self time in each step): every event
    dispatch_by_step: tuple[tuple[str, tuple[float, ...]], ...] = ()  # the same, of the dispatch events only
    heaviest_op: str = ""  # whose time heaviest_per_step holds: the largest median own time per step

    def without_first(self) -> "CpuWork":
        """The same split over the steps after the first (a cold start or the profiler's first recorded step)."""
        return CpuWork(self.steps[1:], self.compute_ops, self.dispatch, self.heaviest_per_step[1:],
                       tuple((n, us[1:]) for n, us in self.by_step), tuple((n, us[1:]) for n, us in self.dispatch_by_step),
                       self.heaviest_op)

    def median_per_step(self, name: str) -> float:
        """``name``'s self time in a typical step: its median over the steps (0 where it never ran)."""
        us = dict(self.by_step).get(name)
        return float(np.median(us)) if us else 0.0

    @property
    def median_no_op_us(self) -> float:
        return float(np.median([s.no_op_us for s in self.steps])) if self.steps else 0.0

    @property
    def median_freed_in_stretches(self) -> float:
        """Bytes freed in the long stretches with no op, median per step (nan without memory events)."""
        return float(np.median([s.freed_in_stretches for s in self.steps])) if self.steps else float("nan")

    @property
    def median_longest_no_op_us(self) -> float:
        return float(np.median([s.longest_no_op_us for s in self.steps])) if self.steps else 0.0

    def median_step_sum(self, keep) -> float:
        """The self time of the names ``keep(name)`` accepts, summed in each step: its median over the steps."""
        rows = [us for n, us in self.by_step if keep(n)]
        return float(np.median(np.sum(rows, axis=0))) if rows and self.steps else 0.0

    @property
    def dispatch_medians(self) -> tuple[OpTime, ...]:
        """The dispatch holders by their median self time per step, heaviest first (``calls`` is over all
        steps): the per-step figures the report prints, so one slow step is not read as the typical one."""
        per = dict(self.dispatch_by_step)
        rows = [OpTime(o.name, float(np.median(per[o.name])) if per.get(o.name) else 0.0, o.calls) for o in self.dispatch]
        return tuple(sorted(rows, key=lambda r: -r.self_us))

    @property
    def median_compute_pct(self) -> float:
        return float(np.median([s.compute_pct for s in self.steps])) if self.steps else 0.0

    @property
    def median_wall_us(self) -> float:
        return float(np.median([s.wall_us for s in self.steps])) if self.steps else 0.0

    @property
    def median_compute_us(self) -> float:
        return float(np.median([s.compute_us for s in self.steps])) if self.steps else 0.0

    @property
    def median_calls(self) -> float:
        return float(np.median([s.compute_calls for s in self.steps])) if self.steps else 0.0

    @property
    def per_call_us(self) -> float:
        calls = sum(s.compute_calls for s in self.steps)
        return sum(s.compute_us for s in self.steps) / calls if calls else 0.0


def is_compute_name(name: str) -> bool:
    if name.startswith("aten::"):
        return name not in trace_names.METADATA_OPS
    return trace_names.decode_fused(name) is not None


def compute_ops(*, is_op: np.ndarray, name: np.ndarray, names, dur: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per CPU event: does it do arithmetic (an op with a compute name that is not a dispatcher, the
    module's definition)? A dispatcher is a name whose calls mostly hand their time to the ops they call."""
    compute_name = np.fromiter((is_compute_name(n) for n in names), dtype=bool, count=len(names))
    op_child = is_op & (parent >= 0)
    child_dur = np.bincount(parent[op_child], weights=dur[op_child], minlength=dur.size)
    dispatcher = child_dur >= DISPATCHER_SHARE * np.maximum(dur, 1e-9)
    # a name's calls decide together: one aten::matmul slowed in its own time (a busy machine's pause between
    # its hand-off and aten::mm) is still a dispatcher, not a compute op of that step
    calls = np.bincount(name[is_op], minlength=len(names))
    handing_off = np.bincount(name[is_op], weights=dispatcher[is_op], minlength=len(names))
    dispatcher_name = handing_off >= 0.5 * np.maximum(calls, 1)
    return is_op & compute_name[name] & ~dispatcher_name[name]


def split_cpu_work(*, is_op: np.ndarray, name: np.ndarray, names: list, dur: np.ndarray, self_us: np.ndarray,
                   parent: np.ndarray, step: np.ndarray, step_walls: list[float], thread: np.ndarray,
                   step_threads: list, ts: np.ndarray | None = None, step_starts: list | None = None,
                   frees: tuple | None = None) -> CpuWork | None:
    """The split for every step, from the CPU call tree's columns (one row per CPU event).

    ``is_op`` marks op events (not annotations, runtime calls or Python frames); ``step`` is the
    step index of each event (-1 outside every step). Only the events on a step's own thread (the
    one its ProfilerStep#N ran on) count, so a step's compute is never more than its wall time.
    None when there are no steps or no ops.
    """
    nsteps = len(step_walls)
    if not nsteps or not is_op.any():
        return None
    own_thread = np.array([t if t is not None else -1 for t in step_threads] + [-1], dtype=np.int64)
    on_step_thread = own_thread[step] == thread  # (step -1 reads the last entry: no thread)
    step = np.where(on_step_thread, step, -1)
    compute = compute_ops(is_op=is_op, name=name, names=names, dur=dur, parent=parent) & (step >= 0)
    sel = np.flatnonzero(compute)
    per_step_us = np.minimum(np.bincount(step[sel], weights=self_us[sel], minlength=nsteps), step_walls)
    per_step_calls = np.bincount(step[sel], minlength=nsteps)
    gaps = _no_op(is_op & (step >= 0), ts, dur, step, step_starts, step_walls, frees) \
        if ts is not None and step_starts else [(0.0, 0.0, float("nan"))] * nsteps
    steps = tuple(StepWork(float(w), float(c), int(k), *g)
                  for w, c, k, g in zip(step_walls, per_step_us, per_step_calls, gaps))
    ops = _by_name(sel, name, names, self_us)
    # the op of the typical step: the largest median own time per step (a spike in one step of a light op,
    # a 12 ms aten::add, does not make it the heaviest)
    heaviest = max(_self_by_step(sel, name, names, self_us, step, nsteps), key=lambda n_us: float(np.median(n_us[1])),
                   default=("", ()))[0]
    return CpuWork(steps, ops, _by_name(np.flatnonzero(~compute & (step >= 0)), name, names, self_us, merge_steps=True),
                   _one_op_per_step(sel, name, names, self_us, step, step_walls, heaviest) if heaviest else (),
                   _self_by_step(np.flatnonzero(step >= 0), name, names, self_us, step, nsteps),
                   _self_by_step(np.flatnonzero(~compute & (step >= 0)), name, names, self_us, step, nsteps), heaviest)


def _no_op(sel: np.ndarray, ts: np.ndarray, dur: np.ndarray, step: np.ndarray, starts: list, walls: list,
           frees: tuple | None) -> list:
    """Per step: (time with no op running on its thread, the longest such stretch, bytes freed in the
    stretches of LONG_NO_OP_US or more: nan without ``frees``, the (times, bytes) of the memory frees).
    The ops are sorted by (step, start) once; each step's stretches come from a running maximum of ends."""
    mine = np.flatnonzero(sel)
    mine = mine[np.lexsort((ts[mine], step[mine]))]
    bounds = np.searchsorted(step[mine], np.arange(len(starts) + 1))
    out = []
    for i, (start, wall) in enumerate(zip(starts, walls)):
        order = mine[bounds[i]:bounds[i + 1]]
        at = np.concatenate((ts[order], [start + wall]))
        edge = np.fmax.accumulate(np.concatenate(([start], ts[order] + dur[order])))  # as max(edge, a + d)
        open_ = at > edge
        lengths = at[open_] - edge[open_]
        long_ = lengths >= LONG_NO_OP_US
        freed = float("nan") if frees is None else float(sum(
            -frees[1][(frees[0] >= a) & (frees[0] <= b)].sum() for a, b in zip(edge[open_][long_].tolist(),
                                                                                at[open_][long_].tolist())))
        total = float(np.cumsum(lengths)[-1]) if lengths.size else 0.0  # summed in order, as before
        out.append((total, float(lengths.max(initial=0.0)), freed))
    return out


def _self_by_step(sel: np.ndarray, name: np.ndarray, names: list, self_us: np.ndarray, step: np.ndarray,
                  nsteps: int) -> tuple:
    """(name, its self time in each step) for every name of the selected events (ProfilerStep#N as one)."""
    grid = np.zeros((len(names), nsteps))
    np.add.at(grid, (name[sel], step[sel]), self_us[sel])
    merged: dict[str, np.ndarray] = {}
    for i in np.unique(name[sel]).tolist():
        key = STEP_LABEL if names[i].startswith("ProfilerStep#") else names[i]
        merged[key] = merged.get(key, 0.0) + grid[i]
    return tuple((n, tuple(float(x) for x in us)) for n, us in merged.items())


def _one_op_per_step(sel: np.ndarray, name: np.ndarray, names: list, self_us: np.ndarray, step: np.ndarray,
                     step_walls: list[float], op: str) -> tuple[StepWork, ...]:
    """``op``'s own time and calls in each step (of the selected events)."""
    mine = sel[name[sel] == names.index(op)]
    us = np.bincount(step[mine], weights=self_us[mine], minlength=len(step_walls))
    calls = np.bincount(step[mine], minlength=len(step_walls))
    return tuple(StepWork(float(w), float(u), int(k)) for w, u, k in zip(step_walls, us, calls))


def _by_name(sel: np.ndarray, name: np.ndarray, names: list, self_us: np.ndarray,
             merge_steps: bool = False) -> tuple[OpTime, ...]:
    """Self time and calls per name over the selected events, heaviest first."""
    total = np.bincount(name[sel], weights=self_us[sel], minlength=len(names))
    calls = np.bincount(name[sel], minlength=len(names))
    merged: dict[str, list[float]] = {}
    for i in np.flatnonzero(calls).tolist():
        key = STEP_LABEL if merge_steps and names[i].startswith("ProfilerStep#") else names[i]
        slot = merged.setdefault(key, [0.0, 0])
        slot[0] += float(total[i])
        slot[1] += int(calls[i])
    rows = [OpTime(n, t, int(c)) for n, (t, c) in merged.items()]
    return tuple(sorted(rows, key=lambda r: -r.self_us))
