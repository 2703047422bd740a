"""The profiler's first recorded step is not a cold start (issues #25.9, #26.1), a kernel gap says what
the CPU was doing (#25.10), and the per-step figures are medians (#26.5): on the real H100 runs, on real
CPU runs of Part 1's lesson, and on a real trace with one step stretched."""

from __future__ import annotations

import gzip
import json
import re
import statistics

import pytest

from common.report import analyze
from common.report.render.step_series import SpreadRow, buckets_of, spread_title
from common.report.facts.steadiness import COLD, PROFILER, UNKNOWN, first_recorded, steady, typical, Spread
from conftest import run_script, trace_of
from h100 import RUN_NAMES, finding, h100_report

AGREE = 1.03  # device times per step within 3 %


def device_times(name: str) -> list[float]:
    return [r.device_us for r in h100_report(name)[0].step_rows]


def recorded_after_the_workload_ran(name: str) -> bool:
    t = h100_report(name)[0]
    return t.model.steps[0].number > 0 or t.knobs.warmup


# ----------------------------------------------------------------------------- the judgement itself


def test_what_ran_before_says_what_the_first_step_is():
    assert first_recorded(2, 0).kind == PROFILER and first_recorded(2, 0).calls_before == 2  # the default schedule
    assert first_recorded(0, 3).kind == PROFILER  # schedule 0,0,N after --warmup
    assert first_recorded(0, 0).kind == COLD  # schedule 0,0,N, no warm-up: the first call
    assert first_recorded(0, None).kind == UNKNOWN and first_recorded(2, None).kind == PROFILER  # no knobs
    assert steady([193, 67, 60]).values == (67.0, 60.0)  # the first recorded step is left out
    assert not typical(Spread((85.0, 39, 42, 34, 31, 29, 37, 29, 29))).noisy  # one slow step is no noise
    assert typical(Spread((85.0, 39, 92, 34, 31, 29, 37, 29, 29))).noisy


# ----------------------------------------------------------------------------- the H100 runs


@pytest.mark.parametrize("name", [n for n in RUN_NAMES if recorded_after_the_workload_ran(n)])
def test_the_profilers_first_step_is_never_cold_nor_noise_on_the_h100(name):
    """Every H100 run whose workload ran before its first recorded step (the schedule's unrecorded steps,
    --warmup): no cold start, no annotation gap, and no "too noisy" where the device times agree."""
    t, found = h100_report(name)
    rules = {f.rule: f for f in found}
    assert "cold_first_step" not in rules and "annotation_gap" not in rules
    dev = steady(device_times(name))
    if dev.high <= AGREE * dev.low:
        assert "noisy_steps" not in rules, rules["noisy_steps"].message
    note = rules.get("first_recorded_step")
    if note is not None:
        assert note.message.startswith(f"{t.step_label(0)} is the profiler's first recorded step, not a cold start")
        assert "--no-warmup --schedule 0,0," in note.hint
    for f in found:
        assert "warm up" not in f.hint and "run it again with --warmup" not in f.hint, (f.rule, f.hint)


def test_p1_64_warm_and_cold_read_the_same():
    """P1.6/P1.7 on the H100: #2 is wider in the cold run and in the warmed-up one alike; the report says
    why (the profiler's first step; its ops and the annotation's gap longer) and that the device agrees."""
    for name in ("p1_64", "p1_64_warm"):
        note = finding(name, "first_recorded_step")
        assert note.evidence["first_step"] == "ProfilerStep#2" and note.evidence["ratio"] > 2
        assert "aten::mm" in note.message and "'matmul_add' waits" in note.message
        assert "the device time per step agrees" in note.message


@pytest.mark.parametrize("name", ["p1_64_wait0", "p1_64_active20"])
def test_the_real_cold_start_is_step_0_of_a_cold_wait0_run(name):
    """--schedule 0,0,N without --warmup records the first call: #0 is 500-1,500x the others, most of it in
    aten::mm's own time, with one-time work no other step has (module loading, attribute setup)."""
    cold = finding(name, "cold_first_step")
    assert cold.evidence["first_step"] == "ProfilerStep#0" and cold.evidence["ratio"] > 100
    assert "aten::mm" in cold.message and "in no other step" in cold.message
    assert "first_recorded_step" not in {f.rule for f in h100_report(name)[1]}


def test_kernel_gap_names_the_cpus_late_launch():
    """#25.10: in the cold 0,0,20 run the 12 ms gap is the first aten::add on the CPU (lazy loading of its
    kernel), in Liger the Triton kernel's late launch from LigerGELUMulFunction: not a buffer request."""
    gap = finding("p1_64_active20", "kernel_gap")
    assert gap.evidence["launching_op"] == "aten::add" and gap.evidence["launch"] == "cudaLaunchKernel"
    assert max(gap.evidence["cpu_during_gap"], key=gap.evidence["cpu_during_gap"].get) == "aten::add"
    assert "the GPU waited for the CPU" in gap.message and "buffer request" not in gap.hint.replace("nor the", "")
    liger = finding("liger", "kernel_gap")
    assert liger.evidence["launching_op"] == "LigerGELUMulFunction"
    assert liger.evidence["launched_into_gap_us"] > 40
    assert "_geglu_tanh_forward_kernel" in liger.message


