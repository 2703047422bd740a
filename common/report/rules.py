"""Rules: the trace-reading cheatsheet as code.

Each rule is a small function over the :class:`~common.report.tables.Tables`; its docstring is the
cheatsheet row it implements. It returns a :class:`Finding` (the evidence) or None. Rules only
read numbers the tables computed; the few per-rule aggregations below run over short selections
(one op name, one kernel name), never over every event again.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field

import numpy as np

from common.knobs import RunKnobs
from common.report import names as trace_names
from common.report.gpus import Gpu, gpu_of
from common.paths import LARGE_TRACE_BYTES
from common.report.columns import factorize
from common.report.model import CATEGORY_CODES, KERNEL, MEMCPY, OP, RUNTIME, STEP_RE, SYNC_NAMES
from common.report.tables import Tables
from common.report.steadiness import Spread, first_vs_rest
from common.report.units import fmt_us, rounded


@dataclass
class Finding:
    rule: str
    message: str  # one line: what was seen, with the numbers
    hint: str = ""  # what to try
    evidence: dict = field(default_factory=dict)
    level: str = "info"  # info | warn | note

    def to_json(self) -> dict:
        return dict(rule=self.rule, level=self.level, message=self.message, hint=self.hint, evidence=self.evidence)


RULES: list = []


def rule(fn):
    RULES.append(fn)
    return fn


STRICT_ENV = "REPORT_STRICT_RULES"  # set (to anything but "" or "0"): a rule that crashes raises (the tests set it)


def run_rules(t: Tables) -> list[Finding]:
    """Every rule over the tables. A rule that trips on an odd trace reports itself as a
    ``rule_error`` finding and the others run; with REPORT_STRICT_RULES=1 it raises instead."""
    strict = os.environ.get(STRICT_ENV, "") not in ("", "0")
    out = []
    for fn in RULES:
        try:
            f = fn(t)
        except Exception as exc:  # noqa: BLE001 - one odd trace must not cost the whole report
            if strict:
                raise
            f = Finding("rule_error", f"the {fn.__name__} rule could not read this trace ({type(exc).__name__}: {exc})",
                        level="note", evidence=dict(rule=fn.__name__))
        if f is not None:
            out.append(f)
    return out


# ----------------------------------------------------------------------------- trace-level notes


@rule
def no_device_lane(t: Tables):
    """A trace with no kernel, memcpy or memset events: CPU only. Every CPU-side rule still runs."""
    if t.has_gpu:
        return None
    return Finding("no_device_lane", "no device lane: the trace holds no kernel/memcpy/memset events (a CPU-only "
                   "run, or CUDA activity was not recorded); device-side rules are skipped, CPU-side ones still run",
                   "profile with activities=[CPU, CUDA] on a GPU to see the device lane",
                   dict(cpu_events=t.model.cpu.n), level="note")


@rule
def no_steps(t: Tables):
    """No ProfilerStep#N in the trace: analysed as one window spanning all events."""
    if t.model.window_source == "ProfilerStep":
        return None
    return Finding("no_steps", f"no ProfilerStep in the trace: analysed as one window of {fmt_us(t.window_us)} "
                   "spanning all events", "call prof.step() at the end of every iteration (with a schedule) to get steps",
                   dict(window_us=rounded(t.window_us)), level="note")


@rule
def large_trace(t: Tables):
    """A trace over ~500 MB: Perfetto and TensorBoard render it slowly; profile fewer active steps."""
    if t.model.size_bytes <= LARGE_TRACE_BYTES:
        return None
    return Finding("large_trace", f"the trace is {t.model.size_bytes / 1e6:,.0f} MB of JSON "
                   f"({t.model.n_events:,} events): Perfetto and TensorBoard open files this big slowly",
                   "profile fewer active steps (schedule active=1..3) or record fewer details (record_shapes, with_stack)",
                   dict(bytes=t.model.size_bytes, events=t.model.n_events), level="note")


# ----------------------------------------------------------------------------- profiler table


def _ops(t: Tables) -> list:
    """The op rows (by CPU total), without ProfilerStep#N (an op, not an annotation, in old traces)."""
    return [o for o in t.ops if o.kind == "op" and not STEP_RE.match(o.name)]


CPU_OVERHEAD_BELOW_PCT = 75.0  # compute ops' share of the step below this: overhead-bound on the CPU
CPU_COMPUTE_FROM_PCT = 90.0  # ...at or above this: compute-bound
MIN_PLAUSIBLE_GFLOPS = 0.5  # any CPU of this century multiplies matrices faster: slower means a busy machine


def _matmul_gflops(t: Tables) -> float | None:
    """The rate of the workload's matmul arithmetic over the compute ops' median time per step, when the
    lesson that wrote the trace said how much arithmetic a step holds."""
    knobs, work = t.knobs, _steady_work(t)
    if knobs is None or not knobs.matmul_flops_per_step or work is None or work.median_compute_us <= 0:
        return None
    return knobs.matmul_flops_per_step / work.median_compute_us / 1e3


def _implausibly_slow(t: Tables) -> bool:
    rate = _matmul_gflops(t)
    return rate is not None and rate < MIN_PLAUSIBLE_GFLOPS


def _rate_text(t: Tables) -> str:
    rate = _matmul_gflops(t)
    return f"; the matmul arithmetic ran at {rate:,.1f} GFLOP/s" if rate is not None else ""


def _cpu_regime(t: Tables) -> str | None:
    """"overhead" | "compute" | None (between, noisy or no steps) for a CPU-only trace."""
    work = _steady_work(t)
    if work is None or not work.compute_ops or _implausibly_slow(t):
        return None
    shares = [s.compute_pct for s in work.steps]
    if min(shares) < CPU_OVERHEAD_BELOW_PCT <= CPU_COMPUTE_FROM_PCT <= max(shares):
        return None  # the steps disagree: too noisy to call
    median = work.median_compute_pct
    if median < CPU_OVERHEAD_BELOW_PCT:
        return "overhead"
    return "compute" if median >= CPU_COMPUTE_FROM_PCT else None


def _steady_work(t: Tables):
    """The CPU work split of a CPU-only trace over its steady steps (without a cold first step)."""
    work = t.cpu_work
    if t.has_gpu or work is None or not _is_real_steps(t):
        return None
    return dataclasses.replace(work, steps=work.steps[1:]) if _cold_step(t) is not None else work


def _cpu_work_evidence(t: Tables) -> dict:
    w = _steady_work(t)
    return dict(median_step_us=rounded(w.median_wall_us), median_compute_us=rounded(w.median_compute_us),
                compute_pct=rounded(w.median_compute_pct), compute_per_call_us=rounded(w.per_call_us),
                compute_calls_per_step=rounded(w.median_calls),
                compute_ops={o.name: dict(calls=o.calls, per_call_us=rounded(o.per_call_us)) for o in w.compute_ops[:8]},
                dispatch_per_step_us={o.name: rounded(o.self_us / len(t.cpu_work.steps)) for o in w.dispatch[:8]},
                matmul_gflops=rounded(_matmul_gflops(t), 2),
                per_step_compute_pct=[rounded(s.compute_pct) for s in w.steps])


def _ops_per_call(ops, n: int = 3) -> str:
    """``aten::mm 30 µs/call, aten::add 4.0 µs/call``."""
    return ", ".join(f"{o.name} {fmt_us(o.per_call_us)}/call" for o in ops[:n]) + (
        f" and {len(ops) - n} more" if len(ops) > n else "")


def _dispatch_text(t: Tables, n: int = 3) -> str:
    """The biggest holders of the dispatch time, per step: ``ProfilerStep (...) 12 µs, matmul_add 10 µs``."""
    w = t.cpu_work  # totals over every step
    return ", ".join(f"{o.name} {fmt_us(o.self_us / len(w.steps))}" for o in w.dispatch[:n])


