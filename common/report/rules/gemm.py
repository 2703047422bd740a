"""Matrix multiplies and the dispatch chain: occupancy queries before launches, aten::matmul's
path, addmm against mm + add, the GEMM kernels' names, the hotspot kernel, metadata-only ops."""

from __future__ import annotations


from common.report.facts import knob_work
from common.report.model import names as trace_names
from common.report.model.gpus import Gpu
from common.report.findings import Finding
from common.report.rules import advice
from common.report.facts.tables import Tables
from common.report.units import fmt_us, rounded


def occupancy_query(t: Tables):
    """An occupancy query (``cudaOccupancyMaxActiveBlocksPerMultiprocessor[WithFlags]``, ``...MaxActiveClusters``,
    ``cuOccupancy*``, ``hipOccupancy*``) before a launch (GEMM-like) vs plain launches (elementwise, fixed
    footprint); expected before every GEMM below sm_90, optional on Hopper and newer (it says which case the trace
    shows).

    A heavyweight, adaptively launched kernel (GEMM, conv): cuBLAS asks how many blocks fit on an SM to pick a
    variant; an elementwise or reduction kernel has a fixed, light footprint and no query. Below sm_90 (the posts'
    A100) every cuBLAS GEMM launch follows a query; on sm_90+ (``cuLaunchKernelEx``) it is optional."""
    occ = t.gemm.occupancy
    if occ is None:
        return None
    gpu = t.gpu
    ev = dict(gpu=gpu.describe(), compute_capability=gpu.sm, queries_expected=gpu.expects_gemm_occupancy_query,
              case=gpu.occupancy_case(), gemm_launches=occ.gemm_launches,
              gemm_launches_queried=occ.gemm_launches_queried, launch_calls=list(occ.launch_calls))
    if not occ.queried:
        return _no_occupancy_query(gpu, ev)
    queries = list(occ.queries)
    nq, npl = occ.queried, occ.plain
    tq, tp = occ.queried_ops, occ.plain_ops
    qtxt = ", ".join(f"{op} ({v['launches']}x → {v['kernels'][0]})" for op, v in tq.items())
    ptxt = ", ".join(f"{op} ({v['launches']}x)" for op, v in tp.items())
    gtxt = f"; GEMM launches queried: {ev['gemm_launches_queried']} of {ev['gemm_launches']}" if ev["gemm_launches"] else ""
    short = gpu.expects_gemm_occupancy_query and ev["gemm_launches_queried"] < ev["gemm_launches"]
    return Finding("occupancy_query", f"occupancy-queried launches: {nq:,} of {nq + npl:,} kernel launches follow "
                   f"an occupancy query ({', '.join(queries)}): {qtxt}" + (f"; plain launches: {ptxt}" if ptxt else "")
                   + f"{gtxt} ({gpu.occupancy_case()})",
                   _queried_hint(ev["gemm_launches"] - ev["gemm_launches_queried"]),
                   dict(ev, queried=nq, plain=npl, queried_ops=tq, plain_ops=tp, queries=queries),
                   level="note" if short else "info")


def _queried_hint(plain_gemms: int) -> str:
    """What a query tells apart, as far as this run shows it: where GEMMs launched without one too, the
    query does not mark the GEMMs here."""
    if plain_gemms:
        return (f"queried launches are adaptively-tuned library kernels (GEMM/conv), but {plain_gemms:,} GEMM "
                "launch(es) here had no query: tell GEMMs from light kernels by name or by the op that "
                "launched them, not by a query")
    return ("queried launches are adaptively-tuned library kernels (GEMM/conv); plain ones are light "
            "elementwise/reduction kernels")


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


def hotspot_kernel(t: Tables):
    """One kernel owns most of the device time: start there (not where the GPU idles most of each step, nor on a
    GEMM or attention kernel whose matrix work is compute-bound: what a faster kernel could win at most, 100 / its
    share of the roof, and that fewer FLOPs is what is left).

    The posts' cheatsheet row: one event dominates CUDA total: that's your hotspot. Where the GPU idles most of each
    step, the dispatch is the cost, not the kernel; beside device_bound's "the arithmetic is the cost", no threshold
    words the same kernel two ways."""
    if not t.kernels:
        return None
    k = t.kernels[0]
    if k.share_pct < 25:
        return None
    idle = t.regime is not None and t.regime.pace == "overhead"
    roof = _share_of_roof(t, k.name)
    hint = ("the GPU idles most of each step (overhead_bound): this kernel is not what costs the time; the "
            "dispatch around it is" if idle else
            f"the matrix work it belongs to already runs at {roof:.0f}% of its roof (device_bound): a faster kernel "
            f"for this shape could win {100 / roof:.2f}x at most (the datasheet's peak, which no kernel reaches); "
            "fewer FLOPs, or the rest of the device time, is what is left" if roof is not None else
            "start optimising there; find the op that launches it in the trace (the flow arrow)")
    return Finding("hotspot_kernel", f"hotspot kernel: {trace_names.short_name(k.name, 70)} takes {k.share_pct:.1f}% "
                   f"of kernel time ({fmt_us(k.total_us)} in {k.calls:,} calls, median {fmt_us(k.median_us)})",
                   hint,
                   dict(kernel=k.name, share_pct=rounded(k.share_pct), total_us=rounded(k.total_us), calls=k.calls))