# ----------------------------------------------------------------------------- real CPU runs of Part 1


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory):
    out = {}
    for key, args in (("warm", ["--warmup", "--schedule", "1,1,5"]), ("cold_sched", ["--schedule", "0,0,10"])):
        run = run_script("01_matmul_add.py", "--size", "64", "--no-report", *args,
                         trace_dir=tmp_path_factory.mktemp(key))
        out[key] = trace_of(run)
    return out


def test_a_warm_cpu_run_gets_no_warm_up_advice(cpu_runs):
    found = analyze(cpu_runs["warm"])[1]
    rules = {f.rule: f for f in found}
    assert "cold_first_step" not in rules and "annotation_gap" not in rules
    for f in found:
        assert "--warmup" not in f.hint and "warm up" not in f.hint, (f.rule, f.hint)
        assert "cold first step" not in f.message and "cold-start tax" not in f.hint
    if "first_recorded_step" in rules:
        assert "not a cold start" in rules["first_recorded_step"].message


def test_a_cold_wait0_cpu_run_shows_the_real_cold_start(cpu_runs):
    """The cold start is named; where the machine was busy enough that the other steps (one stall left
    out) vary as much as the first step's extra, the report says it cannot tell, and the steps show why."""
    t, found = analyze(cpu_runs["cold_sched"])
    rules = {f.rule: f for f in found}
    assert "first_recorded_step" not in rules
    durs = [s.dur for s in t.model.steps]
    others = sorted(durs[1:])[:-1]  # one slow step of nine is an outlier
    if "cold_first_step" not in rules:
        assert durs[0] - others[-1] <= max(others[-1] - others[0], 5.0), durs  # inside the noise, truly
        if durs[0] >= 1.5 * statistics.median(durs[1:]) + 5:  # wider than the others' median: said
            assert "no telling its cold start from noise" in rules["noisy_steps"].message
        return
    cold = rules["cold_first_step"]
    assert cold.evidence["first_step"] == "ProfilerStep#0" and "aten::mm" in cold.message


def test_one_stalled_step_does_not_hide_the_cold_start(tmp_path):
    """A busy machine's time slice stalls one step past the cold start: the cold start is still named, and
    the stall with it; two stalls are noise, and the report cannot tell the cold start from them."""
    cold_run = "tests/data/h100/runs/p1_64_active20/64_bf16_cold_eager_sched-0-0-20.json.gz"
    once = stretched(cold_run, tmp_path / "once.json", "aten::mm", "ProfilerStep#7", 100_000)
    rules = {f.rule: f for f in analyze(once)[1]}
    cold = rules["cold_first_step"]
    assert cold.evidence["stall_us"] > cold.evidence["first_us"]
    assert ("(they range 51 µs to 241 µs, but for #7, which stalled at 100.05 ms: one slow step of 19, an outlier "
            "(a busy machine's time slice), not the others' noise; #0 may hold such a stall too)") in cold.message
    assert "no telling" not in rules.get("noisy_steps", cold).message and "annotation_gap" in rules

    twice = stretched(once, tmp_path / "twice.json", "aten::mm", "ProfilerStep#12", 100_000)
    rules = {f.rule: f for f in analyze(twice)[1]}
    assert "cold_first_step" not in rules and "annotation_gap" not in rules
    assert "#0 (the workload's first call) is " in rules["noisy_steps"].message
    assert "but they vary as much: no telling its cold start from noise" in rules["noisy_steps"].message


# ----------------------------------------------------------------------------- one outlier step


def stretched(src, dst, name: str, step: str, extra_us: float):
    """``src`` with the first ``name`` inside ``step`` lasting ``extra_us`` longer: the events around it
    grow and the later ones move (a real trace with one slow call)."""
    opener = gzip.open if str(src).endswith(".gz") else open
    with opener(src, "rt") as f:
        doc = json.load(f)
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    holder = next(e for e in events if e["name"] == step)
    target = next(e for e in events if e["name"] == name and holder["ts"] <= e["ts"] <= holder["ts"] + holder["dur"])
    end = target["ts"] + target["dur"]
    for e in doc["traceEvents"]:
        if e is target or "ts" not in e:
            continue
        if e["ts"] >= end:
            e["ts"] += extra_us
        elif e.get("ph") == "X" and e["ts"] <= target["ts"] and e["ts"] + e["dur"] >= end:
            e["dur"] += extra_us
    target["dur"] += extra_us
    dst.write_text(json.dumps(doc))
    return dst


