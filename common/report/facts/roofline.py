"""The roofline of the trace's GEMMs and attention: arithmetic per op against the time it took.

A chain of three stages, each taking only the previous one's result: :func:`counted_calls` (the
model -> every counted op call, its arithmetic and its time: ``Calls``) -> :func:`group_calls` (one
row per op, shape and dtype: ``Rows``) -> :func:`judge` (the device's peaks, the share of peak and
the roof that bounds each row: ``Roofline``). :func:`build_roofline` runs the three.

Definitions:

- **counted op**: a GEMM (:data:`~common.report.load.shapes.GEMM_OPS`: ``aten::mm``, ``addmm``, ``bmm``, ``baddbmm``,
  ``_scaled_mm``; ``aten::matmul`` and ``aten::linear`` dispatch to these) or an attention op
  (:data:`~common.report.load.shapes.ATTENTION_OPS`: SDPA and its backends' ops, forward and backward) with no counted
  op beneath it, so each multiply counts once: SDPA's flash path counts its innermost op, its math
  path the ``aten::bmm`` calls it makes.
- **FLOPs** and **ideal bytes** per call, from ``record_shapes``' ``Input Dims`` (:mod:`.op_arithmetic`
  defines them): a GEMM ``[M,K] @ [K,N]`` does ``2·M·N·K`` (plus the bias); attention's forward its
  two GEMMs, ``4·B·H·S²·D`` (halved when causal), its backward the five GEMMs of FlashAttention's
  backward pass (2.5x the forward); ideal bytes are every input read once and the output written
  once (what a kernel that keeps everything else on chip moves; attention's ``[seq, seq]`` scores
  are not in it).
- **arithmetic intensity**: FLOPs / ideal bytes (FLOP/byte).
- **time**: on a GPU trace, the device time of the kernels the call launched (it or any op under
  it); on a CPU-only trace, the call's own CPU time (its wall time, the ops under it included).
- **achieved rate**: FLOPs / time (TFLOP/s, GFLOP/s) and ideal bytes / time (GB/s).
- **the steps' rate** (CPU traces; a GPU runs its kernels after the host step that launched them):
  every counted FLOP in the ProfilerSteps over the steps' wall time, so the
  dispatch, the other ops and the waits count: on the CPU, where a matmul has no launch to wait on,
  the op's own rate barely moves with size while the steps' rate shows the overhead.
- **peak** (:mod:`~common.report.model.peaks`): the datasheet's dense figure for the op's dtype on the trace's GPU;
  **share of peak** = achieved / peak. **Ridge point** = peak FLOP/s / peak bytes/s: an op whose
  intensity is below it is bound by memory bandwidth, above it by compute; the **roof** at its
  intensity is min(peak FLOP/s, intensity x peak bytes/s). Unknown device, dtype
  without a datasheet unit, or the CPU: no peak, so no share and no bound.

Without ``record_shapes`` a lesson's trace still says, in its knobs, the shapes it ran: then
:mod:`.knob_work` gives the step's GEMMs as one row (FLOPs and ideal bytes, so intensity and bound;
timed by the counted ops' kernels, at the dtype the kernels' names say they ran) and, in an
attention lesson, **the attention forward** as another: one FLOP count for every variant (causal:
the unmasked half), timed by all the device work of the step, so variants rank by it as by their
time (with ``record_shapes`` too, where the counted ops are GEMMs). A lesson the knobs cannot break
down keeps one row with ``matmul_flops_per_step``: FLOPs and rates, no bytes, no bound.

On the CPU no peak is given. The lessons measure a 256x256 matmul at start (:mod:`common.cpu`), but
only as a bf16/fp32 time ratio: no rate is written into the knobs, and a 5-run best of one small
square is not the CPU's peak anyway; so a CPU row has achieved rates only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from common.report.facts.header import gpu_of_trace
from common.report.model import names as trace_names
from common.report.model.build import KERNEL, OP, Model
from common.report.facts.knob_work import ATTENTION as ATTENTION_ROW
from common.report.facts.knob_work import GEMMS as GEMM_ROW
from common.report.facts.knob_work import attention_row, gemm_row
from common.report.facts import workload
from common.work import call_flops
from common.report.facts.op_arithmetic import Work, work_of
from common.report.model.peaks import Peak, compute_peak, peak_of
from common.report.rates import fmt_gbs
from common.report.load.shapes import ATTENTION_OPS, GEMM_OPS, counts_flops

KNOBS_OP = "GEMMs and attention (per step, lesson's knobs)"
KNOB_ROWS = (KNOBS_OP, GEMM_ROW, ATTENTION_ROW)  # rows of one step's work from the knobs, not of one op call


@dataclass(frozen=True)
class Call:
    op: str
    work: Work
    time_us: Optional[float]  # device time of its kernels (GPU trace) or its CPU time; None: no kernels
    tf32: bool  # a kernel of it ran on tensor cores (fp32 in, so TF32)


@dataclass(frozen=True)
class Calls:
    """Stage 1: every counted call in the steps, and where their numbers come from."""

    calls: tuple  # Call
    source: Optional[str]  # "record_shapes" | "count" (the workload's own, :mod:`.workload`) | "knobs" | None
    timed_on: str  # "device" | "cpu"
    device_name: Optional[str]  # the GPU's deviceProperties name; None on the CPU
    step_flops: int = 0  # every counted call's FLOPs in the ProfilerSteps
    step_wall_us: float = 0.0  # those steps' wall time (0: the trace has no ProfilerStep)


@dataclass(frozen=True)
class Row:
    """One (op, shape, dtype): its calls and achieved rates."""

    op: str
    shape: str
    dtype: str
    calls: int  # calls timed (with kernels, on a GPU trace)
    flops: int  # per call
    bytes: Optional[int]  # per call
    time_us: float  # all timed calls
    causal: Optional[bool]
    tf32: bool

    @property
    def intensity(self) -> Optional[float]:
        """FLOP per ideal byte."""
        return self.flops / self.bytes if self.bytes else None

    @property
    def tflops(self) -> Optional[float]:
        return self.flops * self.calls / self.time_us / 1e6 if self.time_us > 0 else None

    @property
    def gbs(self) -> Optional[float]:
        return self.bytes * self.calls / self.time_us / 1e3 if self.time_us > 0 and self.bytes else None


@dataclass(frozen=True)
class Rows:
    """Stage 2: the rows by total time, and stage 1's context."""

    rows: tuple  # Row
    source: Optional[str]
    timed_on: str
    device_name: Optional[str]
    step_flops: int
    step_wall_us: float