def _share_of_roof(t: Tables, kernel: str):
    """The matrix work's share of its roof (%), where ``kernel`` is a GEMM or attention kernel and the matrix
    work bounds the kernels on the compute roof (device_bound's "the arithmetic is the cost"): a faster kernel
    wins at most 100/share; else None."""
    r = t.regime
    if r is None or r.bound != "compute" or r.matrix is None or trace_names.kernel_category(kernel) not in (
            "gemm", "attention"):
        return None
    return r.matrix.pct_of_roof


VIEW_OPS = trace_names.VIEW_OPS


def metadata_only_ops(t: Tables):
    """``aten::t``, ``transpose``, ``view``, ``reshape``, ``as_strided``, ``_unsafe_view``: a new view of the same
    memory, no kernel (0 CUDA time)."""
    rows = [o for o in t.ops if o.name in VIEW_OPS and o.calls_with_device_work == 0]
    if not rows:
        return None
    rows.sort(key=lambda o: -o.calls)
    txt = ", ".join(f"{o.name} ({o.calls:,}x, {fmt_us(o.cpu_total_us)} CPU)" for o in rows[:6])
    tail = "launched no kernel (0 device time)" if t.has_gpu else "(views: no data moved; a CPU trace has no kernels)"
    return Finding("metadata_only_ops", f"metadata-only ops: {txt} {tail}",
                   "views cost only dispatch time; they matter only when called very often",
                   dict(ops={o.name: dict(calls=o.calls, cpu_total_us=rounded(o.cpu_total_us)) for o in rows}))


def matmul_dispatch(t: Tables):
    """``aten::matmul`` → ``aten::mm`` (2D) or ``aten::bmm`` (batched); its kernel launches per call and, apart, how
    many calls also made other runtime calls (a ``cudaMemsetAsync`` is a memset, not a kernel; a cold first call
    sets cuBLAS up); the hint speaks of bmm only where it ran.

    bmm is a batched matmul on 3D+ tensors (P1.10: a leading batch axis); the other runtime calls are a memset, an
    occupancy query, a malloc."""
    kids = t.gemm.op_children["aten::matmul"]
    mm, bmm = kids.get("aten::mm", 0), kids.get("aten::bmm", 0)
    if not mm and not bmm:
        return None
    under = {op: r for op, r in t.gemm.matmul_runtime_calls.items() if kids.get(op) and r.calls}
    parts = []
    if mm:
        parts.append(f"aten::mm {mm}x (2D × 2D)")
    if bmm:
        parts.append(f"aten::bmm {bmm}x (batched, 3D+)")
    rtxt = "".join(f"; per {op} call ({r.calls} in all): {_runtime_said(r)}" for op, r in under.items())
    if bmm:
        launches = under["aten::bmm"].launches / under["aten::bmm"].calls if "aten::bmm" in under else 0
        why = ("one GEMM per batch entry" if not t.has_gpu else
               f"{launches:.3g} kernel launch{'' if launches == 1 else 'es'} per call" if launches else "a batched GEMM")
        hint = (f"bmm is the batched path ({why}): both operands carry the batch axis (aten::matmul folds a 2-D "
                "second operand into one aten::mm)")
    else:
        hint = ("2-D inputs take the plain GEMM path; a leading batch axis on both operands (8 × n × n, Part 1's "
                "experiment) would dispatch aten::bmm")
    return Finding("matmul_dispatch", f"aten::matmul dispatches to {' and '.join(parts)}{rtxt}", hint,
                   dict(mm=mm, bmm=bmm, launches_per_call={op: rounded(r.launches / r.calls, 2) for op, r in under.items()},
                        other_runtime_calls={op: dict(calls_with_them=r.calls_with_others, by_name=r.others)
                                             for op, r in under.items() if r.others}))


def _runtime_said(r) -> str:
    """``1 kernel launch; 3 of the 6 also made 3 cudaMemsetAsync (memsets, not kernels)``."""
    per = r.launches / r.calls
    words = f"{per:.3g} kernel launch{'' if per == 1 else 'es'}"
    if not r.others:
        return words
    named = [f"{n} {name}" for name, n in list(r.others.items())[:3]]
    more = f" and {len(r.others) - 3} other kinds" if len(r.others) > 3 else ""
    memsets = all("memset" in name.lower() for name in r.others)
    return (f"{words}; {r.calls_with_others} of the {r.calls} also made {', '.join(named)}{more}"
            + (" (memsets, not kernels)" if memsets else ""))