def test_per_step_figures_are_medians_with_one_outlier_step(cpu_runs, tmp_path):
    """#26.5: one 6 ms call in one step is not the typical cost: the hotspot's per-step figure and the
    dispatch holders' are medians; the hotspot says which step carries its total."""
    base = {f.rule: f for f in analyze(cpu_runs["warm"])[1]}
    op = base["hotspot_op"].evidence["op"] if "hotspot_op" in base else "aten::mm"  # a busy run's may be aten::add
    path = stretched(cpu_runs["warm"], tmp_path / "outlier.json", op, "ProfilerStep#3", 6000)
    rules = {f.rule: f for f in analyze(path)[1]}
    hot = rules["hotspot_op"]
    assert hot.evidence["op"] == op and hot.evidence["self_cpu_us_per_step"] < 1000 < hot.evidence["self_cpu_us"]
    assert "medians over" in hot.message and "#3's" in hot.message and "outlier" in hot.message
    path = stretched(cpu_runs["warm"], tmp_path / "dispatch.json", "aten::resolve_conj", "ProfilerStep#3", 6000)
    rules = {f.rule: f for f in analyze(path)[1]}
    regime = rules.get("overhead_bound") or rules.get("regime_cannot_tell") or rules.get("compute_bound")
    if "dispatch_per_step_us" in regime.evidence:
        assert regime.evidence["dispatch_per_step_us"].get("aten::resolve_conj", 0) < 100
    assert "hotspot_op" not in base or base["hotspot_op"].evidence["self_cpu_us_per_step"] < 1000


def test_compile_frames_per_step_is_a_median(tmp_path):
    """02_linear --compile on the H100 with one 6 ms TorchDynamo Cache Lookup (the CPU run of #26.5 had
    one): the frames' own CPU time per step stays the typical step's, not the outlier's third."""
    from h100 import h100_trace

    before = finding("linear_compile", "torch_compile").evidence["frames_self_us_per_step"]
    path = stretched(h100_trace("linear_compile"), tmp_path / "lookup.json", "TorchDynamo Cache Lookup",
                     "ProfilerStep#3", 6000)
    after = {f.rule: f for f in analyze(path)[1]}["torch_compile"].evidence["frames_self_us_per_step"]
    assert before < 1000 and after < 1000  # the mean would be over 2 ms: 6 ms over three steps


def test_spread_title_says_what_the_series_show():
    """#26.8: steps at 0.96/1.00/1.08 of their median pull no mean away; one 10x step does."""
    def row(values):
        import numpy as np

        v = np.array(values, dtype=float)
        return SpreadRow("steps (wall)", "w", v.size, float(v.mean()), float(np.median(v)), tuple(values),
                         buckets_of(v.size, 100, "x"))

    assert "within 1% of the median" in spread_title([row([96, 100, 108])])
    assert "pull the mean (dashed) away from the median in steps (wall)" in spread_title([row([100, 100, 1000])])
    assert "in steps (wall) (its first step alone)" in spread_title([row([300, 100, 104])])


def test_a_long_stretch_with_no_op_is_not_called_dispatch(cpu_runs, tmp_path):
    """#26.8: at Part 3's shapes on the CPU, 10-270 ms pass between ops while large tensors are freed; a
    step's time with no op running for milliseconds is named as such, not as dispatch."""
    path = cpu_runs["warm"]
    steps = [e["name"] for e in json.loads(path.read_text())["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    for i, step in enumerate(steps):  # every step's annotation runs 5 ms past its last op
        path = stretched(path, tmp_path / f"gap{i}.json", "matmul_add", step, 5000)
    rules = {f.rule: f for f in analyze(path)[1]}
    regime = rules["overhead_bound"]
    no_op_ms = float(re.search(r"mostly not dispatch: no op runs for ([\d.]+) ms", regime.message).group(1))
    assert 5.0 <= no_op_ms < 6.0, regime.message  # the 5 ms added, and the run's own (a busy machine's) pauses
    assert "--profile-memory shows the frees" in regime.message
    plain = {f.rule: f for f in analyze(cpu_runs["warm"])[1]}
    assert "mostly not dispatch" not in " ".join(f.message for f in plain.values())


def test_a_slow_matmul_in_the_profilers_first_step_is_no_busy_machine(tmp_path):
    """A CI run of Part 1's default (3 steps): the profiler's first recorded step held a 4.12 ms aten::mm, the
    others 21 µs. Over every step the matmul ran at 0.38 GFLOP/s, under any CPU's, and the report said
    the machine was busy and called no regime; the steps the verdict reads are the others."""
    cpu_64 = "tests/data/lessons_cpu/01_matmul_add/64_bf16_cold_eager.json.gz"
    path = stretched(cpu_64, tmp_path / "slow_first.json", "aten::mm", "ProfilerStep#2", 4100)
    rules = {f.rule: f for f in analyze(path)[1]}
    assert "regime_cannot_tell" not in rules and "noisy_steps" not in rules
    assert rules["first_recorded_step"].evidence["first_us"] > 4100
    assert "378 MFLOP/s over their ops' CPU time (3 steps" in rules["roofline"].message  # as in that CI run
    assert ("the matmul arithmetic ran at 31 GFLOP/s in the median step (378 MFLOP/s over every step, the "
            "roofline's)") in rules["overhead_bound"].message
