"""Tables: every number of the report, computed once from the model's columns.

Each function computes one table and returns it; :func:`build_tables` gathers them into one frozen
:class:`Tables`, the stage after the model: rules and renderers read it and nothing else computes.
None writes into another's input. Where a number carries another tool's name it follows that
tool's definition: HolisticTraceAnalysis's GPU busy/idle over the GPU span, TensorBoard's step
breakdown, GPU utilization, Est. SM efficiency and occupancy over its device-aligned steps
(:mod:`.tensorboard`), the profiler table's Self CPU total and calls.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from common.guess import Guess
from common.report.facts.calls import call_work
from common.report.facts.compile import CompileFrames, GraphLaunches, compile_frames, graph_launches
from common.report.facts.cpu_work import CpuWork, split_cpu_work
from common.report.facts.guess import GuessCheck, check_guess
from common.report.facts.header import gpu_of_trace, header_of
from common.report.facts.kernel_sources import kernel_sources
from common.report.facts.kernels import category_table, kernel_table
from common.report.facts.memory import Memory, memory_of
from common.report.facts.memory_ops import by_depth
from common.report.facts.numbers import (GPU_TIME_FIELDS, CpuNumbers, DeviceNumbers, EfficiencyNumbers, GpuNumbers,
                                         Numbers, TensorBoardNumbers, WindowNumbers)
from common.report.facts.outside import LaunchedOutside, launched_outside
from common.report.facts.overlap import exact_busy, exact_span, hta_busy_span, hta_overlap_pct
from common.report.facts.phases import phase_table
from common.report.facts.regime import Regime, regime_of
from common.report.facts.roofline import Roofline, build_roofline
from common.report.facts.rows import Breakdown, OpRow
from common.report.facts.steps import RunSteps, gpu_union, step_rows
from common.report.facts.tensorboard import AlignedSteps, DeviceFigures, align_steps, device_figures, step_breakdown
from common.report.model import names as trace_names
from common.report.model.build import ANNOTATION, KERNEL, MEMCPY, MEMSET, OP, RUNTIME, Model
from common.report.model.gpus import Gpu
from common.report.model.intervals import Intervals
from common.report.model.lanes import CpuLane
from common.report.facts.impossible import checked_roofline
# the themes' records
from common.report.facts.arch import ArchFacts, arch_facts
from common.report.facts.attention import AttentionFacts, attention_facts
from common.report.facts.bandwidth import BandwidthFacts, bandwidth_facts
from common.report.facts.copies import CopiesFacts, copies_facts
from common.report.facts.first_step import FirstStepFacts, first_step_facts
from common.report.facts.generated_code import GeneratedCodeFacts, generated_code_facts
from common.report.facts.gemm import GemmFacts, gemm_facts
from common.report.facts.lag import LagFacts, lag_facts
from common.report.facts.overhead import OverheadFacts, overhead_facts
from common.report.facts.phases import PhasesFacts, phases_facts
from common.report.facts.timeline import TimelineFacts, timeline_facts

@dataclass(frozen=True, eq=False)
class Tables(RunSteps):
    """Every number of one trace, computed once from its model (which it keeps, for the steps, names
    and metadata the renderers print): its :class:`~.steps.RunSteps` (the model, the step rows, the header),
    the general tables, which many rules and the renderers read, then one record per rules theme, which that
    theme's rules read (:mod:`common.report.rules`; a renderer may show one too). A number only one theme
    reads goes in that theme's record (docs/report.md, "Adding a rule")."""

    numbers: Numbers
    breakdown: Breakdown
    categories: tuple  # CategoryRow, largest first
    kernels: tuple  # KernelRow, by total time
    ops: tuple  # OpRow, by CPU total
    phases: tuple  # phases.Phase, one per user annotation name
    cpu_work: Optional[CpuWork]  # per step: compute ops' own work vs the dispatch around them
    gpu_busy: Intervals  # the union of every kernel, memcpy and memset
    gpu: Gpu  # the GPU the kernels ran on (deviceProperties)
    compile: Optional[CompileFrames]  # torch.compile's frames (:mod:`.compile`)
    graph_launches: Optional[GraphLaunches]  # CUDA graph launches and the kernels they replayed (:mod:`.compile`)
    kernel_sources: dict  # {Triton kernel: its launch call and op} (:mod:`.kernel_sources`)
    guess: Optional[GuessCheck]  # the lesson's guess against the typical annotated call (:mod:`.guess`)
    memory: Optional[Memory]  # from the [memory] events (:mod:`.memory`); None without them
    roofline: Optional[Roofline]  # GEMMs and attention against the device's peaks (:mod:`.roofline`)
    regime: Optional[Regime]  # who sets the pace (host or device) and what bounds the kernels (:mod:`.regime`)
    launched_outside: Optional[LaunchedOutside]  # device work the trace holds no launch of (:mod:`.outside`)
    # one record per rules theme (facts/<theme>.py), read by rules/<theme>.py alone
    overhead: OverheadFacts  # the top op's heaviest child (:mod:`.overhead`)
    timeline: TimelineFacts  # final sync, buffer requests, kernel gaps, first annotation (:mod:`.timeline`)
    first_step: FirstStepFacts  # what the first recorded step holds that the others do not (:mod:`.first_step`)
    gemm: GemmFacts  # occupancy queries, op children, runtime calls under mm/bmm, mm + add (:mod:`.gemm`)
    copies: CopiesFacts  # Memcpy DtoD before a GEMM, GEMMs under aten::addmm (:mod:`.copies`)
    per_phase: PhasesFacts  # each phase's call spans and op chains (:mod:`.phases`; ``phases`` holds the rows)
    attention: AttentionFacts  # what ran inside masked_fill and SDPA (:mod:`.attention`)
    bandwidth: BandwidthFacts  # memory-bound kernels' bytes per second against the card's (:mod:`.bandwidth`)
    lag: LagFacts  # how far the GPU runs behind the host, the window's start to its end (:mod:`.lag`)
    arch: ArchFacts  # the GPU generation the matrix kernels were designed for, and the card's (:mod:`.arch`)
    generated_code: GeneratedCodeFacts  # each generated kernel's share and code (:mod:`.generated_code`)

    @property
    def op_self_time(self) -> str:
        """What ranks the ops by their own time: their self device time on a GPU trace, else their self CPU time."""
        return "self device time" if self.has_gpu else "self CPU time"

    @property
    def ops_by_self_time(self) -> tuple:
        """(op row, its own time in µs, as :attr:`op_self_time` says) of the ops (kind ``op``), heaviest first."""
        key = "self_device_us" if self.has_gpu else "self_cpu_us"
        return tuple(sorted(((o, getattr(o, key)) for o in self.ops if o.kind == "op"), key=lambda pair: -pair[1]))