def _cpu_overhead_bound(t: Tables):
    if _cpu_regime(t) != "overhead":
        return None
    w = _steady_work(t)
    pct = w.median_compute_pct
    return Finding("overhead_bound", f"overhead-bound (the CPU analogue of Part 1's size 64): of a step's "
                   f"{fmt_us(w.median_wall_us)} (median), the compute ops' own work is {fmt_us(w.median_compute_us)} "
                   f"({pct:.0f}%: {_ops_per_call(w.compute_ops)}{_rate_text(t)}); the other {100 - pct:.0f}% is "
                   f"dispatch around them (per step: {_dispatch_text(t)})",
                   "each call does too little work to pay for its dispatch: give it more work (bigger or batched "
                   "tensors) or make fewer calls (torch.compile fuses ops); on a GPU this is the run where the GPU idles",
                   _cpu_work_evidence(t), level="warn")


def _cpu_compute_bound(t: Tables):
    if _cpu_regime(t) != "compute":
        return None
    w = _steady_work(t)
    pct = w.median_compute_pct
    return Finding("compute_bound", f"compute-bound (the CPU analogue of Part 1's size 4096): {pct:.0f}% of a step's "
                   f"{fmt_us(w.median_wall_us)} (median) is the compute ops' own work ({_ops_per_call(w.compute_ops)}"
                   f"{_rate_text(t)}); the dispatch around them is {100 - pct:.0f}%",
                   "the arithmetic itself is the cost: less of it, or a faster kernel for this shape and dtype, helps; "
                   "cutting dispatch overhead would not",
                   _cpu_work_evidence(t))


@rule
def overhead_bound(t: Tables):
    """Self CPU time total ≫ Self CUDA time total (CPU in ms, GPU in µs): overhead-bound. The CPU
    spends more time dispatching than the GPU spends computing. On a CPU-only trace: the compute
    ops' own work is a small share of each step, the dispatch around them the rest."""
    if not t.has_gpu:
        return _cpu_overhead_bound(t)
    cpu = t.numbers.cpu.self_cpu_total_us
    dev = t.numbers.device.self_device_total_us
    busy = t.numbers.gpu.busy_pct_of_window
    if cpu <= 0 or dev >= 0.5 * cpu or busy >= 50:
        return None
    return Finding("overhead_bound", f"overhead-bound: Self CPU {fmt_us(cpu)} vs self device {fmt_us(dev)} "
                   f"(device = {100 * dev / cpu:.1f}% of CPU); the GPU is busy {busy:.1f}% of the profiled window",
                   "make the work bigger (larger or batched tensors), fuse ops (torch.compile), or cut launches "
                   "(CUDA graphs: torch.compile mode='reduce-overhead')",
                   dict(self_cpu_us=rounded(cpu), self_device_us=rounded(dev), gpu_busy_pct_of_window=rounded(busy, 2)), level="warn")


@rule
def compute_bound(t: Tables):
    """Self CPU time total ≈ Self CUDA time total, both in ms (GPU busy most of the window):
    compute-bound. The GPU is the bottleneck, which is usually what you want. On a CPU-only trace:
    nearly all of each step is the compute ops' own work."""
    if not t.has_gpu:
        return _cpu_compute_bound(t)
    cpu = t.numbers.cpu.self_cpu_total_us
    dev = t.numbers.device.self_device_total_us
    busy = t.numbers.gpu.busy_pct_of_window
    if busy < 70 and not (cpu > 0 and dev >= cpu and busy >= 50):
        return None
    top = t.kernels[0] if t.kernels else None
    extra = f"; {trace_names.short_name(top.name, 60)} takes {top.share_pct:.0f}% of kernel time" if top else ""
    return Finding("compute_bound", f"compute-bound: the GPU is busy {busy:.1f}% of the profiled window "
                   f"(self device {fmt_us(dev)} vs Self CPU {fmt_us(cpu)}){extra}",
                   "optimise the kernels themselves: lower precision (bf16/fp16, TF32), better shapes, fusion",
                   dict(self_cpu_us=rounded(cpu), self_device_us=rounded(dev), gpu_busy_pct_of_window=rounded(busy, 2)))


@rule
def hotspot_kernel(t: Tables):
    """One event dominates CUDA total: that's your hotspot. Start the optimization there."""
    if not t.kernels:
        return None
    k = t.kernels[0]
    if k.share_pct < 25:
        return None
    return Finding("hotspot_kernel", f"hotspot kernel: {trace_names.short_name(k.name, 70)} takes {k.share_pct:.1f}% "
                   f"of kernel time ({fmt_us(k.total_us)} in {k.calls:,} calls, median {fmt_us(k.median_us)})",
                   "start optimising there; find the op that launches it in the trace (the flow arrow)",
                   dict(kernel=k.name, share_pct=rounded(k.share_pct), total_us=rounded(k.total_us), calls=k.calls))


@rule
def hotspot_op(t: Tables):
    """One op dominates the device (or, on a CPU trace, the CPU) time: the op-level hotspot."""
    ops = _ops(t)
    if not ops:
        return None
    if t.has_gpu:
        total = sum(o.self_device_us for o in ops)
        top = max(ops, key=lambda o: o.self_device_us)
        if total <= 0 or top.self_device_us < 0.25 * total:
            return None
        share = 100 * top.self_device_us / total
        return Finding("hotspot_op", f"hotspot op: {top.name} launches {share:.1f}% of device time "
                       f"({fmt_us(top.self_device_us)} in {top.calls:,} calls, {top.kernels:,} kernels)",
                       "look at its shapes (record_shapes=True) and the kernels it picks",
                       dict(op=top.name, share_pct=rounded(share), self_device_us=rounded(top.self_device_us),
                            calls=top.calls))
    total = sum(o.self_cpu_us for o in ops)
    top = max(ops, key=lambda o: o.self_cpu_us)
    if total <= 0 or top.self_cpu_us < 0.25 * total or top.self_cpu_us < 0.05 * t.window_us:
        return None  # (a few µs of ops in a long window, e.g. a trace of annotations, is no hotspot)
    share = 100 * top.self_cpu_us / total
    per_call = top.self_cpu_us / max(top.calls, 1)
    hint = {"overhead": "each call is short: bigger batches or fewer calls amortise the dispatch",
            "compute": "its own work is the cost: less arithmetic or a faster kernel for this shape and dtype"}.get(
        _cpu_regime(t), "look at its shapes (record_shapes=True) and how often it is called")
    return Finding("hotspot_op", f"hotspot op: {top.name} takes {share:.1f}% of the ops' self CPU time "
                   f"({fmt_us(top.self_cpu_us)} in {top.calls:,} calls, {fmt_us(per_call)} per call)",
                   hint,
                   dict(op=top.name, share_pct=rounded(share), self_cpu_us=rounded(top.self_cpu_us), calls=top.calls))


@rule
def many_calls(t: Tables):
    """One event has a huge # of Calls: a potential bottleneck even if each call is cheap. Check
    whether it can be fused or batched."""
    ops = _ops(t)
    if not ops:
        return None
    top = max(ops, key=lambda o: o.calls)
    nsteps = max(len(t.model.steps), 1)
    per_step = top.calls / nsteps
    if per_step < 100:
        return None
    return Finding("many_calls", f"{top.name} is called {top.calls:,} times ({per_step:,.0f} per step), "
                   f"{fmt_us(top.cpu_total_us)} CPU in total, {fmt_us(top.cpu_total_us / top.calls)} per call",
                   "a cheap op called this often adds up: fuse or batch it (foreach/fused optimizers, torch.compile)",
                   dict(op=top.name, calls=top.calls, calls_per_step=rounded(per_step),
                        cpu_total_us=rounded(top.cpu_total_us)))


