"""Every rule, in the order of the report's findings (:data:`RULES`), and the loop that runs them
(:func:`run_rules`). A new rule is one line here, beside its theme's module (docs/report.md, "Adding a rule").
"""

from __future__ import annotations

import os

from common.report.findings import Finding
from common.report.rules import arch, attention, bandwidth, copies, first_step, gemm, generated_code, guess, hand_written
from common.report.rules import memory
from common.report.rules import compile as compiled
from common.report.rules import lag, overhead, phases, regime, roofline, timeline, trace

RULES: list = [
    trace.no_device_lane,
    trace.no_steps,
    trace.large_trace,
    overhead.overhead_bound,
    overhead.compute_bound,
    regime.device_bound,
    lag.gpu_behind_host,
    bandwidth.memory_bandwidth,
    overhead.regime_cannot_tell,
    gemm.hotspot_kernel,
    overhead.hotspot_op,
    overhead.many_calls,
    overhead.children_heavy,
    first_step.cold_first_step,
    first_step.first_recorded_step,
    timeline.noisy_steps,
    timeline.annotation_gap,
    gemm.occupancy_query,
    timeline.long_final_sync,
    copies.hidden_dtod_copy,
    timeline.activity_buffer_request,
    timeline.kernel_gap,
    timeline.kernel_time_spread,
    timeline.op_time_spread,
    timeline.buffer_request_gpu_only,
    gemm.metadata_only_ops,
    gemm.matmul_dispatch,
    gemm.addmm_vs_mm_add,
    gemm.linear_chain,
    compiled.torch_compile,
    compiled.recompiles,
    compiled.fused_kernels,
    hand_written.hand_written_kernels,
    gemm.gemm_kernels,
    roofline.roofline,
    phases.overhead_bound_phase,
    phases.llm_decode_chain,
    compiled.cuda_graphs,
    compiled.recompiled_before_window,
    guess.guess_vs_seen,
    attention.out_of_place_copy,
    attention.fp32_upcast,
    attention.causal_mask_rebuilt,
    attention.safe_softmax,
    attention.fused_attention,
    arch.kernel_arch,
    attention.sdpa_cpu_in_library,
    memory.attention_scores_memory,
    memory.kv_cache_growth,
    generated_code.generated_code,  # last: the next step, from the trace to the code
]

STRICT_ENV = "REPORT_STRICT_RULES"  # set (to anything but "" or "0"): a rule that crashes raises (the tests set it)


def run_rules(t) -> list[Finding]:
    """Every rule over the tables (:class:`~common.report.facts.tables.Tables`). A rule that trips on an odd
    trace reports itself as a ``rule_error`` finding and the others run; with REPORT_STRICT_RULES=1 it
    raises instead."""
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