def build_tables(m: Model) -> Tables:
    """Every table of the model: the general tables, then one record per rules theme from what it needs."""
    gpu_busy = gpu_union(m)
    aligned = align_steps(m)
    per_step = step_breakdown(m, aligned)
    rows = step_rows(m, per_step, gpu_busy, aligned)
    ops = op_table(m)
    phases = tuple(phase_table(m, gpu_busy))
    roofline = checked_roofline(build_roofline(m))
    kernels, sources, frames, regime = kernel_table(m), kernel_sources(m), compile_frames(m, ops), regime_of(m, roofline)
    return Tables(
        model=m,
        numbers=numbers_of(m, gpu_busy, aligned),
        step_rows=rows,
        breakdown=Breakdown(**{k: float(v.sum()) for k, v in per_step.items()}, total=float(aligned.durations.sum())),
        categories=category_table(m),
        kernels=kernels,
        ops=ops,
        phases=phases,
        cpu_work=_cpu_work(m),
        gpu_busy=gpu_busy,
        gpu=gpu_of_trace(m),
        header=header_of(m),
        compile=frames,
        graph_launches=graph_launches(m),
        kernel_sources=sources,
        guess=_guess_check(m),
        memory=memory_of(m),
        roofline=roofline,
        regime=regime,
        launched_outside=launched_outside(m),
        # the themes' records
        overhead=overhead_facts(m, ops),
        timeline=timeline_facts(m, gpu_busy, aligned, rows[0].annotation if rows else None),
        first_step=first_step_facts(m),
        gemm=gemm_facts(m),
        copies=copies_facts(m),
        per_phase=phases_facts(m, [p.name for p in phases]),
        attention=attention_facts(m),
        bandwidth=bandwidth_facts(m), lag=lag_facts(m), arch=arch_facts(m),
        generated_code=generated_code_facts(m, kernels, ops, sources, regime.pace if regime is not None else None),
    )


