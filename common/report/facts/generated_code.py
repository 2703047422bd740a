"""From each kernel Inductor generated to its code: the TorchInductor GPU profiling guide's workflow, read off
the trace and the compiled modules a lesson copied beside it (:mod:`common.inductor_source`).

The guide ranks a compiled model's kernels by their share of the time and weighs each by what speeding it up
can give: a kernel at 0.1 % of the time gives at most 0.1 %; one at 2 % made 2x faster gives 1 %. Here a
generated kernel's share is of the steps' wall time (the profiled window), the figure that bounds what a
step can gain: its device time on a GPU (beside its share of the device's kernel time, the guide's table's),
its own CPU time on the CPU (the lessons run one thread: the kernel's time is the step's). Each kernel is then
found in the copies by the name the profiler recorded (Inductor writes that name into the module: a C++
kernel's record ``graph_0_cpp_fused_...``, a Triton kernel's own name): the copy, the line its code starts
at, the line the graph calls it from, and the ATen ops the module's comment says it came from (on the CPU the
module has no such comment: the ops its name lists).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from common.report.facts.kernel_sources import split_listed
from common.report.model import names as trace_names
from common.report.model.build import Model


@dataclass(frozen=True)
class CodeRow:
    """One kernel Inductor generated, as the trace ran it, and where its code is."""

    name: str  # as the trace records it
    lane: str  # "device" | "CPU"
    calls: int
    time_us: float  # its time in the trace: device time on a GPU, its own CPU time on the CPU
    per_call_us: float  # on the device the median call, on the CPU the mean
    per_step_us: Optional[float]  # time_us over the profiled steps (None without ProfilerSteps)
    device_pct: Optional[float]  # share of the device's kernel time (None on the CPU)
    wall_pct: float  # share of the steps' wall time: at most what a step can gain from it
    what: str  # Triton, pointwise / C++ (Inductor CPU), fused loop
    ops: tuple  # the ATen ops it came from
    ops_from: str  # "module" (the module's comment) | "name" (the ops its name lists)
    listed: tuple  # ops listed too whose own kernels still run beside it (:func:`.kernel_sources.split_listed`)
    where: tuple  # (copy, line of its code, line of its first call or None), per copy that defines it
    kernel_file: Optional[str]  # its own file copied beside the trace (a Triton kernel that runs alone)
    runnable_alone: Optional[bool]  # its source holds a benchmark __main__ (None: no copy defines it)
    max_autotune: Optional[bool]  # the 'max_autotune' its source holds
    provenance: Optional[int]  # Inductor's provenance debug handle
    replayed: bool  # launched by CUDA graph replays (cudaGraphLaunch), not one launch each


@dataclass(frozen=True)
class GeneratedCodeFacts:
    rows: tuple  # CodeRow, by time, most first
    modules: tuple  # the copies of the compiled modules beside the trace (paths)
    defined: int  # the kernels those modules define
    externs: tuple  # (copy, ExternCall): the library kernels the modules call
    pace: Optional[str]  # on a GPU, who sets the pace ("device" | "overhead" | None): the regime's
    threads: Optional[int]  # the lesson's intra-op threads on the CPU (its module command runs with as many)


def generated_code_facts(m: Model, kernels: tuple, ops: tuple, sources: dict, pace: Optional[str]) -> GeneratedCodeFacts:
    """The generated kernels of the trace (device kernels, or on a CPU trace the C++ kernels' records), each with
    its share and its code, and the copies beside the trace (none of either: an empty record)."""
    nsteps = len(m.steps) if m.window_source == "ProfilerStep" else 0
    wall = m.window_us
    found = []
    for k in kernels:
        if trace_names.decode_fused(k.name):
            found.append((k.name, "device", k.calls, k.total_us, k.median_us, k.share_pct))
    on_device = {name for name, *_ in found}
    for o in ops:
        if o.kind == "op" and o.name not in on_device and trace_names.decode_fused(o.name):
            found.append((o.name, "CPU", o.calls, o.self_cpu_us, o.self_cpu_us / max(o.calls, 1), None))
    defined = {}
    for module in m.generated:
        files = dict(module.kernel_files)
        for kernel in module.kernels:
            defined.setdefault(kernel.recorded_as, []).append((module.path, kernel, files.get(kernel.name)))
    rows = []
    for name, lane, calls, time, per_call, share in sorted(found, key=lambda r: -r[3]):
        decoded = trace_names.decode_fused(name)
        where = defined.get(name, [])
        first = where[0][1] if where else None
        source = sources.get(name)
        rows.append(CodeRow(
            name=name, lane=lane, calls=calls, time_us=time, per_call_us=per_call,
            per_step_us=time / nsteps if nsteps else None, device_pct=share,
            wall_pct=100.0 * time / wall if wall > 0 else 0.0,
            what=f"{decoded['backend']}, {decoded['kind']}", **_ops(decoded, first, source),
            where=tuple((path, k.line, k.call_lines[0] if k.call_lines else None) for path, k, _ in where),
            kernel_file=next((file for _, _, file in where if file), None),
            runnable_alone=first.runnable_alone if first is not None else None,
            max_autotune=first.max_autotune if first is not None else None,
            provenance=first.provenance if first is not None else None,
            replayed=source is not None and any("GraphLaunch" in call for call, _ in source.launchers)))
    knobs = m.knobs
    threads = knobs.cpu.get("threads") if knobs is not None and isinstance(knobs.cpu, dict) else None
    threads = threads if isinstance(threads, int) and 0 < threads < 100_000 else None  # an odd trace's value: none
    return GeneratedCodeFacts(
        rows=tuple(rows), modules=tuple(module.path for module in m.generated),
        defined=sum(len(module.kernels) for module in m.generated),
        externs=tuple((module.path, call) for module in m.generated for call in module.externs),
        pace=pace if m.has_gpu else None, threads=threads if not m.has_gpu else None)


def _ops(decoded: dict, kernel, source) -> dict:
    """The ops a kernel came from: the module's comment where it has one (a Triton kernel's), else the ops its name
    lists; either way without those whose own kernels still run beside it (a GEMM, an attention), said apart."""
    from_module = kernel is not None and bool(kernel.ops)
    split = split_listed({**decoded, "ops": list(kernel.ops) if from_module else decoded["ops"]}, source)
    return dict(ops=tuple(split["ops"]), ops_from="module" if from_module else "name",
                listed=tuple(split["listed_not_fused"]))