@rule
def children_heavy(t: Tables):
    """CPU total ≫ Self CPU for a row: most of the cost lives in children. Drill into the nested
    events, not the parent."""
    ops = [o for o in _ops(t) if o.cpu_total_us > 0]
    if not ops:
        return None
    top = ops[0]  # the ops are sorted by CPU total
    if top.self_cpu_us >= 0.2 * top.cpu_total_us or top.cpu_total_us < 0.05 * max(t.window_us, 1e-9):
        return None
    cpu = t.model.cpu
    nid = t.model.names.index(top.name)
    par = np.flatnonzero(cpu.name == nid)
    kids = np.flatnonzero(np.isin(cpu.parent, par))
    child = ""
    ev = {}
    if kids.size:
        tot = np.bincount(cpu.name[kids], weights=cpu.dur[kids])
        c = int(np.argmax(tot))
        child = f"; the heaviest child is {t.model.names[c]} ({fmt_us(tot[c])})"
        ev = dict(heaviest_child=t.model.names[c], heaviest_child_us=rounded(tot[c]))
    return Finding("children_heavy", f"{top.name}: CPU total {fmt_us(top.cpu_total_us)} but self only "
                   f"{fmt_us(top.self_cpu_us)}: the cost lives in its children{child}",
                   "drill into the nested events, not the parent",
                   dict(op=top.name, cpu_total_us=rounded(top.cpu_total_us), self_cpu_us=rounded(top.self_cpu_us), **ev))


# ----------------------------------------------------------------------------- CPU lane


def _is_real_steps(t: Tables) -> bool:
    return t.model.window_source == "ProfilerStep" and len(t.model.steps) >= 2


def _warmed_up(t: Tables) -> bool:
    """The lesson that wrote the trace ran its workload un-profiled before profiling (--warmup)."""
    knobs = t.knobs
    return knobs is not None and knobs.warmup


def _warmup_hint(knobs: RunKnobs | None) -> str:
    """How to warm up, fitted to what the run did (a lesson's trace says; another trace does not)."""
    if knobs is None:
        return "warm up before profiling (a few un-profiled calls + synchronize) and/or use the schedule's warmup"
    keep = "" if knobs.schedule.warmup else " and give the schedule a warmup step (the default 1,1,3)"
    return f"run it again with --warmup ({knobs.script}.py: un-profiled calls + synchronize before profiling){keep}"


def _cold_step(t: Tables):
    """The first step against the others, when it is wider beyond the others' noise in a run that did
    not warm up (None otherwise)."""
    if not _is_real_steps(t) or _warmed_up(t):
        return None
    cmp = first_vs_rest([s.dur for s in t.model.steps])
    return cmp if cmp is not None and cmp.beyond_noise else None


@rule
def cold_first_step(t: Tables):
    """First ProfilerStep much wider than the rest: cold-start overhead (workspace allocation,
    cuBLAS heuristics, lazy module loading). Add warmup iterations and/or the schedule's warmup.
    Never advised to a run that already warmed up, nor when the step is wider only within the
    steps' own noise (noisy_steps says so instead)."""
    cmp = _cold_step(t)
    if cmp is None:
        return None
    rest = cmp.rest
    others = f"{t.step_label(1)}..{t.step_label(len(t.model.steps) - 1)}" if len(t.model.steps) > 2 else t.step_label(1)
    return Finding("cold_first_step", f"cold first step: {t.step_label(0)} took {fmt_us(cmp.first)}, {cmp.ratio:.1f}x the "
                   f"median {fmt_us(rest.median)} of {others} (they range {fmt_us(rest.low)} to {fmt_us(rest.high)})",
                   _warmup_hint(t.knobs),
                   dict(first_step=t.model.steps[0].name, first_us=rounded(cmp.first), median_others_us=rounded(rest.median),
                        others_range_us=[rounded(rest.low), rounded(rest.high)], ratio=rounded(cmp.ratio, 2),
                        warmed_up=_warmed_up(t) if t.knobs else None), level="warn")


@rule
def noisy_steps(t: Tables):
    """Step times that differ more than 2x from step to step: too noisy to judge a cold start or a
    slower step on this machine (a busy CPU, another process). Profile more active steps, on an idle
    machine, and read the median, not the mean."""
    if not _is_real_steps(t):
        return None
    durs = [s.dur for s in t.model.steps]
    cold = _cold_step(t) is not None
    judged = Spread(tuple(durs[1:] if cold else durs))
    cmp = first_vs_rest(durs)
    first_in_noise = cmp is not None and cmp.wider and not cmp.beyond_noise and not _warmed_up(t)
    busy = _implausibly_slow(t)
    if not judged.noisy and not first_in_noise and not busy:
        return None
    which = "the steps after the cold first one" if cold else "the steps"
    parts = [f"{which} take {fmt_us(judged.low)} to {fmt_us(judged.high)} ({judged.high / max(judged.low, 1e-9):.1f}x apart, "
             f"median {fmt_us(judged.median)}): too noisy to judge step-to-step differences"]
    if busy:
        parts = [f"the matmul arithmetic ran at {_matmul_gflops(t) * 1e3:,.0f} MFLOP/s, far slower than any CPU "
                 "multiplies matrices: the machine was busy (other programs, more threads than cores), so these "
                 "timings cannot tell overhead-bound from compute-bound"] + (parts if judged.noisy else [])
    if first_in_noise:
        parts.append(f"{t.step_label(0)} is {cmp.ratio:.1f}x the others' median, but they vary as much: "
                     "no telling a cold start from noise")
    elif _warmed_up(t):
        parts.append("the run was warmed up (--warmup), so a wide step is noise (the machine, the profiler), "
                     "not a cold start")
    hint_steps = " (--schedule 1,1,10)" if t.knobs else ""
    return Finding("noisy_steps", "; ".join(parts),
                   f"profile more active steps{hint_steps} on an idle machine"
                   + (" (or with OMP_NUM_THREADS=1 beside other work)" if busy else "") + " and compare medians, not means",
                   dict(steps_us=[rounded(d) for d in durs], judged_from=1 if cold else 0, median_us=rounded(judged.median),
                        max_over_min=rounded(judged.high / max(judged.low, 1e-9), 2)), level="note")


@rule
def annotation_gap(t: Tables):
    """Big gap between record_function("...") start and the first aten::* inside it: the same
    cold-start tax, zoomed in. The annotation entered, but the dispatch hadn't happened yet.
    Not reported for a run that warmed up, nor when the first gap is inside the others' noise."""
    rows = [(i, r) for i, r in enumerate(t.step_rows) if r.annotation_gap_us is not None]
    if len(rows) < 2 or rows[0][0] != 0 or _warmed_up(t):
        return None
    cmp = first_vs_rest([r.annotation_gap_us for _, r in rows])
    if cmp is None or not cmp.beyond_noise or cmp.ratio < 2:
        return None
    r0 = rows[0][1]
    per = ", ".join(f"{t.step_label(i)} {fmt_us(r.annotation_gap_us)}" for i, r in rows[:6])
    return Finding("annotation_gap", f"record_function gap: '{r0.annotation}' starts {fmt_us(cmp.first)} before its "
                   f"first op ({r0.first_op}) in {t.step_label(0)}, vs {fmt_us(cmp.rest.median)} in the other steps "
                   f"({per})",
                   "the cold-start tax again: " + _warmup_hint(t.knobs),
                   dict(annotation=r0.annotation, first_op=r0.first_op,
                        gaps_us={t.model.steps[i].name: rounded(r.annotation_gap_us, 3) for i, r in rows}), level="warn")


def trace_gpu(t: Tables) -> Gpu:
    """The GPU the trace's kernels ran on (its deviceProperties entry)."""
    first = int(t.model.dev.device[0]) if t.model.dev.n else None
    return gpu_of(list(t.model.devices.values()), first)


