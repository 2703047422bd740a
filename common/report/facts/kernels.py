"""The kernels: GPU time by kernel category, and one row per kernel name (TensorBoard's Kernel view) with
its launch estimates and, for the top kernels, its registers, per-step times and decoded name."""

from __future__ import annotations

import numpy as np

from common.report.facts.kernel_footprint import kernel_footprint
from common.report.facts.rows import CategoryRow, KernelDetail, KernelRow
from common.report.model import names as trace_names
from common.report.model.build import CATEGORY_CODES, CATEGORY_KEYS, KERNEL, Model

KERNEL_DETAIL_ROWS = 200  # per-kernel detail (registers, per-step times, decoded name) for the top kernels


def category_table(m: Model) -> tuple[CategoryRow, ...]:
    """GPU time by kernel category (every device event the trace launched: not those launched before it),
    largest first."""
    dev = m.dev
    if not m.has_gpu:
        return ()
    mine = ~dev.outside
    time = np.bincount(dev.category[mine], weights=dev.dur[mine], minlength=len(CATEGORY_CODES))
    count = np.bincount(dev.category[mine], minlength=len(CATEGORY_CODES))
    total = float(dev.dur[mine].sum())
    rows = [CategoryRow(category=c, label=trace_names.CATEGORIES[c], time_us=float(time[i]), count=int(count[i]),
                        pct=100.0 * float(time[i]) / total if total > 0 else 0.0)
            for c, i in CATEGORY_CODES.items() if count[i]]
    return tuple(sorted(rows, key=lambda r: -r.time_us))


def group_stats(group: np.ndarray, values: np.ndarray, groups: int) -> dict:
    """count/total/min/max/median of ``values`` per group id."""
    order = np.lexsort((values, group))
    g, v = group[order], values[order]
    count = np.bincount(g, minlength=groups)
    total = np.bincount(g, weights=v, minlength=groups)
    first = np.concatenate(([0], np.cumsum(count)[:-1]))
    has = count > 0
    low, high, median = np.full(groups, np.nan), np.full(groups, np.nan), np.full(groups, np.nan)
    if v.size:
        low[has] = v[first[has]]
        high[has] = v[first[has] + count[has] - 1]
        median[has] = (v[first[has] + (count[has] - 1) // 2] + v[first[has] + count[has] // 2]) / 2
    return dict(count=count, total=total, min=low, max=high, median=median)


def kernel_table(m: Model) -> tuple[KernelRow, ...]:
    """One row per kernel name by total time (TensorBoard's Kernel view), with launch estimates; the
    kernels the trace launched (one launched before the window is in no row: :mod:`.outside`)."""
    dev = m.dev
    rows_of = np.flatnonzero((dev.kind == KERNEL) & ~dev.outside) if m.has_gpu else np.empty(0, np.int64)
    if not rows_of.size:
        return ()
    dur = dev.dur[rows_of]
    uniq, kernel = np.unique(dev.name[rows_of], return_inverse=True)
    stats = group_stats(kernel, dur, uniq.size)
    total_time = float(dur.sum())
    blocks_per_sm = dev.blocks_per_sm[rows_of]
    estimates = _weighted_per_kernel(kernel, uniq.size, dur, blocks_per_sm, dev.occ[rows_of])
    rows = []
    for g in np.argsort(-stats["total"], kind="stable").tolist():
        name = m.names[int(uniq[g])]
        rows.append(KernelRow(
            name=name, category=CATEGORY_KEYS[int(dev.category[rows_of[kernel == g][0]])], calls=int(stats["count"][g]),
            total_us=float(stats["total"][g]), mean_us=float(stats["total"][g] / stats["count"][g]),
            min_us=float(stats["min"][g]), median_us=float(stats["median"][g]), max_us=float(stats["max"][g]),
            share_pct=100.0 * float(stats["total"][g]) / total_time if total_time > 0 else 0.0,
            **{key: values[g] for key, values in estimates.items()},
            tensor_cores=trace_names.uses_tensor_cores(name),
            detail=_kernel_detail(m, name, rows_of[kernel == g]) if len(rows) < KERNEL_DETAIL_ROWS else None,
            **kernel_footprint(m, rows_of[kernel == g]),
        ))
    return tuple(rows)


def _weighted_per_kernel(kernel: np.ndarray, kernels: int, dur: np.ndarray, blocks_per_sm: np.ndarray,
                         occupancy: np.ndarray) -> dict:
    """Per kernel name, duration-weighted: SM efficiency (blocks per SM capped at 1), blocks per SM and
    occupancy, over the calls that carry the argument (None where none does)."""
    known_blocks, known_occupancy = np.isfinite(blocks_per_sm), np.isfinite(occupancy)

    def weighted(values: np.ndarray, known: np.ndarray) -> list:
        weight = np.bincount(kernel, weights=np.where(known, dur, 0.0), minlength=kernels)
        total = np.bincount(kernel, weights=np.where(known, values * dur, 0.0), minlength=kernels)
        return [float(t / w) if w > 0 else None for t, w in zip(total.tolist(), weight.tolist())]

    efficiency = weighted(np.minimum(np.nan_to_num(blocks_per_sm), 1.0), known_blocks)
    return dict(est_sm_efficiency_pct=[100.0 * e if e is not None else None for e in efficiency],
                mean_blocks_per_sm=weighted(np.nan_to_num(blocks_per_sm), known_blocks),
                est_achieved_occupancy_pct=weighted(np.nan_to_num(occupancy), known_occupancy))


def _kernel_detail(m: Model, name: str, rows: np.ndarray) -> KernelDetail:
    """Registers, shared memory, time and calls per step, and the decoded name of one kernel's calls."""
    dev = m.dev
    registers, shared = dev.regs[rows], dev.smem[rows]
    step = dev.step[rows]
    in_step = step >= 0
    nsteps = len(m.steps)
    gemm, fused = trace_names.decode_gemm(name), trace_names.decode_fused(name)
    return KernelDetail(
        registers_per_thread=float(np.nanmax(registers)) if np.isfinite(registers).any() else None,
        shared_memory_bytes=float(np.nanmax(shared)) if np.isfinite(shared).any() else None,
        per_step_us=tuple(np.bincount(step[in_step], weights=dev.dur[rows][in_step], minlength=nsteps).tolist())
        if nsteps else (),
        per_step_calls=tuple(np.bincount(step[in_step], minlength=nsteps).tolist()) if nsteps else (),
        decoded=(dict(gemm, kind="gemm", text=trace_names.describe_gemm(gemm)) if gemm else
                 dict(fused, kind="fused", text=trace_names.describe_fused(fused)) if fused else None),
    )