@dataclass(frozen=True)
class Judged:
    """A row held to its device's peaks (all None where the peak is unknown)."""

    row: Row
    peak_tflops: Optional[float]
    peak_unit: str  # bf16 | fp16 | tf32 | fp32, or why there is no peak
    pct_of_peak: Optional[float]  # achieved TFLOP/s over the compute peak, %
    pct_of_bandwidth: Optional[float]  # achieved GB/s over the memory peak, %
    ridge: Optional[float]  # FLOP/byte where the two roofs meet
    bound: Optional[str]  # "compute" | "memory": the roof its measured rate reaches NEAR_ROOF_PCT of; None: neither, or cannot tell
    roof_tflops: Optional[float] = None  # the roof over its intensity: min(peak, intensity x bandwidth)
    impossible: Optional[str] = None  # why its rate cannot be true (then no share, roof or bound): .impossible

    @property
    def pct_of_roof(self) -> Optional[float]:
        """Achieved over the roof at its intensity, %: how close the op came to what its bound allows."""
        tflops = self.row.tflops
        return 100.0 * tflops / self.roof_tflops if tflops is not None and self.roof_tflops else None


@dataclass(frozen=True)
class Roofline:
    """Stage 3: the judged rows, the device and its peaks, and what could not be told and why."""

    rows: tuple  # Judged
    source: Optional[str]
    timed_on: str
    device: str  # the GPU's name, or "CPU"
    peak: Optional[Peak]
    note: str  # what the peak is (or why none), in words
    step_flops: int = 0
    step_wall_us: float = 0.0
    impossible_step: Optional[str] = None  # why the steps' rate cannot be told (.impossible)

    @property
    def step_tflops(self) -> Optional[float]:
        """The steps' effective rate: their GEMM and attention FLOPs over their wall time (the dispatch,
        the other ops and the waits included), TFLOP/s; None without ProfilerSteps or on a GPU trace."""
        if self.impossible_step is not None:
            return None
        return self.step_flops / self.step_wall_us / 1e6 if self.step_wall_us > 0 and self.step_flops else None