def _queried_kernels(t: Tables) -> tuple[np.ndarray, np.ndarray]:
    """(kernels with a correlated launch, whether an occupancy query came on that thread since its
    previous launch), both indexed like ``t.model.dev``."""
    dev, cpu = t.model.dev, t.model.cpu
    kj = np.flatnonzero((dev.launch >= 0) & (dev.kind == KERNEL))
    rt = np.flatnonzero(cpu.kind == RUNTIME)  # sorted by thread, then time
    if not rt.size or not kj.size:
        return kj, np.zeros(kj.size, dtype=bool)
    is_occ = t.model.name_mask(trace_names.is_occupancy_query)[cpu.name[rt]]
    launch_mask = np.zeros(cpu.n, dtype=bool)
    launch_mask[dev.launch[kj]] = True
    cq = np.cumsum(is_occ)
    pos = np.flatnonzero(launch_mask[rt])
    thread = cpu.thread[rt]
    prev = np.concatenate(([-1], pos[:-1]))  # previous launch position (any thread)
    same_thread = (prev >= 0) & (thread[np.maximum(prev, 0)] == thread[pos])
    before = np.where(same_thread, cq[np.maximum(prev, 0)], 0)
    # queries since the previous launch on this thread (or since the thread's first runtime call)
    first_of_thread = np.searchsorted(thread, thread[pos], side="left")
    base = np.where(same_thread, before, np.where(first_of_thread > 0, cq[np.maximum(first_of_thread - 1, 0)], 0))
    q_of_rt = np.zeros(rt.size, dtype=bool)
    q_of_rt[pos] = (cq[pos] - base) > 0
    return kj, q_of_rt[np.searchsorted(rt, dev.launch[kj])]


def _names_of(t: Tables, ids) -> list:
    return sorted({t.model.names[i] for i in np.asarray(ids).tolist()})


@rule
def occupancy_query(t: Tables):
    """An occupancy query (cudaOccupancyMaxActiveBlocksPerMultiprocessor[WithFlags], ...MaxActiveClusters,
    cuOccupancy..., hipOccupancy...) before a launch: a heavyweight, adaptively-launched kernel (GEMM,
    conv); cuBLAS asks how many blocks fit on an SM to pick a variant. A launch with no preceding
    query: an elementwise or reduction kernel with a fixed, light footprint. Below sm_90 (the posts'
    A100) every cuBLAS GEMM launch follows a query; on sm_90+ (cuLaunchKernelEx) it is optional."""
    if not t.has_gpu:
        return None
    dev, cpu = t.model.dev, t.model.cpu
    gpu = trace_gpu(t)
    kj, kq = _queried_kernels(t)
    gemm = dev.category[kj] == CATEGORY_CODES["gemm"]
    gemm_launches = _names_of(t, cpu.name[dev.launch[kj[gemm]]])
    ev = dict(gpu=gpu.describe(), compute_capability=gpu.sm, queries_expected=gpu.expects_gemm_occupancy_query,
              case=gpu.occupancy_case(), gemm_launches=int(gemm.sum()), gemm_launches_queried=int((gemm & kq).sum()),
              launch_calls=gemm_launches)
    if not kq.any():
        return _no_occupancy_query(gpu, ev)
    kop = np.where(dev.op[kj] >= 0, cpu.name[np.maximum(dev.op[kj], 0)], -1)
    kname = dev.name[kj]

    def top(mask, k=3):
        ops, cnt = np.unique(kop[mask], return_counts=True)
        out = {}
        for i in np.argsort(-cnt)[:k].tolist():
            sel = mask & (kop == ops[i])
            kn, kc = np.unique(kname[sel], return_counts=True)
            names_ = [trace_names.short_name(t.model.names[kn[j]], 60) for j in np.argsort(-kc)[:2].tolist()]
            out[t.model.names[ops[i]] if ops[i] >= 0 else "(no op)"] = dict(launches=int(cnt[i]), kernels=names_)
        return out

    queries = _names_of(t, cpu.name[(cpu.kind == RUNTIME) & t.model.name_mask(trace_names.is_occupancy_query)[cpu.name]])
    nq, npl = int(kq.sum()), int((~kq).sum())
    tq, tp = top(kq), top(~kq)
    qtxt = ", ".join(f"{op} ({v['launches']}x → {v['kernels'][0]})" for op, v in tq.items())
    ptxt = ", ".join(f"{op} ({v['launches']}x)" for op, v in tp.items())
    gtxt = f"; GEMM launches queried: {ev['gemm_launches_queried']} of {ev['gemm_launches']}" if ev["gemm_launches"] else ""
    short = gpu.expects_gemm_occupancy_query and ev["gemm_launches_queried"] < ev["gemm_launches"]
    return Finding("occupancy_query", f"occupancy-queried launches: {nq:,} of {nq + npl:,} kernel launches follow "
                   f"an occupancy query ({', '.join(queries)}): {qtxt}" + (f"; plain launches: {ptxt}" if ptxt else "")
                   + f"{gtxt} ({gpu.occupancy_case()})",
                   "queried launches are adaptively-tuned library kernels (GEMM/conv); plain ones are light "
                   "elementwise/reduction kernels",
                   dict(ev, queried=nq, plain=npl, queried_ops=tq, plain_ops=tp, queries=queries),
                   level="note" if short else "info")


def _no_occupancy_query(gpu: Gpu, ev: dict):
    """No launch follows an occupancy query: say whether that is expected on this GPU."""
    expected = gpu.expects_gemm_occupancy_query
    if not ev["gemm_launches"] or expected is None or gpu.vendor != "nvidia":
        return None
    launched = f" (launched with {', '.join(ev['launch_calls'])})" if ev["launch_calls"] else ""
    if expected:
        return Finding("occupancy_query", f"no occupancy query before any of the {ev['gemm_launches']:,} GEMM "
                       f"launches{launched} on {gpu.describe()}: the posts' A100 shows "
                       "cudaOccupancyMaxActiveBlocksPerMultiprocessor before every cuBLAS GEMM",
                       "a library that caches its launch configuration, or a profiler that does not record the query",
                       dict(ev, queried=0), level="note")
    return Finding("occupancy_query", f"no occupancy query before the {ev['gemm_launches']:,} GEMM launches"
                   f"{launched}: expected on {gpu.describe()}, sm_90 or newer, where cuBLAS need not query before "
                   "a launch (the posts' A100 queries before every GEMM)",
                   "on Hopper and newer tell GEMMs from light kernels by name (nvjet_/cutlass3x_) or by the op "
                   "that launched them, not by a preceding query",
                   dict(ev, queried=0))


@rule
def long_final_sync(t: Tables):
    """A long cudaDeviceSynchronize at the end of the active window: the profiler flushing; its
    duration is mostly the GPU finishing pending work, not a real CPU cost. A sync covering tiny
    GPU work is a classic overhead-bound symptom."""
    cpu = t.model.cpu
    sync_ids = t.model.name_mask(lambda s: s in SYNC_NAMES)
    idx = np.flatnonzero(sync_ids[cpu.name] & (cpu.kind == RUNTIME))
    if not idx.size:
        return None
    i = int(idx[np.argmax(cpu.ts[idx])])
    a, d = float(cpu.ts[i]), float(cpu.dur[i])
    if d < 50:
        return None
    gpu = t.gpu_busy
    busy = float(gpu.covered(a, a + d)) if len(gpu) else 0.0
    if busy > 0.5 * d:
        return None
    total = t.numbers.gpu.busy_in_window_us or 0.0
    return Finding("long_final_sync", f"long final {t.model.names[cpu.name[i]]}: {fmt_us(d)} while the GPU is busy "
                   f"{fmt_us(busy)} of it ({100 * (1 - busy / d):.0f}% idle); GPU work in the whole window is {fmt_us(total)}",
                   "the profiler flushing at the end of the window, not a real cost; a sync this long over so little "
                   "GPU work says the run is overhead-bound",
                   dict(sync_us=rounded(d), gpu_busy_during_us=rounded(busy), gpu_busy_in_window_us=rounded(total),
                        start_us=rounded(a)))