def linear_chain(t: Tables):
    """nn.Linear's chain: eager ``aten::linear`` → ``aten::t`` → ``aten::addmm`` (P2.1); compiled ``02_linear`` the
    same ``aten::addmm`` from the compiled graph, no ``aten::linear``, no ``aten::t`` (P2.2).

    ``aten::t`` is a view of the weight (no data moved, no kernel); ``aten::addmm`` is the matmul and the bias in
    one op (no ``aten::add``); the compiled graph passes the weight already laid out."""
    rows = {o.name: o.calls for o in t.ops}
    addmm = rows.get("aten::addmm", 0)
    if not addmm:
        return None
    linear = t.gemm.op_children["aten::linear"]
    if rows.get("aten::linear") and linear.get("aten::addmm"):
        views = [f"{op} {linear[op]}x" for op in ("aten::t", "aten::transpose") if linear.get(op)]
        via = f" -> {', '.join(views)} (a view of the weight: no data moved)" if views else ""
        return Finding("linear_chain", f"nn.Linear's chain (P2.1): aten::linear {rows['aten::linear']}x{via} -> "
                       f"aten::addmm {linear['aten::addmm']}x (the matmul and the bias in one op, no aten::add)",
                       "" if advice.compiled(t) else "--compile it and compare: the same aten::addmm, without "
                       "aten::linear and aten::t (P2.2)",
                       dict(linear=rows["aten::linear"], addmm_in_linear=linear["aten::addmm"],
                            views={op: linear.get(op, 0) for op in ("aten::t", "aten::transpose")}, compiled=False))
    knobs = t.knobs
    if t.compile is None or rows.get("aten::linear") or not t.compile.hashes or not knob_work.linear_lesson(knobs):
        return None  # only 02's trace says its addmm is an nn.Linear (Part 1's compiled matmul + add is one too)
    views = rows.get("aten::t", 0)
    return Finding("linear_chain", f"compiled nn.Linear (P2.2): aten::addmm {addmm}x called from the compiled graph "
                   "(CompiledFxGraph), with no aten::linear and " + (f"{views} aten::t" if views else "no aten::t")
                   + ": the same GEMM op as eager, without the module's wrapper and its transpose view",
                   "the GEMM's work is eager's; what compiling changed is around it (torch_compile's frames)",
                   dict(addmm=addmm, linear=0, views={"aten::t": rows.get("aten::t", 0)}, compiled=True))


def addmm_vs_mm_add(t: Tables):
    """One ``aten::addmm`` vs ``aten::mm`` + ``aten::add``: fusion at the dispatcher level; on the CPU, the bias
    seed ``aten::copy_`` inside ``aten::addmm``, and what a GPU does instead (nn.Linear's 1-D bias in the GEMM
    epilogue, no copy; a full 2-D bias may be copied first).

    The GPU kernel is still the same GEMM, with the bias add folded into its epilogue."""
    ops = {o.name: o for o in t.ops}
    addmm = ops["aten::addmm"].calls if "aten::addmm" in ops else 0
    pairs = t.gemm.mm_add_pairs
    if not addmm and not pairs:
        return None
    from_linear = t.gemm.op_children["aten::linear"].get("aten::addmm", 0)
    # On the CPU, addmm seeds its output with the bias (an aten::copy_ inside it), then the GEMM
    # accumulates onto it. A GPU does something else, and which thing depends on the bias's shape.
    seed_copies = 0 if t.has_gpu else t.gemm.op_children["aten::addmm"].get("aten::copy_", 0)
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
    fold = ("nn.Linear / torch.addmm fold the add into one aten::addmm; already compiled, yet the pairs remain: "
            "find which calls run them (the ops table, the trace)" if advice.compiled(t) else
            "nn.Linear / torch.addmm / torch.compile fold the add into one aten::addmm")
    hint = (fold if pairs else
            "the GEMM is the same work as mm's; compare kernel names between eager and compiled runs")
    return Finding("addmm_vs_mm_add", "; ".join(parts), hint,
                   dict(addmm=addmm, addmm_from_linear=from_linear, mm_add_pairs=pairs, bias_seed_copies=seed_copies))


def gemm_kernels(t: Tables):
    """GEMM names decoded: library, arch, dtype, tile, stages, layout (``tn``/``nn``); on Hopper ``nvjet_sm90_...``
    (tile, k-tile x stages, cluster, flags, layout ``TNT``) and ``cutlass3x_sm90_...``; a ``bias`` flag shows the
    bias in the GEMM's epilogue (P2.1).

    A kernel named like ``ampere_bf16_s16816gemm_...`` or ``nvjet_sm90_tst_...`` is the actual cuBLAS GPU work for a
    matmul; identical names mean identical GPU work (typically the same in eager and compiled mode); a ``bias`` flag
    means one kernel for nn.Linear's matmul + bias."""
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