def numbers_of(m: Model, gpu_busy: Intervals, aligned: AlignedSteps) -> Numbers:
    """The headline numbers, one section per JSON object (:mod:`.numbers`)."""
    figures = device_figures(m, aligned)
    return Numbers(gpu=gpu_numbers(m, gpu_busy), cpu=cpu_numbers(m), device=device_numbers(m),
                   window=window_numbers(m), tensorboard=tensorboard_numbers(aligned, figures),
                   efficiency=efficiency_numbers(m, figures))


def _cpu_work(m: Model) -> Optional[CpuWork]:
    """Per ProfilerStep, compute ops' own work against the dispatch around them (None: no ProfilerSteps)."""
    if m.window_source != "ProfilerStep":
        return None
    cpu = m.cpu
    return split_cpu_work(is_op=cpu.kind == OP, name=cpu.name, names=m.names, dur=cpu.dur,
                          self_us=cpu.self_us, parent=cpu.parent, step=cpu.step,
                          step_walls=[s.dur for s in m.steps], thread=cpu.thread,
                          step_threads=[s.tid for s in m.steps], ts=cpu.ts,
                          step_starts=[s.start for s in m.steps], frees=_frees(m))


def _frees(m: Model):
    """(times, bytes) of the CPU-side memory frees, or None for a trace without memory events."""
    mem = m.mem
    sel = (mem.bytes < 0) & (mem.device_type == 0)
    return (mem.ts[sel], mem.bytes[sel]) if mem.n else None


def _guess_check(m: Model) -> Optional[GuessCheck]:
    """The lesson's guess (its knobs) against what its annotation's typical call ran."""
    guess = Guess.from_json(m.knobs.guess) if m.knobs is not None else None
    return check_guess(guess, call_work(m, guess.annotation) if guess is not None else None)


# ----------------------------------------------------------------------------- the GPU and CPU totals


def gpu_numbers(m: Model, gpu_union: Intervals) -> GpuNumbers:
    """GPU busy/idle on HolisticTraceAnalysis's definition (over the GPU span), busy in the window, and
    HTA's communication/computation overlap."""
    dev = m.dev
    counts = dict(kernels=int((dev.kind == KERNEL).sum()), memcpys=int((dev.kind == MEMCPY).sum()),
                  memsets=int((dev.kind == MEMSET).sum()), launches_correlated=int((dev.launch >= 0).sum()),
                  streams=len(set(zip(dev.device.tolist(), dev.stream))))
    if not m.has_gpu:
        return GpuNumbers(**dict.fromkeys(GPU_TIME_FIELDS), **counts)
    communication = m.name_mask(lambda s: trace_names.kernel_category(s) == "communication")[dev.name] & \
        (dev.kind == KERNEL)
    compute = (dev.kind == KERNEL) & ~communication
    busy, span = hta_busy_span(m)  # HTA's events: launched in the trace, up to the last step's end
    compute_busy = hta_busy_span(m, among=compute)[0]
    exact, exact_whole = exact_busy(m), exact_span(m)
    impossible = not (0 <= busy <= span and 0 <= compute_busy <= span)
    if impossible:  # HTA's rounding counts a lone sub-µs event negative: the unrounded figures instead
        busy, span, compute_busy = exact, exact_whole, exact_busy(m, among=compute)
    w0, w1 = m.window
    in_window = gpu_union.covered(w0, w1)
    return GpuNumbers(
        busy_us=busy, span_us=span, idle_us=span - busy,
        idle_pct=100.0 * (span - busy) / span if span > 0 else 0.0,
        busy_pct=100.0 * busy / span if span > 0 else 0.0,
        compute_us=compute_busy,
        communication_us=Intervals(dev.ts[communication], dev.end[communication]).total,
        busy_in_window_us=in_window, busy_pct_of_window=100.0 * in_window / (w1 - w0) if w1 > w0 else 0.0,
        comm_comp_overlap_pct=hta_overlap_pct(m), busy_exact_us=exact, span_exact_us=exact_whole,
        hta_impossible=impossible, **counts)