def _dtod_before_gemm(t: Tables) -> list:
    """(memcpy, kernel) index pairs in ``t.model.dev``: a Memcpy DtoD followed on its stream by a GEMM kernel."""
    dev = t.model.dev
    dtod = t.model.name_mask(lambda s: "DtoD" in s or "Device -> Device" in s)
    cand = np.flatnonzero((dev.kind == MEMCPY) & dtod[dev.name])
    if not cand.size:
        return []
    cat, gemm_code = dev.category, CATEGORY_CODES["gemm"]
    # next device event on the same device and stream
    sid, _ = factorize(list(zip(dev.device.tolist(), dev.stream)))
    order = np.lexsort((dev.ts, sid))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    pairs = []
    for c in cand.tolist():
        r = rank[c] + 1
        if r >= order.size:
            continue
        nxt = int(order[r])
        if sid[nxt] == sid[c] and dev.kind[nxt] == KERNEL and cat[nxt] == gemm_code:
            pairs.append((c, nxt))
    return pairs


def _addmm_gemms(t: Tables) -> np.ndarray:
    """GEMM kernels launched from inside an aten::addmm (indices into ``t.model.dev``)."""
    dev, cpu = t.model.dev, t.model.cpu
    if "aten::addmm" not in t.model.names:
        return np.empty(0, np.int64)
    addmm = t.model.names.index("aten::addmm")
    has_op = dev.op >= 0
    by_addmm = has_op & (cpu.name[np.where(has_op, dev.op, 0)] == addmm)
    return np.flatnonzero(by_addmm & (dev.kind == KERNEL) & (dev.category == CATEGORY_CODES["gemm"]))


@rule
def hidden_dtod_copy(t: Tables):
    """A cudaMemcpyAsync you didn't write / Memcpy DtoD immediately before a GEMM: often a hidden
    device-to-device copy, e.g. addmm seeding its output with the bias before the GEMM epilogue
    (the "fusion" is at the dispatcher level, not in the kernel). Whether addmm copies depends on
    the torch version and the bias: the rule says which the trace shows."""
    dev, cpu = t.model.dev, t.model.cpu
    if not t.has_gpu:
        return None
    pairs = _dtod_before_gemm(t)
    if not pairs:
        return _no_bias_copy(t)
    c, g = pairs[0]
    chain = []
    if dev.launch[c] >= 0:
        p = int(dev.launch[c])
        chain.append(t.model.names[cpu.name[p]])
        p = int(cpu.parent[p])
        while p >= 0 and len(chain) < 5:
            chain.append(t.model.names[cpu.name[p]])
            p = int(cpu.parent[p])
    byt = dev.bytes[[p[0] for p in pairs]]
    b = float(np.nanmedian(byt)) if np.isfinite(byt).any() else None
    size = f", {b / 1e6:.1f} MB" if b else ""
    gname = t.model.names[dev.name[g]]
    via = f" (issued by {' ← '.join(chain[:4])})" if chain else ""
    return Finding("hidden_dtod_copy", f"hidden copy: {len(pairs)} Memcpy DtoD{size}, median "
                   f"{fmt_us(float(np.median(dev.dur[[p[0] for p in pairs]])))}, each right before GEMM "
                   f"{trace_names.short_name(gname, 60)}{via}",
                   "the bias seed copy of addmm (out = bias, then GEMM with beta=1): fused at the dispatcher, not in "
                   "the kernel; torch versions differ (recent ones may hand the bias to the GEMM without this copy)",
                   dict(variant="copy", pairs=len(pairs), bytes=b, gemm=gname, issued_by=chain))


def _no_bias_copy(t: Tables):
    """aten::addmm's GEMMs with no Memcpy DtoD before them: the other variant of the bias seed copy."""
    gemms = _addmm_gemms(t)
    if not gemms.size:
        return None
    names = _names_of(t, t.model.dev.name[gemms])
    return Finding("hidden_dtod_copy", f"no bias seed copy: aten::addmm launches {gemms.size:,} GEMM kernels "
                   f"({', '.join(trace_names.short_name(n, 60) for n in names[:2])}) with no Memcpy DtoD before them: the GEMM "
                   "reads the bias itself", "the posts' Part 1 (compiled, A100, an older torch) shows a Memcpy DtoD "
                   "seeding the output before the GEMM; whether addmm copies depends on the torch version and on the "
                   "bias (a bias vector can ride in the GEMM's epilogue)",
                   dict(variant="no_copy", pairs=0, addmm_gemms=int(gemms.size), gemm=names[0]))


# ----------------------------------------------------------------------------- GPU lane


@rule
def activity_buffer_request(t: Tables):
    """Activity Buffer Request on the GPU lane: the profiler allocating/refilling its own event
    buffer. The first one usually accounts for the initial CPU↔GPU lane offset."""
    reqs = [o for o in t.model.overheads if "Buffer Request" in o[0]]
    reqs += [(a[0], a[1], a[2], None, None) for a in t.model.gpu_annotations if "Buffer Request" in a[0]]
    if not reqs:
        return None
    reqs.sort(key=lambda r: r[1])
    first = reqs[0]
    steps = t.model.step_of(np.array([r[1] for r in reqs]))
    where = sorted({t.step_label(int(s)) for s in steps if s >= 0})
    return Finding("activity_buffer_request", f"{len(reqs)} Activity Buffer Request(s) on the GPU lane, "
                   f"{fmt_us(sum(r[2] for r in reqs))} in total; the first at +{fmt_us(first[1])} ({fmt_us(first[2])})"
                   + (f", in steps {', '.join(where)}" if where else ""),
                   "the profiler's own buffer management, not your code: profile a warmed-up loop, or more "
                   "steps to see it only once",
                   dict(count=len(reqs), total_us=rounded(sum(r[2] for r in reqs)), first_at_us=rounded(first[1]),
                        steps=where))


def _device_window(t: Tables, i: int) -> tuple[float, float]:
    """Step ``i`` as TensorBoard moves it onto the device side (its host span when TensorBoard drops it)."""
    aligned = t.aligned_steps
    if i < aligned.kept:
        return float(aligned.starts[i]), float(aligned.ends[i])
    return t.model.steps[i].start, t.model.steps[i].end


@rule
def kernel_gap(t: Tables):
    """A gap between two kernels in a single step: likely another buffer request mid-execution.
    Confirm by running more iterations: if it appears only once, it's the profiler, not your code."""
    if not t.has_gpu or not _is_real_steps(t):
        return None
    dev = t.model.dev
    gpu = t.gpu_busy
    best = []
    for i in range(len(t.model.steps)):
        sel = dev.step == i
        if sel.sum() < 2:
            best.append(None)
            continue
        start, end = _device_window(t, i)  # a kernel that claims to start before its step is cut there
        a, b = max(float(dev.ts[sel].min()), start), min(float(dev.end[sel].max()), end)
        if b <= a:
            best.append(None)
            continue
        gs, ge = gpu.gaps_inside(a, b)
        if not gs.size:
            best.append((0.0, a, a))
            continue
        k = int(np.argmax(ge - gs))
        best.append((float(ge[k] - gs[k]), float(gs[k]), float(ge[k])))
    vals = [b[0] for b in best if b is not None]
    if len(vals) < 2:
        return None
    i = max((i for i, b in enumerate(best) if b is not None), key=lambda i: best[i][0])
    g = best[i][0]
    others = [b[0] for j, b in enumerate(best) if b is not None and j != i]
    med = float(np.median(others))
    if g < 20 or g < 3 * max(med, 1.0):
        return None
    gs, ge = best[i][1], best[i][2]
    overlap = [o[0] for o in t.model.overheads if o[1] < ge and o[1] + o[2] > gs]
    over = f"; overlapping {overlap[0]}" if overlap else ""
    return Finding("kernel_gap", f"GPU gap: {fmt_us(g)} idle between two kernels inside {t.step_label(i)} "
                   f"(at +{fmt_us(gs)}), vs a median largest gap of {fmt_us(med)} in the other steps{over}",
                   "run more active steps: if it appears once it is the profiler (buffer request), not your code",
                   dict(step=t.model.steps[i].name, gap_us=rounded(g), at_us=rounded(gs), median_other_steps_us=rounded(med),
                        overlapping=overlap))