def build_roofline(m: Model) -> Roofline:
    return judge(group_calls(counted_calls(m)))


# ----------------------------------------------------------------------------- stage 1: calls


def counted_calls(m: Model) -> Calls:
    """The counted calls in the steps, with their arithmetic (record_shapes, else the knobs) and time."""
    cpu = m.cpu
    counted = _counted(m)
    on_gpu = m.has_gpu
    device_name = gpu_of_trace(m).name if on_gpu else None
    times, tf32 = _call_times(m, counted) if on_gpu else (cpu.dur, np.zeros(cpu.n, bool))
    rows = np.flatnonzero(counted & (cpu.step >= 0))
    calls = []
    for i in rows.tolist():
        work = work_of(m.names[cpu.name[i]], cpu.shapes[i])
        if work is not None:
            time = float(times[i]) if not on_gpu or times[i] > 0 else None
            calls.append(Call(m.names[cpu.name[i]], work, time, bool(tf32[i])))
    timed_on = "device" if on_gpu else "cpu"
    # the host steps' wall holds a CPU trace's work; a GPU's kernels run after their launch, outside it
    walls = sum(s.dur for s in m.steps) if m.window_source == "ProfilerStep" and not on_gpu else 0.0
    knobs = m.knobs
    if calls:
        op_level = any(m.names[cpu.name[i]] in ATTENTION_OPS for i in rows.tolist())
        forward = () if knobs is None or op_level else _attention_calls(m, knobs)
        return Calls(tuple(calls) + forward, "record_shapes", timed_on, device_name,
                     sum(c.work.flops for c in calls), walls)
    counted_parts = workload.parts(knobs.work) if knobs is not None else ()
    if counted_parts:
        per_step = _work_calls(m, rows, times, tf32, counted_parts)
        # one count per operation: an SDPA call once, not again as the GEMMs its math backend ran
        steps = len(m.steps) if walls else 0
        return Calls(per_step, "count", timed_on, device_name, (call_flops(knobs.work) or 0) * steps, walls) \
            if per_step else Calls((), None, timed_on, device_name)
    attention = knobs is not None and attention_row(knobs) is not None  # timed by its steps: counted ops or not
    if knobs is None or not (rows.size or attention) or not (knobs.matmul_flops_per_step or attention):
        return Calls((), None, timed_on, device_name)
    per_step = _knob_calls(m, rows, times, tf32, knobs)
    counted_flops = sum(c.work.flops for c in per_step if c.op != ATTENTION_ROW)
    return Calls(per_step, "knobs", timed_on, device_name,
                 counted_flops or sum(c.work.flops for c in per_step), walls)


def _counted(m: Model) -> np.ndarray:
    """Per CPU event: a GEMM or attention op with no such op beneath it."""
    cpu = m.cpu
    flop_op = m.name_mask(counts_flops)[cpu.name] & (cpu.kind == OP)
    has_below = np.zeros(cpu.n, bool)
    below = flop_op.copy()
    for level in range(int(cpu.max_depth), 0, -1):  # children before parents
        rows = np.flatnonzero((cpu.depth == level) & below & (cpu.parent >= 0))
        has_below[cpu.parent[rows]] = True
        below[cpu.parent[rows]] = True
    return flop_op & ~has_below


