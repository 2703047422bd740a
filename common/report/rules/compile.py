"""torch.compile: its frames, recompiles, Inductor's fused kernels, CUDA graphs, a recompile before
the window."""

from __future__ import annotations


from common.report.model import names as trace_names
from common.report.facts.compile import COMPILE_FRAMES, FXGRAPH, REGION
from common.report.facts.kernel_sources import split_listed
from common.report.findings import Finding, in_window
from common.report.facts.tables import Tables
from common.report.units import fmt_us, rounded


def torch_compile(t: Tables):
    """The compile frames: ``Torch-Compiled Region: K/M``, ``TorchDynamo Cache Lookup`` (guards, every call),
    ``AOTDispatcher Runtime Wrapper Prologue``, ``## Call CompiledFxGraph <hash>`` (one hash across steps: cache
    hits); the frames' own CPU time per step, against the compute ops' own work on the CPU (P1.18).

    A Torch-Compiled Region row: you are inside a compiled function; the cache lookup is Dynamo checking guards,
    paid on every call; the prologue is AOTAutograd's wrapper, always in the stack. The frames' own CPU time per
    step is what compiling adds to every call (P1.18: for a single op, more CPU than eager)."""
    info = t.compile
    if info is None:
        return None
    nsteps = len(t.model.steps) if t.model.window_source == "ProfilerStep" else 0
    parts = []
    if info.regions:
        parts.append("regions " + ", ".join(f"{n.split(': ')[1]} ({c}x)" for n, c in info.regions.items()))
    for n, c in info.frames.items():
        parts.append(f"{n} {c}x" + (f" ({c / nsteps:.0f}/step)" if nsteps else ""))
    if info.hashes:
        parts.append("CompiledFxGraph " + ", ".join(f"{h} ({c}x)" for h, c in info.hashes.items()))
    one = len(info.hashes) <= 1 and len(info.regions) <= 1
    verdict = "one graph, called from its cache every step" if one else "several graphs (see recompiles)"
    cost, ev = _frames_cost(t, nsteps)
    return Finding("torch_compile", f"torch.compile frames: {'; '.join(parts)}: {verdict}{cost}",
                   "the generated code: a lesson copies the compiled module beside its trace (<trace>.graph0.py, "
                   "which generated_code reads); Inductor's own is in its cache, /tmp/torchinductor_<user>/ "
                   "(TORCH_LOGS=output_code prints where); "
                   "for a single small op the Dynamo/AOT wrappers cost more CPU than eager: --compare this run with "
                   "its eager twin to see it",
                   dict(regions=info.regions, hashes=info.hashes, frames=info.frames, **ev))


def _is_frame(name: str) -> bool:
    return bool(REGION.match(name) or FXGRAPH.match(name)) or name in COMPILE_FRAMES


def _is_wrapper(name: str) -> bool:
    return _is_frame(name) and not FXGRAPH.match(name)


def _frames_cost(t: Tables, nsteps: int) -> tuple[str, dict]:
    """The frames' own CPU per step, split in two: the guards and wrappers (Dynamo's cache lookup, AOT's
    prologue, the region's own time), and the compiled graph's own time (the generated module's Python
    and whatever no op inside it accounts for: its buffers freed and allocated, a kernel the profiler does
    not record as an op); against the compute ops' own work per step on the CPU: words and evidence."""
    if not nsteps:
        return "", {}
    work = t.cpu_work  # per step: medians over the steps (one slow step is not the typical cost)
    if work is None or not work.by_step:
        per_step = t.compile.self_us / nsteps
        return (f"; the frames' own CPU time is {fmt_us(per_step)} per step",
                dict(frames_self_us_per_step=rounded(per_step)))
    wrappers = work.median_step_sum(_is_wrapper)
    graph = work.median_step_sum(lambda n: bool(FXGRAPH.match(n)))
    ev = dict(frames_self_us_per_step=rounded(work.median_step_sum(_is_frame)),
              wrappers_self_us_per_step=rounded(wrappers), graph_self_us_per_step=rounded(graph))
    words = (f"; the frames' own CPU time per step (median): {fmt_us(wrappers)} in the guards and wrappers, "
             f"{fmt_us(graph)} in the compiled graph's own time (its Python, and what no op inside it accounts "
             "for: buffers freed and allocated, kernels not recorded as ops)")
    if not t.has_gpu and work.compute_ops:
        compute = work.median_compute_us
        ops = ", ".join(o.name for o in work.compute_ops[:2])
        words += f", against {fmt_us(compute)} of the compute ops' own work ({ops})"
        ev["compute_us_per_step"] = rounded(compute)
    return words, ev


