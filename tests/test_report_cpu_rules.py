"""The CPU-side rules of issue "no finding contradicts a post", each both ways on synthetic traces:
overhead- vs compute-bound on the CPU, cold start vs noise (with and without the lesson's knobs),
nn.Linear's bias wording, and --compare by medians."""

from __future__ import annotations

import json

from common.report import analyze
from common.report.compare.judge import compare
from common.report.facts.steadiness import Spread, TwoRuns, first_vs_rest
from conftest import command_env, event, run_module
from test_pictures import verdicts_under


def matmul_add_trace(tmp_path, name, *, step_us, mm_us, add_us=4.0, warmup=None, gap_us=None, flops=None, first=2):
    """Steps of matmul_add -> aten::matmul -> aten::mm (+ resolve_conj), aten::add, CPU only, from
    ProfilerStep#``first`` (2: the default schedule 1,1,N; 0: 0,0,N). ``warmup`` given: the lesson's
    "lesson" metadata says whether the run warmed up."""
    ev = []
    t = 0.0
    for i, (wall, mm) in enumerate(zip(step_us, mm_us)):
        t += (step_us[i - 1] + 1) if i else 0.0  # steps back to back
        gap = (gap_us or [2.0] * len(step_us))[i]
        ev += [event(f"ProfilerStep#{i + first}", t, wall, "user_annotation"),
               event("matmul_add", t + 1, wall - 2, "user_annotation"),
               event("aten::matmul", t + 1 + gap, mm + 1.0), event("aten::mm", t + 1.5 + gap, mm),
               event("aten::resolve_conj", t + 1.6 + gap, 0.1),
               event("aten::add", t + 3 + gap + mm, add_us[i] if isinstance(add_us, list) else add_us)]
    doc = {"traceEvents": ev}
    if warmup is not None:
        doc["lesson"] = {"script": "01_matmul_add", "tag": "64_bf16_x_eager", "shape": [64], "dtype": "bf16",
                         "device": "cpu", "warmup": warmup, "warmup_calls": 3 if warmup else 0, "compile": False,
                         "compile_mode": "default",
                         "schedule": {"wait": first // 2, "warmup": first - first // 2, "active": len(step_us), "repeat": 1},
                         "matmul_flops_per_step": flops}
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def rules(path) -> dict:
    return {f.rule: f for f in analyze(path)[1]}


def test_cpu_overhead_bound_and_compute_bound(tmp_path):
    small = rules(matmul_add_trace(tmp_path, "small.json", step_us=[60, 60, 60], mm_us=[20, 20, 20]))
    ev = small["overhead_bound"].evidence
    assert round(ev["compute_pct"]) == 40 and set(ev["compute_ops"]) == {"aten::mm", "aten::add"}
    assert "compute_bound" not in small and "amortise" in small["hotspot_op"].hint
    big = rules(matmul_add_trace(tmp_path, "big.json", step_us=[25_000] * 3, mm_us=[24_500] * 3))
    assert big["compute_bound"].evidence["compute_pct"] >= 98 and "overhead_bound" not in big
    assert "amortise" not in big["hotspot_op"].hint
    # between the two thresholds, or steps that disagree: no verdict
    mid = rules(matmul_add_trace(tmp_path, "mid.json", step_us=[100] * 3, mm_us=[80] * 3))
    assert "overhead_bound" not in mid and "compute_bound" not in mid
    split = rules(matmul_add_trace(tmp_path, "split.json", step_us=[100] * 3, mm_us=[20, 95, 50]))
    assert "overhead_bound" not in split and "compute_bound" not in split
    assert "disagree" in split["regime_cannot_tell"].message  # steps that disagree: said so, with the shares


def test_a_busy_machine_is_called_too_noisy_not_compute_bound(tmp_path):
    """A 64x64 bf16 matmul that took 20 ms a call (two lessons and other work on 2 cores): the
    arithmetic ran at 26 MFLOP/s, so the trace cannot tell overhead- from compute-bound."""
    flops = 2 * 64 ** 3
    busy = rules(matmul_add_trace(tmp_path, "busy.json", step_us=[20_100] * 3, mm_us=[20_000] * 3, warmup=True,
                                  flops=flops))
    assert "compute_bound" not in busy and "overhead_bound" not in busy
    assert "the machine was busy" in busy["noisy_steps"].message and "OMP_NUM_THREADS=1" in busy["noisy_steps"].hint
    idle = rules(matmul_add_trace(tmp_path, "idle.json", step_us=[60] * 3, mm_us=[25] * 3, warmup=True, flops=flops))
    assert "noisy_steps" not in idle
    ev = idle["overhead_bound"].evidence
    assert ev["median_compute_us"] == 28.9  # aten::mm's self (25 less its resolve_conj child) + aten::add
    # the matmul's FLOPs over aten::mm's time (its resolve_conj child included): the roofline's rate, one per op
    assert ev["matmul_gflops"] == round(flops / 25.0 / 1e3, 2)
    assert "GFLOP/s" in idle["overhead_bound"].message
    assert "the machine was busy" in busy["regime_cannot_tell"].message  # said, not guessed
    assert "regime_cannot_tell" not in idle


def test_an_emulated_dtype_is_slow_not_noisy(tmp_path):
    """A bf16 matmul on a CPU without bf16 instructions runs 50x slower than fp32 (the lesson measured
    it at start, knobs cpu.slowdown): 0.1 GFLOP/s there is the dtype, not a busy machine."""
    flops = 2 * 64 ** 3
    path = matmul_add_trace(tmp_path, "emulated.json", step_us=[5_200] * 3, mm_us=[5_000] * 3, warmup=True, flops=flops)
    doc = json.loads(path.read_text())
    plain = rules(path)
    assert "regime_cannot_tell" in plain and "compute_bound" not in plain
    doc["lesson"]["cpu"] = {"threads": 1, "slowdown": 50.0, "slow_dtype": "bf16"}
    path.write_text(json.dumps(doc))
    emulated = rules(path)
    assert "regime_cannot_tell" not in emulated and "compute_bound" in emulated


def test_a_share_between_the_thresholds_is_neither_said_not_silent(tmp_path):
    """Compute ops at 82% of every step (a 64x64 matmul that bf16's emulation makes slow, found by running the
    suite on the bf16 path): neither overhead- nor compute-bound, said with the share; no regime finding was silence."""
    between = rules(matmul_add_trace(tmp_path, "between.json", step_us=[100] * 3, mm_us=[78] * 3))
    assert "overhead_bound" not in between and "compute_bound" not in between
    f = between["regime_cannot_tell"]
    assert f.message.startswith("neither overhead- nor compute-bound: the compute ops' own work is 8") and f.evidence["between"]
    assert "quieter" not in f.hint  # nothing was noisy


def test_the_fastest_steps_carry_the_verdict(tmp_path):
    """One stalled step (the machine busy for 10 ms inside aten::mm) does not turn an overhead-bound
    run compute-bound: the verdict reads the fastest half of the steps."""
    stalled = rules(matmul_add_trace(tmp_path, "stall.json", step_us=[60, 10_060, 60, 60, 60],
                                     mm_us=[20, 10_020, 20, 20, 20]))
    assert "overhead_bound" in stalled and "compute_bound" not in stalled


def test_cold_first_step_needs_the_first_call_and_a_margin_over_the_noise(tmp_path):
    """A wide #0 of a run that did not warm up (schedule 0,0,N) is the workload's first call: a cold start.
    The same numbers in a run that warmed up, or as #2 after the schedule's unrecorded steps, are the
    profiler's first recorded step: never called cold, never told to warm up, never called noise."""
    cold = rules(matmul_add_trace(tmp_path, "cold.json", step_us=[400, 100, 104], mm_us=[20] * 3, warmup=False, first=0))
    assert cold["cold_first_step"].evidence["ratio"] > 3 and "first call" in cold["cold_first_step"].message
    assert "noisy_steps" not in cold and "first_recorded_step" not in cold
    for name, kw in (("warm.json", dict(warmup=True, first=0)), ("sched.json", dict(warmup=False, first=2)),
                     ("both.json", dict(warmup=True, first=2))):
        f = rules(matmul_add_trace(tmp_path, name, step_us=[400, 100, 104], mm_us=[20] * 3, **kw))
        assert "cold_first_step" not in f and "annotation_gap" not in f and "noisy_steps" not in f, name
        note = f["first_recorded_step"]
        assert "not a cold start" in note.message and note.evidence["kind"] == "profiler's first step"
        assert all("--warmup" not in x.hint and "warm up" not in x.hint for x in f.values()), name
    # no knobs and step #0: nothing says whether the workload ran before the profiler
    unknown = rules(matmul_add_trace(tmp_path, "unknown.json", step_us=[400, 100, 104], mm_us=[20] * 3, first=0))
    assert "cold_first_step" not in unknown and "cannot be told" in unknown["first_recorded_step"].message
    # a first call wider than the median, but no wider than the others vary: too noisy to judge
    noisy = rules(matmul_add_trace(tmp_path, "noisy.json", step_us=[300, 60, 250], mm_us=[20] * 3, warmup=False,
                                   first=0))
    assert "cold_first_step" not in noisy
    assert "no telling its cold start from noise" in noisy["noisy_steps"].message
    # steady steps: neither
    steady = rules(matmul_add_trace(tmp_path, "steady.json", step_us=[62, 60, 61], mm_us=[20] * 3, warmup=False))
    assert not {"cold_first_step", "noisy_steps", "first_recorded_step"} & set(steady)


def test_annotation_gap_only_in_the_first_call(tmp_path):
    kw = dict(step_us=[400, 100, 100], mm_us=[20] * 3, gap_us=[228, 5, 5])
    assert rules(matmul_add_trace(tmp_path, "c.json", warmup=False, first=0, **kw))["annotation_gap"].evidence[
        "gaps_us"]["ProfilerStep#0"] == 228
    assert "annotation_gap" not in rules(matmul_add_trace(tmp_path, "w.json", warmup=True, first=0, **kw))
    after_wait = rules(matmul_add_trace(tmp_path, "s.json", warmup=False, **kw))  # #2: the schedule ran it twice
    assert "annotation_gap" not in after_wait and "waits 228 µs for its first op" in after_wait[
        "first_recorded_step"].message


def test_knobs_are_read_from_the_trace(tmp_path):
    t, _ = analyze(matmul_add_trace(tmp_path, "k.json", step_us=[60] * 3, mm_us=[20] * 3, warmup=True))
    assert t.knobs.warmup and t.knobs.script == "01_matmul_add" and t.knobs.schedule.active == 3
    t, _ = analyze(matmul_add_trace(tmp_path, "n.json", step_us=[60] * 3, mm_us=[20] * 3))
    assert t.knobs is None


def test_linear_wording_fits_part_2(tmp_path):
    ev = []
    for i in range(3):
        t = 1000.0 * i
        ev += [event(f"ProfilerStep#{i + 2}", t, 300, "user_annotation"), event("linear_fwd", t + 1, 290, "user_annotation"),
               event("aten::linear", t + 5, 200), event("aten::t", t + 6, 5), event("aten::addmm", t + 20, 150),
               event("aten::copy_", t + 22, 10)]
    p = tmp_path / "lin.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    f = rules(p)["addmm_vs_mm_add"]
    assert f.evidence == {"addmm": 3, "addmm_from_linear": 3, "mm_add_pairs": 0, "bias_seed_copies": 3}
    assert "rides in the GEMM's epilogue instead, with no copy" in f.message and "DtoD" not in f.message + f.hint


def test_steadiness_helpers():
    assert first_vs_rest([400, 100, 104]).beyond_noise
    assert not first_vs_rest([300, 60, 250]).beyond_noise and first_vs_rest([300, 60, 250]).wider
    assert Spread((45, 6380)).noisy and not Spread((60, 61, 62)).noisy
    assert TwoRuns(Spread((200, 900, 541)), Spread((190, 207, 250))).inside_noise
    assert not TwoRuns(Spread((500, 510, 520)), Spread((200, 210, 220))).inside_noise
    assert "overlap" in TwoRuns(Spread((100, 120)), Spread((110, 130))).why_not_apart
    assert "too noisy" in TwoRuns(Spread((70, 71, 72)), Spread((70, 15_000, 72))).why_not_apart
    assert "1 step" in TwoRuns(Spread((70,)), Spread((170, 171))).why_not_apart


def test_compare_uses_medians_not_means(tmp_path):
    """One outlier step must not flip the lesson (P1.14): eager 100/100/1000 vs compiled 95/110/120 (after
    the profiler's first step, which compare leaves out)."""
    a = matmul_add_trace(tmp_path, "a.json", step_us=[100, 100, 1000, 100], mm_us=[20] * 4)
    b = matmul_add_trace(tmp_path, "b.json", step_us=[95, 95, 110, 120], mm_us=[20] * 4)
    c = compare(analyze(a)[0], analyze(b)[0])
    cpu = c["summary"]["cpu"]
    assert cpu["a_median_us"] == 100 and cpu["b_median_us"] == 110 and round(cpu["ratio"], 2) == 1.1
    assert cpu["inside_noise"] and c["summary"]["device"] is None
    out = run_module("common.report", "--compare", a, b, env=command_env(COLUMNS="80"))
    assert out.returncode == 0, out.stderr
    assert "cannot tell which run is faster: A's steps vary 10.0x" in out.stdout and "1.10x A's" not in out.stdout
    assert "dev A" not in out.stdout


def many_adds_trace(tmp_path, name, *, optimizer: bool):
    """Two steps of 150 aten::add each; with ``optimizer``, an ``Optimizer.step#SGD.step`` annotation per step."""
    ev = []
    for i in range(2):
        t = i * 1000.0
        ev.append(event(f"ProfilerStep#{i}", t, 900, "user_annotation"))
        ev += [event("aten::add", t + 1 + 5 * k, 4) for k in range(150)]
        if optimizer:
            ev.append(event("Optimizer.step#SGD.step", t + 800, 50, "user_annotation"))
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": ev}))
    return path


def test_many_calls_suggests_fused_optimizers_only_where_an_optimizer_stepped(tmp_path):
    inference = rules(many_adds_trace(tmp_path, "infer.json", optimizer=False))["many_calls"]
    training = rules(many_adds_trace(tmp_path, "train.json", optimizer=True))["many_calls"]
    assert inference.evidence["calls_per_step"] == training.evidence["calls_per_step"] == 150
    assert "optimizer" not in inference.hint and "torch.compile" in inference.hint
    assert "foreach/fused optimizers" in training.hint


def test_the_page_shows_each_verdict_under_its_plot(tmp_path):
    """The HTML page prints the console's verdicts beside the plots they judge: the regime, or why it cannot
    be told, under the steps' breakdown; the steps' noise and a cold first step under the spread."""
    flops = 2 * 64 ** 3
    cases = {
        "busy": matmul_add_trace(tmp_path, "busy.json", step_us=[20_100] * 3, mm_us=[20_000] * 3, warmup=True,
                                 flops=flops),
        "split": matmul_add_trace(tmp_path, "split.json", step_us=[100] * 3, mm_us=[20, 95, 50]),
        "idle": matmul_add_trace(tmp_path, "idle.json", step_us=[60] * 3, mm_us=[25] * 3, warmup=True, flops=flops),
        "cold": matmul_add_trace(tmp_path, "cold.json", step_us=[400, 100, 104], mm_us=[20] * 3, warmup=False, first=0),
    }
    shown = {}
    for name, path in cases.items():
        page = tmp_path / f"{name}.html"
        proc = run_module("common.report", path, "--html", page)
        assert proc.returncode == 0, proc.stderr
        found = {f.rule: f.message for f in analyze(path)[1]}
        text = page.read_text()
        steps, spread = verdicts_under(text, "breakdown"), verdicts_under(text, "spread")
        assert steps == {r: m for r, m in found.items() if r in ("overhead_bound", "compute_bound", "regime_cannot_tell")}
        assert spread == {r: m for r, m in found.items() if r in ("noisy_steps", "cold_first_step", "first_recorded_step")}
        shown[name] = set(steps) | set(spread)
    assert shown == {"busy": {"regime_cannot_tell", "noisy_steps"}, "split": {"regime_cannot_tell"},
                     "idle": {"overhead_bound"}, "cold": {"overhead_bound", "cold_first_step"}}
    assert verdicts_under((tmp_path / "busy.html").read_text(), "breakdown")["regime_cannot_tell"].startswith(
        "cannot tell overhead-bound from compute-bound: the matmul ran at")


def test_an_add_is_paired_with_the_matmul_only_when_it_comes_next(tmp_path):
    """A fold needs the add to take the product: the add right after the matmul (views aside) is paired, as
    Part 1's; an add with other work between (the LLM's rotary matmul, then RMSNorm's ``+ eps`` 11 ops
    later, issue 36) is not: the trace holds no tensor identities to say it consumes the product."""
    ev = []
    for i in range(3):
        t = 1000.0 * i
        ev += [event(f"ProfilerStep#{i + 2}", t, 900, "user_annotation"),
               event("forward", t + 1, 890, "user_annotation"),
               event("aten::matmul", t + 10, 50), event("aten::mm", t + 12, 40),  # the next op, past a view: a pair
               event("aten::view", t + 70, 2), event("aten::add", t + 80, 10),
               event("aten::matmul", t + 200, 50), event("aten::bmm", t + 202, 40),  # other work between: none
               event("aten::transpose", t + 260, 2), event("aten::cat", t + 270, 10), event("aten::cos", t + 290, 10),
               event("aten::pow", t + 310, 10), event("aten::mean", t + 330, 10), event("aten::add", t + 350, 10)]
    p = tmp_path / "pairs.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    f = rules(p)["addmm_vs_mm_add"]
    assert f.evidence["mm_add_pairs"] == 3 and "followed by aten::add 3x" in f.message, f.message


def test_the_op_time_spread_is_of_the_typical_step_s_heaviest_op(tmp_path):
    """Issue 37: the README promises aten::mm's time per step over --schedule 0,0,20; one 12 ms spike of
    aten::add made add the heaviest by total, and the finding showed add. The op is the one with the largest
    median own time per step; the spike is a step of its own."""
    adds = [3.0] * 20
    adds[1] = 12_000.0
    walls = [10.0 + a + 12 for a in adds]
    path = matmul_add_trace(tmp_path, "spike.json", step_us=walls, mm_us=[10.0] * 20, add_us=adds, first=0)
    ev = rules(path)["op_time_spread"].evidence
    assert ev["op"] == "aten::mm" and ev["per_step_us"] == [9.9] * 20  # its own time: less resolve_conj's 0.1


def test_a_dispatcher_paused_in_one_call_is_still_a_dispatcher(tmp_path):
    """A busy machine paused one aten::matmul between its hand-off and aten::mm (200 µs of its own time, in
    step #3): it stays a dispatcher (its calls decide together), not a compute op of that step; the size-64
    finding names aten::mm and aten::add only (a CI run read aten::matmul as a compute op)."""
    ev, t = [], 0.0
    for i in range(4):
        pause = 200.0 if i == 1 else 0.0
        wall = 40 + pause
        ev += [event(f"ProfilerStep#{i + 2}", t, wall, "user_annotation"),
               event("matmul_add", t + 1, wall - 2, "user_annotation"),
               event("aten::matmul", t + 2, 12 + pause), event("aten::mm", t + 3 + pause, 10),
               event("aten::add", t + 16 + pause, 4)]
        t += wall + 1
    path = tmp_path / "paused.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    tables, found = analyze(path)
    assert {o.name for o in tables.cpu_work.compute_ops} == {"aten::mm", "aten::add"}
