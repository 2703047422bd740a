"""On a GPU: who sets the pace (the host's dispatch or the device's work) and what bounds the kernels
(the compute roof or the memory roof), from :mod:`common.report.facts.regime`'s numbers."""

from __future__ import annotations

from common.report.rates import fmt_gbs, fmt_pct, fmt_tflops
from common.report.facts.regime import DEVICE_BOUND_FROM, OVERHEAD_BELOW, Regime, matrix_bound
from common.report.findings import Finding, in_window
from common.report.rules import advice
from common.report.facts.tables import Tables
from common.report.units import fmt_us, rounded

SIXTEEN_BIT = ("bf16", "fp16", "fp8")


def _every_step(t: Tables) -> tuple:
    return in_window(t, [(s.start, s.dur) for s in t.model.steps])


def pace_text(r: Regime) -> str:
    """``the GPU's work takes 1.26 ms per step against the host's 554 µs (median): 228%``."""
    if not r.profiler_steps:
        return (f"the GPU's work takes {fmt_us(r.device_us)} of the {fmt_us(r.wall_us)} window (no ProfilerStep: "
                f"{100 * r.device_share:.0f}%)")
    return (f"the GPU's work takes {fmt_us(r.device_us)} per step against the host's {fmt_us(r.wall_us)} "
            f"(medians over the steps: {100 * r.device_share:.0f}%)")


def kernels_text(r: Regime) -> str:
    """``its kernels are ...-bound: <the numbers that say so>``, or why which roof cannot be told."""
    j = r.matrix
    gemms = ""
    if j is not None and j.bound is not None and j.row.intensity is not None and r.matrix_us > 0:
        rate = (f"{fmt_gbs(j.row.gbs)}, {fmt_pct(j.pct_of_bandwidth)} of the bandwidth" if j.bound == "memory" else
                f"{fmt_tflops(j.row.tflops)}, {fmt_pct(j.pct_of_peak)} of the {j.peak_unit} peak")
        side = "under" if j.bound == "memory" else "above"
        itself = f" ({j.bound}-bound itself)" if r.bound is not None and j.bound != r.bound else ""
        what = (f"the matrix work ({r.pct(r.matrix_us):.0f}%)" if not r.matrix_part else
                f"the matrix work ({r.pct(r.matrix_us):.0f}%), by its largest part ({r.matrix_part}),")
        gemms = (f"{what} has {j.row.intensity:,.0f} FLOP/byte, {side} the {j.peak_unit} ridge point ({j.ridge:,.0f}), "
                 f"and runs at {rate}{itself}")
    if r.bound == "memory":
        memory = (f"{r.pct(r.memory_us):.0f}% of the device time is memory work (copies, elementwise, softmax: "
                  "a few FLOPs per byte)")
        return "its kernels are memory-bandwidth-bound: " + "; ".join(x for x in (memory if r.memory_us else "", gemms) if x)
    if r.bound == "compute":
        return f"its kernels are compute-bound: {gemms}"
    return f"which roof bounds its kernels: cannot tell ({r.why_not})"


def _hint(t: Tables, r: Regime) -> str:
    """The remedy that fits what bounds the kernels, never a dtype the run already uses."""
    if r.bound == "memory":
        return ("move fewer bytes: fuse the passes over memory (" + advice.fuse_ops(t, "torch.compile") +
                ", or one fused kernel that keeps the intermediates on chip, as SDPA's fused backends do for "
                "attention)")
    if r.bound == "compute":
        dtype = r.matrix.peak_unit if r.matrix is not None else ""
        inputs = t.knobs.dtype if t.knobs is not None else ""
        if dtype == "fp32" and inputs in SIXTEEN_BIT:
            return (f"the inputs are {inputs} but the GEMMs run fp32 on CUDA cores (the op casts them up): a "
                    f"path that keeps {inputs} on tensor cores raises the roof")
        if dtype == "fp32":
            return ("the GEMMs run fp32 on CUDA cores: tensor cores raise the roof (bf16/fp16 autocast, or TF32: "
                    "torch.backends.cuda.matmul.allow_tf32 = True)")
        return (f"the arithmetic is the cost, already on {dtype} tensor cores: fewer FLOPs, or the other "
                f"{100 - r.pct(r.matrix_us):.0f}% of the device time, is what is left")
    return "read the kernels' own limits: the launch estimates table (occupancy, blocks per SM) and the roofline"