def cpu_numbers(m: Model) -> CpuNumbers:
    """The profiler table's Self CPU time total (the window's CPU events), and counts."""
    cpu = m.cpu
    w0, w1 = m.window
    in_window = (cpu.ts >= w0) & (cpu.ts <= w1)
    return CpuNumbers(self_cpu_total_us=float(cpu.self_us[in_window].sum()), events=int(cpu.n),
                      ops=int((cpu.kind == OP).sum()), runtime_calls=int((cpu.kind == RUNTIME).sum()),
                      threads=len(cpu.threads))


def device_numbers(m: Model) -> DeviceNumbers:
    """The profiler table's Self CUDA time total; null (not 0) on a CPU-only trace."""
    if not m.has_gpu:
        return DeviceNumbers()
    dev = m.dev
    total = float(dev.dur.sum())
    self_cpu = float(m.cpu.self_us[(m.cpu.ts >= m.window[0]) & (m.cpu.ts <= m.window[1])].sum())
    return DeviceNumbers(self_device_total_us=total, self_device_in_steps_us=float(dev.dur[dev.step >= 0].sum()),
                         kernel_total_us=float(dev.dur[dev.kind == KERNEL].sum()),
                         device_to_cpu_ratio=total / self_cpu if self_cpu > 0 else None)


def window_numbers(m: Model) -> WindowNumbers:
    w0, w1 = m.window
    return WindowNumbers(start_us=w0, end_us=w1, wall_us=w1 - w0, source=m.window_source)


# ----------------------------------------------------------------------------- TensorBoard's figures


def tensorboard_numbers(steps: AlignedSteps, figures: list[DeviceFigures]) -> TensorBoardNumbers:
    """The steps TensorBoard reads (device-aligned when they launched GPU work) and its figures per device."""
    start, end = steps.span
    return TensorBoardNumbers(steps="device-aligned" if steps.moved else "host", start_us=start, end_us=end,
                              wall_us=end - start, steps_kept=steps.kept, steps_dropped=list(steps.dropped),
                              devices=[asdict(f) for f in figures])


def efficiency_numbers(m: Model, figures: list[DeviceFigures]) -> EfficiencyNumbers:
    """TensorBoard's GPU utilization, Est. SM efficiency and occupancy (the device with the most kernel
    time first in ``figures``), and the kernel-time-weighted figures over every kernel."""
    main = figures[0] if figures else None
    figures_of_main = dict(gpu_utilization_pct=main.gpu_utilization_pct if main else None,
                           est_sm_efficiency_pct=main.est_sm_efficiency_pct if main else None,
                           est_achieved_occupancy_pct=main.est_achieved_occupancy_pct if main else None)
    kernels = np.flatnonzero(m.dev.kind == KERNEL) if m.has_gpu else np.empty(0, np.int64)
    if not kernels.size:
        return EfficiencyNumbers(**figures_of_main)
    dur = m.dev.dur[kernels]
    blocks_per_sm = m.dev.blocks_per_sm[kernels]
    known = np.isfinite(blocks_per_sm)
    weighted = {}
    if known.any() and dur[known].sum() > 0:
        weight = dur[known].sum()
        weighted["kernel_weighted_sm_efficiency_pct"] = 100.0 * float(
            (np.minimum(blocks_per_sm[known], 1.0) * dur[known]).sum() / weight)
        weighted["mean_blocks_per_sm"] = float((blocks_per_sm[known] * dur[known]).sum() / weight)
    total = float(dur.sum())
    if total > 0:
        tensor_cores = m.name_mask(trace_names.uses_tensor_cores)[m.dev.name[kernels]]
        weighted["tensor_core_pct"] = 100.0 * float(dur[tensor_cores].sum()) / total
    return EfficiencyNumbers(**figures_of_main, **weighted, kernels_with_launch_args=int(known.sum()))