@rule
def kernel_time_spread(t: Tables):
    """The same kernel timing differently across steps: GPU clocks, thermals, power management,
    driver housekeeping. Read the trace, not just the mean (the mean misleads; the median holds)."""
    if not t.has_gpu or not _is_real_steps(t):
        return None
    hits = []
    for k in t.kernels[:10]:
        if k.share_pct < 1 or k.detail is None:
            continue
        calls = [c for c in k.detail.per_step_calls if c]
        if len(calls) < 2 or len(set(calls)) != 1:
            continue
        per = [us for us, c in zip(k.detail.per_step_us, k.detail.per_step_calls) if c]
        lo, hi = min(per), max(per)
        if lo <= 0 or hi / lo < 1.5:
            continue
        hits.append((k, per, hi / lo))
    if not hits:
        return None
    k, per, ratio = max(hits, key=lambda h: h[0].total_us)
    steps = [t.step_label(i) for i, c in enumerate(k.detail.per_step_calls) if c]
    per_txt = ", ".join(f"{s} {fmt_us(us)}" for s, us in list(zip(steps, per))[:8])
    return Finding("kernel_time_spread", f"{trace_names.short_name(k.name, 60)} times differently across steps: {per_txt} "
                   f"(max/min {ratio:.1f}x); mean {fmt_us(k.mean_us)} vs median {fmt_us(k.median_us)} per call",
                   "clocks, thermals and driver housekeeping move single runs: read the trace and the median, "
                   "not the mean; warm up and profile more steps",
                   dict(kernel=k.name, per_step_us=[rounded(us) for us in per], max_over_min=rounded(ratio, 2),
                        mean_us=rounded(k.mean_us), median_us=rounded(k.median_us), others=len(hits) - 1))


# ----------------------------------------------------------------------------- dispatch chain

VIEW_OPS = trace_names.VIEW_OPS


@rule
def metadata_only_ops(t: Tables):
    """aten::t, transpose, view, reshape, as_strided, _unsafe_view launch no kernel (0 CUDA time):
    metadata-only ops, a new view of the same memory."""
    rows = [o for o in t.ops if o.name in VIEW_OPS and o.calls_with_device_work == 0]
    if not rows:
        return None
    rows.sort(key=lambda o: -o.calls)
    txt = ", ".join(f"{o.name} ({o.calls:,}x, {fmt_us(o.cpu_total_us)} CPU)" for o in rows[:6])
    tail = "launched no kernel (0 device time)" if t.has_gpu else "(views: no data moved; a CPU trace has no kernels)"
    return Finding("metadata_only_ops", f"metadata-only ops: {txt} {tail}",
                   "views cost only dispatch time; they matter only when called very often",
                   dict(ops={o.name: dict(calls=o.calls, cpu_total_us=rounded(o.cpu_total_us)) for o in rows}))


def _children_names(t: Tables, parent_name: str) -> dict:
    cpu = t.model.cpu
    if parent_name not in t.model.names:
        return {}
    nid = t.model.names.index(parent_name)
    par = np.flatnonzero((cpu.name == nid) & (cpu.kind == OP))
    if not par.size:
        return {}
    kids = np.flatnonzero(np.isin(cpu.parent, par) & (cpu.kind == OP))
    ids, cnt = np.unique(cpu.name[kids], return_counts=True)
    return {t.model.names[i]: int(c) for i, c in zip(ids.tolist(), cnt.tolist())}


@rule
def matmul_dispatch(t: Tables):
    """aten::matmul resolving to aten::mm: a 2D × 2D matrix multiply; resolving to aten::bmm (with
    extra CUDA runtime calls): a batched matmul on 3D+ tensors."""
    kids = _children_names(t, "aten::matmul")
    mm, bmm = kids.get("aten::mm", 0), kids.get("aten::bmm", 0)
    if not mm and not bmm:
        return None
    cpu = t.model.cpu
    rt_per = {}
    rt = np.flatnonzero(cpu.kind == RUNTIME)
    if rt.size:
        inner = t.model.enclosing(rt, (OP,))
        inner = inner[inner >= 0]
        for op in ("aten::mm", "aten::bmm"):
            if op in t.model.names and kids.get(op):
                nid = t.model.names.index(op)
                calls = int(((cpu.name == nid) & (cpu.kind == OP)).sum())
                rt_per[op] = round(float((cpu.name[inner] == nid).sum()) / max(calls, 1), 2)
    parts = []
    if mm:
        parts.append(f"aten::mm {mm}x (2D × 2D)")
    if bmm:
        parts.append(f"aten::bmm {bmm}x (batched, 3D+)")
    rtxt = ""
    if rt_per:
        rtxt = "; runtime calls per call: " + ", ".join(f"{k} {v}" for k, v in rt_per.items())
    return Finding("matmul_dispatch", f"aten::matmul dispatches to {' and '.join(parts)}{rtxt}",
                   "bmm is the batched path (cuBLAS does more heuristic work per call); flatten leading dims to "
                   "use one big mm when the weights are shared",
                   dict(mm=mm, bmm=bmm, runtime_calls_per_call=rt_per))


@rule
def addmm_vs_mm_add(t: Tables):
    """aten::addmm(b, x, w) instead of a separate aten::add + aten::mm pair: operator fusion at
    the dispatcher level; the GPU kernel is still the same GEMM, with the bias add folded into
    the epilogue."""
    cpu = t.model.cpu
    ops = {o.name: o for o in t.ops}
    addmm = ops["aten::addmm"].calls if "aten::addmm" in ops else 0
    pairs = 0
    if "aten::add" in t.model.names:
        mmish = t.model.name_mask(lambda s: s in ("aten::mm", "aten::matmul", "aten::bmm"))
        add_id = t.model.names.index("aten::add")
        cand = np.flatnonzero(((cpu.name == add_id) | mmish[cpu.name]) & (cpu.kind == OP))
        if cand.size:
            o = np.lexsort((cand, cpu.parent[cand]))
            c = cand[o]
            same = cpu.parent[c[1:]] == cpu.parent[c[:-1]]
            is_add = cpu.name[c[1:]] == add_id
            prev_mm = mmish[cpu.name[c[:-1]]]
            pairs = int((same & is_add & prev_mm).sum())
    if not addmm and not pairs:
        return None
    from_linear = _children_names(t, "aten::linear").get("aten::addmm", 0)
    # On the CPU, addmm seeds its output with the bias (an aten::copy_ inside it), then the GEMM
    # accumulates onto it. A GPU does something else, and which thing depends on the bias's shape.
    seed_copies = 0 if t.has_gpu else _children_names(t, "aten::addmm").get("aten::copy_", 0)
    parts = []
    if addmm:
        via = f" ({from_linear:,} from nn.Linear's aten::linear)" if from_linear else ""
        parts.append(f"aten::addmm {addmm:,}x{via}: the matmul and the bias add in one op, no separate aten::add")
    if seed_copies:
        parts.append(f"on the CPU each addmm first copies the bias into its output (aten::copy_ inside aten::addmm, "
                     f"{seed_copies:,}x) and the GEMM accumulates onto it")
    if addmm and not t.has_gpu:
        if from_linear == addmm:
            parts.append("on a GPU, nn.Linear's bias rides in the GEMM's epilogue instead, with no copy (Part 2)")
        else:  # the bias's shape decides, and a trace without record_shapes does not hold it
            parts.append("on a GPU, a 1-D bias (nn.Linear) rides in the GEMM's epilogue with no copy (Part 2), while "
                         "a full 2-D bias (Part 1's compiled matmul + add) may first be copied into the output "
                         "(a Memcpy DtoD, P1.17; depends on the torch version)")
    if pairs:
        two = "two ops, two kernels" if t.has_gpu else "two ops (two kernels on a GPU)"
        parts.append(f"aten::mm/matmul followed by aten::add {pairs:,}x: {two}")
    hint = ("nn.Linear / torch.addmm / torch.compile fold the add into one aten::addmm" if pairs else
            "the GEMM is the same work as mm's; compare kernel names between eager and compiled runs")
    return Finding("addmm_vs_mm_add", "; ".join(parts), hint,
                   dict(addmm=addmm, addmm_from_linear=from_linear, mm_add_pairs=pairs, bias_seed_copies=seed_copies))