def _call_times(m: Model, counted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per CPU event: the device time of the kernels launched under it, if counted, and whether any
    of them ran on tensor cores (for an fp32 op: TF32; :func:`~common.report.model.names.uses_tensor_cores`, or ``tf32``
    in the name). Each kernel goes to the counted op around its launch (the innermost)."""
    cpu, dev = m.cpu, m.dev
    kernels = np.flatnonzero((dev.kind == KERNEL) & (dev.launch >= 0))
    owner = dev.launch[kernels].copy()
    for _ in range(int(cpu.max_depth) + 1):  # climb to the counted op around each launch
        climb = (owner >= 0) & ~counted[np.maximum(owner, 0)]
        if not climb.any():
            break
        owner[climb] = cpu.parent[owner[climb]]
    owned = owner >= 0
    time = np.bincount(owner[owned], weights=dev.dur[kernels][owned], minlength=cpu.n)
    tf32_name = m.name_mask(lambda s: "tf32" in s.lower() or trace_names.uses_tensor_cores(s))
    tf32 = np.zeros(cpu.n, bool)
    tf32[owner[owned & tf32_name[dev.name[kernels]]]] = True
    return time, tf32


def _knob_calls(m: Model, rows: np.ndarray, times: np.ndarray, tf32: np.ndarray, knobs) -> tuple:
    """Per step holding counted ops, from the lesson's knobs (:mod:`.knob_work`): its GEMMs as one call
    (FLOPs and bytes from the shapes, timed by the counted ops' kernels, at their kernels' dtype) where
    the counted ops are GEMMs, and the attention forward (:func:`_attention_calls`); for a lesson the
    knobs cannot break down, one call with ``matmul_flops_per_step`` (no bytes)."""
    steps = m.cpu.step[rows]
    names = {m.names[m.cpu.name[i]] for i in rows.tolist()}
    gemm = gemm_row(knobs, _kernel_dtype(m, rows) or knobs.dtype) if names & GEMM_OPS else None
    out = []
    for s in np.unique(steps).tolist():
        mine = rows[steps == s]
        time = float(times[mine].sum())
        if gemm is not None:
            work = Work(gemm.flops, gemm.bytes, gemm.shape, gemm.dtype)
            out.append(Call(GEMM_ROW, work, time if time > 0 else None, bool(tf32[mine].any())))
        elif attention_row(knobs) is None:
            shape = "x".join(str(n) for n in knobs.shape) or "?"
            work = Work(int(knobs.matmul_flops_per_step), None, f"{shape} (lesson's size)", knobs.dtype)
            out.append(Call(KNOBS_OP, work, time if time > 0 else None, bool(tf32[mine].any())))
    return tuple(out) + _attention_calls(m, knobs)


def _work_calls(m: Model, rows: np.ndarray, times: np.ndarray, tf32: np.ndarray, parts: tuple) -> tuple:
    """Per step, each row of the workload's own count (:mod:`.workload`): an annotation's GEMMs timed by
    the trace's GEMM ops inside it; an attention that is all its annotation does, by all the step's work
    (as :func:`_attention_calls`), else by the attention ops inside it."""
    names = np.array([m.names[n] for n in m.cpu.name[rows].tolist()], dtype=object)
    step_time = _step_times(m)
    inside = {a: _inside(m, a) for a in {part.annotation for part in parts}}  # once per annotation, not per part
    out = []
    for part in parts:
        work = Work(part.flops, part.bytes, part.shape, part.dtype, part.causal)
        op = ATTENTION_ROW if part.kind == "attention" else GEMM_ROW
        if part.kind == "attention" and part.alone:
            out += [Call(op, work, float(t), False) for t in step_time.tolist() if t > 0]
            continue
        mine = rows[np.isin(names, list(part.ops)) & inside[part.annotation][rows]]
        for s in np.unique(m.cpu.step[mine]).tolist():
            here = mine[m.cpu.step[mine] == s]
            time = float(times[here].sum())
            out.append(Call(op, work, time if time > 0 else None, bool(tf32[here].any())))
    return tuple(out)


def _inside(m: Model, annotation: Optional[str]) -> np.ndarray:
    """Per CPU event: inside a call of ``annotation`` (itself or nested in it); all of them for None."""
    cpu = m.cpu
    if annotation is None:
        return np.ones(cpu.n, bool)
    mask = m.name_mask(lambda s: s == annotation)[cpu.name]
    for level in range(1, int(cpu.max_depth) + 1):  # parents before children
        rows = np.flatnonzero((cpu.depth == level) & (cpu.parent >= 0) & ~mask)
        mask[rows] = mask[cpu.parent[rows]]
    return mask


def _step_times(m: Model) -> np.ndarray:
    """Per step: the device time of the work it launched (a GPU trace), else its wall time."""
    if m.has_gpu:
        return np.bincount(m.dev.step[m.dev.step >= 0], weights=m.dev.dur[m.dev.step >= 0], minlength=len(m.steps))
    return np.array([s.dur for s in m.steps])


def _attention_calls(m: Model, knobs) -> tuple:
    """The attention forward of an attention lesson, one call per step: one FLOP count whatever ran it,
    timed by all the device work the step launched (on the CPU: the step's wall time)."""
    row = attention_row(knobs)
    if row is None or not m.steps:
        return ()
    step_time = _step_times(m)
    work = Work(row.flops, row.bytes, row.shape, row.dtype, row.causal)
    return tuple(Call(ATTENTION_ROW, work, float(t), False) for t in step_time.tolist() if t > 0)


def _kernel_dtype(m: Model, rows: np.ndarray) -> str | None:
    """The one dtype the GEMM kernels launched under ``rows`` (or their children) say they ran, if they
    agree (``sm80_xmma_gemm_f32f32...``: fp32; ``nvjet_..._h_...``: bf16); None where none says."""
    if not m.has_gpu:
        return None
    launched_by = np.zeros(m.cpu.n, bool)
    launched_by[rows] = True
    for _ in range(int(m.cpu.max_depth) + 1):  # every op under a counted op counts as it
        below = (m.cpu.parent >= 0) & launched_by[np.maximum(m.cpu.parent, 0)] & ~launched_by
        if not below.any():
            break
        launched_by |= below
    dev = m.dev
    mine = (dev.kind == KERNEL) & (dev.launch >= 0) & launched_by[np.maximum(dev.launch, 0)]
    dtypes = {(trace_names.decode_gemm(m.names[n]) or {}).get("dtype") for n in np.unique(dev.name[mine]).tolist()}
    dtypes.discard(None)
    return dtypes.pop() if len(dtypes) == 1 else None


# ----------------------------------------------------------------------------- stage 2: rows


def group_calls(c: Calls) -> Rows:
    """One row per (op, shape, dtype), timed calls only, by total time."""
    groups: dict = {}
    for call in c.calls:
        if call.time_us is None:
            continue
        w = call.work
        key = (call.op, w.shape, w.dtype)
        calls, time, tf32 = groups.get(key, (0, 0.0, False))
        groups[key] = (calls + 1, time + call.time_us, tf32 or call.tf32)
    works = {(call.op, call.work.shape, call.work.dtype): call.work for call in c.calls}
    rows = [Row(op, shape, dtype, calls, works[(op, shape, dtype)].flops, works[(op, shape, dtype)].bytes, time,
                works[(op, shape, dtype)].causal, tf32)
            for (op, shape, dtype), (calls, time, tf32) in groups.items()]
    rows.sort(key=lambda r: -r.time_us)
    return Rows(tuple(rows), c.source, c.timed_on, c.device_name, c.step_flops, c.step_wall_us)


# ----------------------------------------------------------------------------- stage 3: against the peaks


def judge(r: Rows) -> Roofline:
    """Each row against its device's datasheet peaks (none on the CPU or an unknown GPU)."""
    if r.timed_on == "cpu":
        note = ("CPU: peak unknown, achieved rates only (no CPU peak is measured: the lesson's 256x256 matmul "
                "at start is a bf16/fp32 time ratio, not a peak)")
        return Roofline(tuple(Judged(row, None, "unknown (CPU)", None, None, None, None) for row in r.rows),
                        r.source, r.timed_on, "CPU", None, note, r.step_flops, r.step_wall_us)
    peak = peak_of(r.device_name)
    name = r.device_name or "unnamed GPU"
    if peak is None:
        return Roofline(tuple(Judged(row, None, "unknown device", None, None, None, None) for row in r.rows),
                        r.source, r.timed_on, name, None,
                        f"{name}: not in the datasheet table (common/report/model/peaks.py): achieved rates only",
                        r.step_flops, r.step_wall_us)
    note = (f"{name}: peaks of the {peak.device} ({peak.source}), dense (no sparsity); "
            f"memory {fmt_gbs(peak.memory_gbs) if peak.memory_gbs else 'bandwidth unknown (no memory roof)'}")
    return Roofline(tuple(judge_row(row, peak) for row in r.rows), r.source, r.timed_on, name, peak, note,
                    r.step_flops, r.step_wall_us)


NEAR_ROOF_PCT = 50.0  # a row is bound by a roof when its measured rate reaches this share of it
LOW_INTENSITY = 2.0  # FLOP/byte: under every CPU's and GPU's ridge point (a single core's lies near 4, a GPU's at hundreds)


def judge_row(row: Row, peak: Peak) -> Judged:
    """The row against both roofs. Its bound is the roof its measured rate comes near (NEAR_ROOF_PCT of the
    roof at its intensity: the compute peak above the ridge point, the bandwidth's line below it); far under
    both, none: the kernels' own limits hold them, or they do more than the operation needs. So the same
    kernels at the same time read the same on two cards, though an intensity between their ridge points
    (256 FLOP/byte: the H100's ridge is 295, the H200's 206) sits on a different side of each. A row under
    LOW_INTENSITY (an LLM's decode: each weight read once per token) is memory-bound on any card, however far
    under the bandwidth its kernels run: no kernel could bring it near the compute roof."""
    tflops, unit = compute_peak(peak, row.dtype, row.tf32)
    if tflops is None:
        return Judged(row, None, unit, None, None, None, None)
    bandwidth = peak.memory_gbs
    ridge = tflops * 1e12 / (bandwidth * 1e9) if bandwidth else None
    intensity = row.intensity
    side = None if ridge is None or intensity is None else ("memory" if intensity < ridge else "compute")
    pct = 100.0 * row.tflops / tflops if row.tflops is not None else None
    pct_bw = 100.0 * row.gbs / bandwidth if row.gbs is not None and bandwidth else None
    roof = min(tflops, intensity * bandwidth / 1e3) if side is not None else None
    near = roof is not None and row.tflops is not None and 100.0 * row.tflops / roof >= NEAR_ROOF_PCT
    low = side == "memory" and intensity < LOW_INTENSITY
    return Judged(row, tflops, unit, pct, pct_bw, ridge, side if near or low else None, roof)


# ----------------------------------------------------------------------------- JSON


def row_json(j: Judged) -> dict:
    """One judged row as ``--json`` writes it (its keys: docs/report.md, "JSON schema")."""
    r = j.row
    return dict(op=r.op, shape=r.shape, dtype=r.dtype, calls=r.calls, flops=r.flops, bytes=r.bytes,
                intensity=r.intensity, time_us=r.time_us, tflops=r.tflops,
                gflops=r.tflops * 1e3 if r.tflops is not None else None, gb_per_s=r.gbs, causal=r.causal,
                peak_tflops=j.peak_tflops, peak_unit=j.peak_unit, pct_of_peak=j.pct_of_peak,
                pct_of_bandwidth=j.pct_of_bandwidth, ridge=j.ridge, bound=j.bound, roof_tflops=j.roof_tflops,
                pct_of_roof=j.pct_of_roof, impossible=j.impossible)


def roofline_json(r: Roofline) -> dict:
    peak = r.peak
    return dict(source=r.source, timed_on=r.timed_on, device=r.device, note=r.note, step_flops=r.step_flops,
                step_wall_us=r.step_wall_us, step_tflops=r.step_tflops,
                step_gflops=r.step_tflops * 1e3 if r.step_tflops is not None else None,
                impossible_step=r.impossible_step,
                peak=None if peak is None else dict(device=peak.device, bf16=peak.bf16, fp16=peak.fp16, tf32=peak.tf32,
                                                    fp32=peak.fp32, memory_gbs=peak.memory_gbs, source=peak.source),
                rows=[row_json(j) for j in r.rows])