# ----------------------------------------------------------------------------- ops


def op_table(m: Model) -> tuple[OpRow, ...]:
    """Per op (or annotation) name, TensorBoard's Operator view and the profiler table: calls, CPU total,
    self CPU, device self (kernels it launched itself) and total (with its children's), by CPU total.

    As both tools do, an op whose only child is a call of the same op (``aten::div`` inside
    ``aten::div``) is one call: the inner one is not counted again."""
    cpu, dev = m.cpu, m.dev
    rows_of = np.flatnonzero((cpu.kind == OP) | (cpu.kind == ANNOTATION))
    if not rows_of.size:
        return ()
    counted = rows_of[~_repeated_calls(cpu)[rows_of]]
    names = len(m.names)
    name = cpu.name
    calls = np.bincount(name[counted], minlength=names)
    total = np.bincount(name[counted], weights=cpu.dur[counted], minlength=names)
    self_cpu = np.bincount(name[rows_of], weights=cpu.self_us[rows_of], minlength=names)
    self_device, launched = np.zeros(names), {k: np.zeros(names, dtype=np.int64) for k in (KERNEL, MEMCPY, MEMSET)}
    if m.has_gpu:
        by_op = dev.op >= 0
        self_device = np.bincount(name[dev.op[by_op]], weights=dev.dur[by_op], minlength=names)
        launched = {k: np.bincount(name[dev.op[by_op & (dev.kind == k)]], minlength=names) for k in launched}
    launched_time, launched_count = _launched_below(m)
    device_total = np.bincount(name[counted], weights=launched_time[counted], minlength=names)
    with_work = np.bincount(name[counted], weights=(launched_count[counted] > 0).astype(np.float64), minlength=names)
    kind = np.zeros(names, dtype=np.int8)
    kind[name[rows_of]] = cpu.kind[rows_of]
    rows = [OpRow(name=m.names[i], kind="annotation" if kind[i] == ANNOTATION else "op", calls=int(calls[i]),
                  cpu_total_us=float(total[i]), self_cpu_us=float(self_cpu[i]), self_device_us=float(self_device[i]),
                  device_total_us=float(device_total[i]), kernels=int(launched[KERNEL][i]),
                  calls_with_device_work=int(with_work[i]), memcpys=int(launched[MEMCPY][i]),
                  memsets=int(launched[MEMSET][i]))
            for i in np.flatnonzero(calls).tolist()]
    rows.sort(key=lambda r: -r.cpu_total_us)
    return tuple(rows)


def _repeated_calls(cpu: CpuLane) -> np.ndarray:
    """Per CPU event: an op that is the only child (runtime calls aside) of an op of the same name."""
    parent, kind, name = cpu.parent, cpu.kind, cpu.name
    child = (parent >= 0) & (kind != RUNTIME)
    children = np.bincount(parent[child], minlength=cpu.n)
    up = np.maximum(parent, 0)
    return (kind == OP) & (parent >= 0) & (kind[up] == OP) & (name[up] == name) & (children[up] == 1)


def _launched_below(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Per CPU event: the device time and the device events launched by it or anything under it."""
    cpu, dev = m.cpu, m.dev
    time, count = np.zeros(cpu.n), np.zeros(cpu.n)
    if not m.has_gpu or not cpu.n:
        return time, count
    linked = dev.launch >= 0
    time += np.bincount(dev.launch[linked], weights=dev.dur[linked], minlength=cpu.n)
    count += np.bincount(dev.launch[linked], minlength=cpu.n)
    for rows in by_depth(np.flatnonzero(cpu.parent >= 0), cpu.depth)[::-1]:  # children before parents
        up, at = np.unique(cpu.parent[rows], return_inverse=True)
        time[up] += np.bincount(at, weights=time[rows], minlength=up.size)
        count[up] += np.bincount(at, weights=count[rows], minlength=up.size)
    return time, count