# ----------------------------------------------------------------------------- torch.compile

_REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")
_FXGRAPH = re.compile(r"^## Call CompiledFxGraph (\S+) ##$")
COMPILE_FRAMES = ("TorchDynamo Cache Lookup", "AOTDispatcher Runtime Wrapper Prologue", "CompiledFunction",
                  "Pregraph bytecode")


def _compile_info(t: Tables) -> dict | None:
    ops = {o.name: o for o in t.ops}
    regions = {n: o.calls for n, o in ops.items() if _REGION.match(n)}
    hashes = {_FXGRAPH.match(n).group(1): o.calls for n, o in ops.items() if _FXGRAPH.match(n)}
    frames = {n: o.calls for n, o in ops.items() if n in COMPILE_FRAMES}
    if not (regions or hashes or frames):
        return None
    return dict(regions=regions, hashes=hashes, frames=frames)


@rule
def torch_compile(t: Tables):
    """A Torch-Compiled Region: K/M row: you're inside a compiled function. TorchDynamo Cache Lookup
    on every step: Dynamo checking guards (paid on every call). AOTDispatcher Runtime Wrapper
    Prologue: AOTAutograd's wrapper, always in the stack. ## Call CompiledFxGraph <hash> with the
    same hash across steps: cache hits on the generated code."""
    info = _compile_info(t)
    if info is None:
        return None
    nsteps = len(t.model.steps) if t.model.window_source == "ProfilerStep" else 0
    parts = []
    if info["regions"]:
        parts.append("regions " + ", ".join(f"{n.split(': ')[1]} ({c}x)" for n, c in info["regions"].items()))
    for n, c in info["frames"].items():
        parts.append(f"{n} {c}x" + (f" ({c / nsteps:.0f}/step)" if nsteps else ""))
    if info["hashes"]:
        parts.append("CompiledFxGraph " + ", ".join(f"{h} ({c}x)" for h, c in info["hashes"].items()))
    one = len(info["hashes"]) <= 1 and len(info["regions"]) <= 1
    verdict = "one graph, called from its cache every step" if one else "several graphs (see recompiles)"
    return Finding("torch_compile", f"torch.compile frames: {'; '.join(parts)}: {verdict}",
                   "generated code: /tmp/torchinductor_<user>/ (TORCH_COMPILE_DEBUG=1 or TORCH_LOGS=output_code); "
                   "for a single small op the Dynamo/AOT wrappers cost more CPU than eager",
                   dict(regions=info["regions"], hashes=info["hashes"], frames=info["frames"]))


@rule
def recompiles(t: Tables):
    """Several CompiledFxGraph hashes or Torch-Compiled Region indices: recompiles (new shapes,
    dtypes or guards failing) or graph breaks; one stable hash means cache hits."""
    info = _compile_info(t)
    if info is None:
        return None
    regions = [(_REGION.match(n).group(1), _REGION.match(n).group(2)) for n in info["regions"]]
    recompiled = sorted({f"{a}/{b}" for a, b in regions if b != "0"})
    frames = sorted({a for a, _ in regions})
    if len(info["hashes"]) <= 1 and len(regions) <= 1:
        return None
    why = (["recompiles " + ", ".join(recompiled)] if recompiled else []) + (
        [f"{len(frames)} frames (graph breaks)"] if len(frames) > 1 else [])
    return Finding("recompiles", f"{len(info['hashes'])} CompiledFxGraph hashes and {len(regions)} compiled regions "
                   f"({', '.join(n.split(': ')[1] for n in info['regions']) or '-'}): "
                   + (" ".join(why) or "several compiled graphs"),
                   "TORCH_LOGS=recompiles,graph_breaks says why; mark dynamic dims or fix the shapes",
                   dict(hashes=list(info["hashes"]), regions=list(info["regions"]), recompiled=recompiled),
                   level="warn")


@rule
def fused_kernels(t: Tables):
    """Inductor's fused kernels, names decoded: triton_poi_fused__unsafe_view_gelu_mul_0 -> Triton,
    pointwise, fuses _unsafe_view+gelu+mul (poi/red/per = pointwise/reduction/persistent
    reduction); on the CPU graph_0_cpp_fused_... / cpp_fused_... (C++/OpenMP)."""
    rows = []
    for k in t.kernels:
        d = trace_names.decode_fused(k.name)
        if d:
            rows.append((k.name, d, k.total_us, k.calls, "GPU"))
    gpu_names = {r[0] for r in rows}
    for o in t.ops:
        d = trace_names.decode_fused(o.name)
        if d and o.name not in gpu_names:
            rows.append((o.name, d, o.cpu_total_us, o.calls, "CPU"))
    if not rows:
        return None
    rows.sort(key=lambda r: -r[2])
    txt = "; ".join(f"{n} -> {trace_names.describe_fused(d)} ({c}x, {fmt_us(us)})" for n, d, us, c, _ in rows[:4])
    more = f" (+{len(rows) - 4} more)" if len(rows) > 4 else ""
    return Finding("fused_kernels", f"fused kernels: {txt}{more}",
                   "one fused kernel reads its inputs once and writes once: no intermediate round trip to memory",
                   dict(kernels=[dict(name=n, lane=lane, calls=c, total_us=rounded(us), **d) for n, d, us, c, lane in rows[:20]]))


@rule
def gemm_kernels(t: Tables):
    """A kernel named like ampere_bf16_s16816gemm_... or nvjet_sm90_tst_...: the actual cuBLAS GPU work
    for a matmul; the name carries library, arch, dtype, tile, stages (and on Hopper the cluster shape
    and epilogue flags) and layout (nn/tn/TNT); identical names mean identical GPU work (typically the
    same in eager and compiled mode). A ``bias`` flag (nvjet_..._bias_...) shows the bias add riding in
    the GEMM's epilogue: one kernel for nn.Linear's matmul + bias."""
    rows = [(k, trace_names.decode_gemm(k.name)) for k in t.kernels if k.category == "gemm"]
    rows = [(k, d) for k, d in rows if d]
    if not rows:
        return None
    total = sum(k.total_us for k, _ in rows)
    share = sum(k.share_pct for k, _ in rows)
    txt = "; ".join(f"{trace_names.short_name(k.name, 60)} = {trace_names.describe_gemm(d)} ({k.calls}x, median {fmt_us(k.median_us)})"
                    for k, d in rows[:3])
    more = f" (+{len(rows) - 3} more)" if len(rows) > 3 else ""
    bias = [k.name for k, d in rows if trace_names.has_bias_epilogue(d)]
    epi = (f"; the bias rides in the GEMM's epilogue ('bias' flag in {trace_names.short_name(bias[0], 60)}"
           f"{f' and {len(bias) - 1} more' if len(bias) > 1 else ''}): matmul + bias in one kernel") if bias else ""
    return Finding("gemm_kernels", f"GEMM kernels ({share:.0f}% of kernel time, {fmt_us(total)}): {txt}{more}{epi}",
                   "compare names between runs: the same name means the same GPU work",
                   dict(kernels=[dict(name=k.name, calls=k.calls, total_us=rounded(k.total_us), **d) for k, d in rows[:20]],
                        bias_epilogue=bias))


# ----------------------------------------------------------------------------- phases (per annotation)


def _tokens_per_call(t: Tables) -> dict:
    """Tokens per call of 04_llm.py's phases, from the knobs the lesson writes into its trace
    (shape = batch x prompt length x new tokens); empty for any other trace."""
    knobs = t.knobs
    if knobs is None or knobs.script != "04_llm" or len(knobs.shape) != 3:
        return {}
    batch, prompt_len, _ = knobs.shape
    return {"prefill": batch * prompt_len, "decode": batch}


def _phase_cost_us(p) -> float:
    """A call's cost: its host span, or the device time of its work when the GPU took longer."""
    return max(p.mean_us, p.device_us_per_call or 0.0)


