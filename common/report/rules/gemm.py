"""Matrix multiplies and the dispatch chain: occupancy queries before launches, aten::matmul's
path, addmm against mm + add, the GEMM kernels' names, the hotspot kernel, metadata-only ops."""

from __future__ import annotations

import numpy as np

from common.report import names as trace_names
from common.report.gpus import Gpu, gpu_of
from common.report.model import CATEGORY_CODES, KERNEL, OP, RUNTIME
from common.report.rules import Finding
from common.report.rules.judge import names_of
from common.report.tables import Tables
from common.report.units import fmt_us, rounded


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
    gemm_launches = names_of(t, cpu.name[dev.launch[kj[gemm]]])
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

    queries = names_of(t, cpu.name[(cpu.kind == RUNTIME) & t.model.name_mask(trace_names.is_occupancy_query)[cpu.name]])
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


VIEW_OPS = trace_names.VIEW_OPS


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