def recompiles(t: Tables):
    """Several ``CompiledFxGraph`` hashes or region indices: recompiles (new shapes, dtypes, failing guards) or
    graph breaks; one stable hash means cache hits."""
    info = t.compile
    if info is None:
        return None
    regions = [(REGION.match(n).group(1), REGION.match(n).group(2)) for n in info.regions]
    recompiled = sorted({f"{a}/{b}" for a, b in regions if b != "0"})
    frames = sorted({a for a, _ in regions})
    if len(info.hashes) <= 1 and len(regions) <= 1:
        return None
    why = (["recompiles " + ", ".join(recompiled)] if recompiled else []) + (
        [f"{len(frames)} frames (graph breaks)"] if len(frames) > 1 else [])
    return Finding("recompiles", f"{len(info.hashes)} CompiledFxGraph hashes and {len(regions)} compiled regions "
                   f"({', '.join(n.split(': ')[1] for n in info.regions) or '-'}): "
                   + (" ".join(why) or "several compiled graphs"),
                   "TORCH_LOGS=recompiles,graph_breaks says why; mark dynamic dims or fix the shapes",
                   dict(hashes=list(info.hashes), regions=list(info.regions), recompiled=recompiled),
                   level="warn", spans=in_window(t, info.recompiled_calls))


def fused_kernels(t: Tables):
    """Inductor's fused kernels decoded: ``triton_poi_fused__unsafe_view_gelu_mul_0`` → Triton, pointwise
    (``poi``/``red``/``per``), fuses ``_unsafe_view`` + ``gelu`` + ``mul`` (the sorted ATen op names Inductor joins
    with ``_``, split by ATen's own names: ``cpp_fused__scaled_dot_product_flash_attention_for_cpu_0`` is one op; a
    name that splits no such way is said whole); on the CPU ``graph_0_cpp_fused_...`` / ``cpp_fused_...`` likewise;
    on a GPU with each kernel's device time per call (median) and what launched it (the compiled graph); a pointwise
    or reduction kernel's name may list an op it does not compute (``_scaled_dot_product_cudnn_attention``, ``bmm``:
    Inductor names a kernel after the ops its nodes came from): where that op's own kind of kernel (attention, GEMM,
    or the op itself) still runs in the same compiled graph calls, the op is said to be listed, not fused.

    ``poi``/``red``/``per``: pointwise, reduction, persistent reduction; on the CPU, C++/OpenMP. A fused kernel's
    device time per call is the figure to weigh against a hand-written kernel of the same ops (P2.10)."""
    rows = []
    for k in t.kernels:
        d = trace_names.decode_fused(k.name)
        if d:
            source = t.kernel_sources.get(k.name)
            rows.append((k.name, d, k.total_us, k.calls, "GPU", k.median_us, source))
    gpu_names = {r[0] for r in rows}
    for o in t.ops:
        d = trace_names.decode_fused(o.name)
        if d and o.name not in gpu_names:
            rows.append((o.name, d, o.cpu_total_us, o.calls, "CPU", o.cpu_total_us / max(o.calls, 1), None))
    if not rows:
        return None
    rows.sort(key=lambda r: -r[2])
    rows = [(n, split_listed(d, source), us, c, lane, per, source) for n, d, us, c, lane, per, source in rows]
    txt = "; ".join(f"{n} -> {_described(d)} ({_per_call(c, lane, per, source)})"
                    for n, d, us, c, lane, per, source in rows[:4])
    more = f" (+{len(rows) - 4} more)" if len(rows) > 4 else ""
    whose = "torch.compile's (Inductor)" if t.compile is not None else "named as Inductor names its kernels"
    weigh = ("; its device time per call is what a hand-written kernel of the same ops competes with (--compare "
             "this run with one of that kernel)") if any(r[4] == "GPU" for r in rows) else ""
    return Finding("fused_kernels", f"fused kernels, {whose}: {txt}{more}",
                   "one fused kernel reads its inputs once and writes once: no intermediate round trip to memory"
                   + weigh,
                   dict(kernels=[dict(name=n, lane=lane, calls=c, total_us=rounded(us), per_call_us=rounded(per),
                                      launched_from=[caller for caller, _ in source.callers] if source else None, **d)
                                 for n, d, us, c, lane, per, source in rows[:20]], compiled=t.compile is not None))