def _same_op_graph(a, b) -> bool:
    return a.ops_per_call >= 10 and b.ops_per_call >= 10 and 0.5 <= a.ops_per_call / b.ops_per_call <= 2


@rule
def overhead_bound_phase(t: Tables):
    """A phase whose calls dispatch about as many ops as another phase's calls but do far less work
    each (decode's one token per sequence vs prefill's whole prompt): its time goes to dispatching
    the same op graph again, not to the work, so per token it is many times slower (and on a GPU it
    leaves the GPU idle). Fewer, bigger calls (batching), fewer ops (torch.compile) or one launch
    for them all (CUDA graphs) help; faster kernels do not."""
    tokens = _tokens_per_call(t)
    pairs = [(a, b) for a in t.phases for b in t.phases if a is not b and _same_op_graph(a, b)]
    best = None
    for light, heavy in pairs:
        if light.name in tokens and heavy.name in tokens and tokens[light.name] < tokens[heavy.name]:
            per_light = _phase_cost_us(light) / tokens[light.name]
            per_heavy = _phase_cost_us(heavy) / tokens[heavy.name]
            ratio = per_light / per_heavy if per_heavy > 0 else 0.0
            if ratio >= 3 and (best is None or ratio > best[2]):
                best = (light, heavy, ratio, per_light, per_heavy)
        elif not tokens and t.has_gpu and light.calls >= 2 and light.gpu_busy_pct < 50 \
                and heavy.gpu_busy_pct >= 2 * max(light.gpu_busy_pct, 1.0):
            ratio = heavy.gpu_busy_pct / max(light.gpu_busy_pct, 1.0)
            if best is None or ratio > best[2]:
                best = (light, heavy, ratio, None, None)
    if best is None:
        return None
    light, heavy, ratio, per_light, per_heavy = best
    same = (f"each call dispatches {light.ops_per_call:,.0f} ops, about as many as a {heavy.name} call "
            f"({heavy.ops_per_call:,.0f}, {light.ops_per_call / heavy.ops_per_call:.2f}x)")
    busy = (f"; the GPU is busy {light.gpu_busy_pct:.0f}% of {light.name}'s time vs {heavy.gpu_busy_pct:.0f}% "
            f"of {heavy.name}'s" if t.has_gpu else "")
    if per_light is not None:
        n = tokens[light.name]
        work = (f", for {n:,} token{'s' if n != 1 else ''} instead of {tokens[heavy.name]:,}: {fmt_us(per_light)} per token "
                f"vs {fmt_us(per_heavy)} in {heavy.name} ({ratio:,.0f}x)")
    else:
        work = ""
    return Finding("overhead_bound_phase", f"{light.name} is overhead-bound: {same}{work}{busy}",
                   f"the cost of a {light.name} call is the dispatch of its ops, not its work: batch more sequences "
                   "per call, cut the ops (torch.compile), or replay them as one CUDA graph "
                   "(torch.compile mode='reduce-overhead' with a static KV cache)",
                   dict(phase=light.name, reference=heavy.name, ops_per_call=rounded(light.ops_per_call),
                        reference_ops_per_call=rounded(heavy.ops_per_call), calls=light.calls,
                        us_per_call=rounded(_phase_cost_us(light)), reference_us_per_call=rounded(_phase_cost_us(heavy)),
                        tokens_per_call=tokens.get(light.name), reference_tokens_per_call=tokens.get(heavy.name),
                        us_per_token=rounded(per_light, 2), reference_us_per_token=rounded(per_heavy, 3),
                        per_token_ratio=rounded(ratio, 1) if per_light is not None else None,
                        gpu_busy_pct=rounded(light.gpu_busy_pct), reference_gpu_busy_pct=rounded(heavy.gpu_busy_pct)),
                   level="warn")


@rule
def cuda_graphs(t: Tables):
    """cudaGraphLaunch on the CPU lane: a captured CUDA graph replays a whole sequence of kernels
    for one launch (torch.compile mode='reduce-overhead', or torch.cuda.graphs): the per-kernel
    launch cost, the overhead of a small-kernel phase such as decode, is gone from the host."""
    from common.report.phases import GRAPH_LAUNCHES

    cpu, dev = t.model.cpu, t.model.dev
    graph_ids = t.model.name_mask(lambda s: s in GRAPH_LAUNCHES)
    launches = np.flatnonzero(graph_ids[cpu.name] & (cpu.kind == RUNTIME))
    if not launches.size:
        return None
    is_graph = np.zeros(cpu.n, dtype=bool)
    is_graph[launches] = True
    linked = dev.launch >= 0
    replayed = int((linked & (dev.kind == KERNEL) & is_graph[np.maximum(dev.launch, 0)]).sum())
    per = f", {replayed / launches.size:,.0f} kernels per launch" if replayed else ""
    phases = [p for p in t.phases if p.graph_launches_per_call > 0]
    where = "; ".join(f"{p.name}: {p.graph_launches_per_call:.1f} graph launch(es) and "
                      f"{p.launches_per_call - p.graph_launches_per_call:.1f} other launches per call, "
                      f"{p.kernels_per_call:,.0f} kernels per call" for p in phases[:3])
    return Finding("cuda_graphs", f"CUDA graphs: {launches.size:,} {t.model.names[cpu.name[launches[0]]]} calls replay "
                   f"{replayed:,} kernels{per}: one launch instead of one per kernel" + (f" ({where})" if where else ""),
                   "the kernels still run one after another on the GPU; what is gone is the host's launch cost. "
                   "A graph needs fixed shapes and addresses: a static KV cache",
                   dict(graph_launches=int(launches.size), kernels_replayed=replayed,
                        phases={p.name: dict(graph_launches_per_call=rounded(p.graph_launches_per_call, 2),
                                             launches_per_call=rounded(p.launches_per_call, 2),
                                             kernels_per_call=rounded(p.kernels_per_call, 1)) for p in phases}))


@rule
def recompiled_before_window(t: Tables):
    """Torch-Compiled Region K/M with M > 0, the only region of its frame in the window, with one
    CompiledFxGraph: the frame was compiled again before the window (a guard failed, typically a
    shape changed) and that graph serves every call since. When the shapes keep changing, as a
    growing KV cache's do, this is torch.compile going dynamic (automatic dynamic shapes after the
    first change): one graph for every length instead of one recompile per length."""
    info = _compile_info(t)
    if info is None or len(info["hashes"]) != 1:
        return None
    regions = [(_REGION.match(n).group(1), _REGION.match(n).group(2), n) for n in info["regions"]]
    frames = {f for f, _, _ in regions}
    if len(regions) != 1 or len(frames) != 1 or regions[0][1] == "0":
        return None
    from common.report.model import ANNOTATION

    frame, compile_id, name = regions[0]
    calls = info["regions"][name]
    nid = t.model.names.index(name)
    idx = np.flatnonzero(t.model.cpu.name == nid)
    outer = t.model.enclosing(idx, (ANNOTATION,))
    named = [t.model.names[t.model.cpu.name[i]] for i in outer.tolist() if i >= 0]
    named = [n for n in named if not STEP_RE.match(n)]
    inside = f" inside {max(set(named), key=named.count)}" if named else ""
    return Finding("recompiled_before_window", f"{name}{inside}: frame {frame}'s compile {compile_id}, a recompile "
                   f"(the guards of an earlier compile failed before the window), serves all {calls:,} calls in the "
                   "window with one graph: no recompiles here; when the shapes change from call to call (a growing KV "
                   "cache), this graph has dynamic shapes (torch.compile's automatic dynamic, after the first change)",
                   "TORCH_LOGS=recompiles,dynamic says which guard failed and which dimension went dynamic; fixed "
                   "shapes (a static KV cache) keep one static graph (region 0/0)",
                   dict(region=name, frame=frame, compile_id=int(compile_id), calls=calls,
                        graph=next(iter(info["hashes"])), phase=inside.removeprefix(" inside ") or None))