def _evidence(t: Tables, r: Regime) -> dict:
    bound, _ = matrix_bound(r.matrix)
    return dict(device_us_per_step=rounded(r.device_us), wall_us_per_step=rounded(r.wall_us),
                device_share_pct=rounded(100 * r.device_share), device_bound_from_pct=100 * DEVICE_BOUND_FROM,
                overhead_below_pct=100 * OVERHEAD_BELOW, matrix_pct=rounded(r.pct(r.matrix_us)),
                memory_pct=rounded(r.pct(r.memory_us)), other_pct=rounded(r.pct(r.other_us)),
                kernels_bound=r.bound, matrix_bound=bound, cannot_tell=r.why_not or None,
                self_cpu_us=rounded(t.numbers.cpu.self_cpu_total_us),
                self_device_us=rounded(t.numbers.device.self_device_total_us),
                gpu_busy_pct_of_window=rounded(t.numbers.gpu.busy_pct_of_window, 2))


def device_bound(t: Tables):
    """On a GPU, two questions (``common/report/facts/regime.py``): who sets the pace, device-bound where the work a
    step launched keeps the GPU busy 80% or more of the step's host wall time (medians; between 50% and 80%, neither
    alone, level info); and which roof bounds the kernels: memory where memory work (copies, elementwise, softmax,
    norms: a few FLOPs per byte) holds most of the device time, or the GEMM/attention work (by the roofline's
    intensity against its dtype's ridge point: its op rows together, one figure for all of it, where they share a
    dtype; else its largest row, named) does and sits under the memory roof; compute where that work sits above the
    ridge; "cannot tell" where it reaches under 50% of its roof (under 2 FLOP/byte, as decode's GEMMs: memory
    however far under) or its bytes are unknown. The hint never names a dtype the run already uses.

    GPU busy is not compute-bound: at 80% busy the GPU, not the dispatch, sets the pace, whatever bounds its
    kernels."""
    r = t.regime
    if not t.has_gpu or r is None or r.pace == "overhead":
        return None
    if r.pace == "device":
        head = (f"device-bound: {pace_text(r)}: at {100 * DEVICE_BOUND_FROM:.0f}% or more the GPU, not the host's "
                f"dispatch, sets the pace; {kernels_text(r)}")
        return Finding("device_bound", head, _hint(t, r), _evidence(t, r), spans=_every_step(t))
    head = (f"neither host- nor device-bound: {pace_text(r)}, between {100 * OVERHEAD_BELOW:.0f}% and "
            f"{100 * DEVICE_BOUND_FROM:.0f}%: the GPU idles part of each step; {kernels_text(r)}")
    return Finding("device_bound", head, "both sides count: " + _hint(t, r), _evidence(t, r), level="info",
                   spans=_every_step(t))


def gpu_overhead_bound(t: Tables):
    """Overhead-bound on a GPU: the work a step launched keeps the GPU busy under half of the step's host
    time (medians): the GPU waits on the host's dispatch."""
    r = t.regime
    if r is None or r.pace != "overhead":
        return None
    cpu, dev = t.numbers.cpu.self_cpu_total_us, t.numbers.device.self_device_total_us
    return Finding("overhead_bound", f"overhead-bound: {pace_text(r)}: under {100 * OVERHEAD_BELOW:.0f}% the GPU "
                   f"idles while the host dispatches (Self CPU {fmt_us(cpu)} vs self device {fmt_us(dev)})",
                   advice.joined(["make the work bigger (larger or batched tensors)"]
                                 + ([advice.fuse_ops(t)] if _kernels_per_step(t) > 1 else [])
                                 + [advice.cut_launches(t)]),
                   _evidence(t, r), level="warn", spans=_every_step(t))


def _kernels_per_step(t: Tables) -> float:
    """The median count of kernels a step launched: with one, there is nothing left to fuse."""
    counts = sorted(s.kernels for s in t.step_rows)
    return float(counts[len(counts) // 2]) if counts else 0.0