def _described(d: dict) -> str:
    """:func:`~common.report.model.names.describe_fused`, and the ops the name lists whose own kind of kernel
    still runs: ``(its name also lists bmm, _scaled_dot_product_cudnn_attention, but their own kernels still run
    in the same compiled graph calls: 720 GEMM kernels ran; 96 fused attention kernels ran)``."""
    said = trace_names.describe_fused(d) if d["ops"] or not d["listed_not_fused"] else f"{d['backend']}, {d['kind']}"
    listed = d["listed_not_fused"]
    if not listed:
        return said
    whose = "that op's own kernel still runs" if len(listed) == 1 else "their own kernels still run"
    return (f"{said} (its name also lists {', '.join(listed)}, but {whose} in the same compiled graph calls: "
            f"{'; '.join(dict.fromkeys(listed.values()))})")


def _per_call(calls: int, lane: str, per_call_us: float, source) -> str:
    """``3x, 62 µs per call on the device (median), launched from the compiled graph (...)``."""
    if lane == "CPU":
        return f"{calls}x, {fmt_us(per_call_us)} per call on the CPU (mean)"
    where = f", launched from {source.launched_from}" if source is not None else ""
    return f"{calls}x, {fmt_us(per_call_us)} per call on the device (median){where}"


def cuda_graphs(t: Tables):
    """``cudaGraphLaunch`` on the CPU lane: one launch replays a captured graph's kernels (``reduce-overhead``);
    kernels per launch, per annotation.

    torch.compile mode='reduce-overhead', or torch.cuda.graphs: the per-kernel launch cost, the overhead of a
    small-kernel phase such as decode, is gone from the host."""
    graphs = t.graph_launches
    if graphs is None:
        return None
    launches, replayed = graphs.launches, graphs.kernels_replayed
    per = f", {replayed / launches:,.0f} kernels per launch" if replayed else ""
    phases = [p for p in t.phases if p.graph_launches_per_call > 0]
    where = "; ".join(f"{p.name}: {p.graph_launches_per_call:.1f} graph launch(es) and "
                      f"{p.launches_per_call - p.graph_launches_per_call:.1f} other launches per call, "
                      f"{p.kernels_per_call:,.0f} kernels per call" for p in phases[:3])
    return Finding("cuda_graphs", f"CUDA graphs: {launches:,} {graphs.name} calls replay "
                   f"{replayed:,} kernels{per}: one launch instead of one per kernel" + (f" ({where})" if where else ""),
                   "the kernels still run one after another on the GPU; what is gone is the host's launch cost. "
                   "A graph needs fixed shapes and addresses: a static KV cache",
                   dict(graph_launches=launches, kernels_replayed=replayed,
                        phases={p.name: dict(graph_launches_per_call=rounded(p.graph_launches_per_call, 2),
                                             launches_per_call=rounded(p.launches_per_call, 2),
                                             kernels_per_call=rounded(p.kernels_per_call, 1)) for p in phases}))


def recompiled_before_window(t: Tables):
    """One ``Torch-Compiled Region K/M`` with M > 0 serves every call in the window: recompiled before it, and with
    changing shapes (a growing KV cache) gone dynamic.

    The only region of its frame in the window, with one CompiledFxGraph: the frame was compiled again before the
    window (a guard failed, typically a shape changed) and that graph serves every call since. With shapes that keep
    changing this is torch.compile's automatic dynamic shapes after the first change: one graph for every length
    instead of one recompile per length."""
    info = t.compile
    if info is None or len(info.hashes) != 1:
        return None
    regions = [(REGION.match(n).group(1), REGION.match(n).group(2), n) for n in info.regions]
    frames = {f for f, _, _ in regions}
    if len(regions) != 1 or len(frames) != 1 or regions[0][1] == "0":
        return None
    frame, compile_id, name = regions[0]
    calls = info.regions[name]
    phase = info.region_phase[name]
    inside = f" inside {phase}" if phase else ""
    return Finding("recompiled_before_window", f"{name}{inside}: frame {frame}'s compile {compile_id}, a recompile "
                   f"(the guards of an earlier compile failed before the window), serves all {calls:,} calls in the "
                   "window with one graph: no recompiles here; when the shapes change from call to call (a growing KV "
                   "cache), this graph has dynamic shapes (torch.compile's automatic dynamic, after the first change)",
                   "TORCH_LOGS=recompiles,dynamic says which guard failed and which dimension went dynamic; fixed "
                   "shapes (a static KV cache) keep one static graph (region 0/0)",
                   dict(region=name, frame=frame, compile_id=int(compile_id), calls=calls,
                        graph=next(iter(info.hashes)), phase=inside.removeprefix(" inside ") or None))
