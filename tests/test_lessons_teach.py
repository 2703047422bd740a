"""The lessons teach the posts right on the CPU: what the scripts and the report say fits the post
the reader has open (names of experiments, cold start vs noise, overhead- vs compute-bound,
nn.Linear's bias, medians in comparisons, commands that work where the reader stands)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shlex
import statistics
import subprocess
from pathlib import Path

import pytest

from common.paths import parse_tag
from conftest import CPU_DTYPE, CPU_DTYPE_EMULATED, DATA_TRACES, REPO, Trace, command_env, report_json, run_module, run_script, trace_of as trace


def findings(path: Path) -> dict[str, dict]:
    return {f["rule"]: f for f in report_json(path)["findings"]}


# ----------------------------------------------------------------------------- 1. names


def test_experiments_do_not_overwrite_the_default_run(runs):
    """A default run keeps the post's name; an experiment's knobs are in its own name, read back."""
    default = trace(runs["01_default"]).name
    experiment = trace(runs["01_cold_sched"]).name
    shaped = trace(runs["01_gzip"]).name
    assert default == f"64_{CPU_DTYPE}_cold_eager.json"
    assert experiment == f"64_{CPU_DTYPE}_cold_eager_sched-0-0-20.json"
    assert shaped == "16_fp32_warm_eager_sched-0-0-4_shapes.json.gz"
    assert parse_tag(default).variants == ()
    assert parse_tag(experiment).variant("sched") == "0-0-20"
    tag = parse_tag(shaped)
    assert (tag.shape, tag.dtype, tag.warm, tag.variants) == ((16,), "fp32", True, (("sched", "0-0-4"), ("shapes", "")))


def test_the_trace_carries_the_runs_knobs(runs):
    """The lesson writes its knobs into the trace's top-level metadata, for the report."""
    with open(trace(runs["01_cold_sched"])) as f:
        knobs = json.load(f)["lesson"]
    assert knobs["script"] == "01_matmul_add" and knobs["warmup"] is False and knobs["shape"] == [64]
    assert knobs["schedule"] == {"wait": 0, "warmup": 0, "active": 20, "repeat": 1}
    # the machine probe, timed before the profiler started: the control of a comparison that shares no work
    probe = knobs["probe"]
    assert probe["work"].startswith("Python ") and "loop" in probe["work"]
    assert len(probe["us"]) == 7 and all(us > 100 for us in probe["us"])
    assert len(probe["after"]) == 7 and all(us > 100 for us in probe["after"])  # timed again once it stopped
    with gzip.open(trace(runs["01_gzip"]), "rt") as f:  # written into a gzipped trace too
        assert len(json.load(f)["lesson"]["probe"]["after"]) == 7
    with open(trace(runs["02_eager"])) as f:
        assert json.load(f)["lesson"]["warmup"] is True  # 02 warms up by default


def test_the_environment_sets_the_default_cpu_dtype(tmp_path):
    """LESSONS_CPU_DTYPE (the suite's switch to the other CPU's path) sets the dtype of a run without --dtype:
    its file name, its knobs and a console line that says where the dtype came from; --dtype still wins."""
    other = "fp32" if CPU_DTYPE == "bf16" else "bf16"
    env = {"LESSONS_CPU_DTYPE": other}
    run = run_script("01_matmul_add.py", "--size", "16", "--schedule", "0,0,1", trace_dir=tmp_path, env=env)
    assert trace(run).name == f"16_{other}_cold_eager_sched-0-0-1.json"
    assert f"dtype   {other} (LESSONS_CPU_DTYPE)" in run.stdout
    cpu = json.loads(trace(run).read_text())["lesson"]["cpu"]
    assert cpu["dtype_from_env"] is True and cpu["dtype_given"] is False
    given = run_script("01_matmul_add.py", "--size", "16", "--schedule", "0,0,1", "--dtype", CPU_DTYPE,
                       trace_dir=tmp_path, env=env)
    assert trace(given).name == f"16_{CPU_DTYPE}_cold_eager_sched-0-0-1.json" and "LESSONS_CPU_DTYPE" not in given.stdout


# ----------------------------------------------------------------------------- 2. cold start vs noise


@pytest.mark.parametrize("key", ["01_warm", "02_eager", "01_compile", "03_compile", "01_2048"])
def test_warm_runs_never_get_the_warm_up_advice(runs, key):
    f = findings(trace(runs[key]))
    assert "cold_first_step" not in f and "annotation_gap" not in f
    for finding in f.values():
        assert "warm up" not in finding["hint"] and "--warmup" not in finding["hint"]
    assert "warm up" not in runs[key].stdout.lower().replace("warm-up on", "")


@pytest.mark.parametrize("key", ["01_compile", "02_compile", "03_compile", "04c_compile"])
def test_compiled_runs_never_get_the_compile_advice(runs, key):
    """--compile: no hint tells the run to try torch.compile; where a pattern still shows (size 64 is
    overhead-bound compiled or not), the hint says what to look at in the compiled run instead."""
    f = findings(trace(runs[key]))
    assert f, "the report found nothing to check"
    for finding in f.values():
        assert "torch.compile" not in finding["hint"], (finding["rule"], finding["hint"])
    if "overhead_bound" in f:
        assert "already compiled" in f["overhead_bound"]["hint"]


def test_a_cold_run_shows_its_cold_start_in_step_0(runs):
    """--schedule 0,0,20 without --warmup: step #0 is the workload's very first call, the real cold start
    (P1.6); the hint says where the default schedule and --warmup put it. The default schedule's cold run
    (01_default) has no cold start to show: the first call ran in the unrecorded #0. On a busy machine the
    other steps may vary as much as #0: then the report says it cannot tell, and gives no advice."""
    out = " ".join(runs["01_cold_sched"].stdout.split())
    assert "first recorded step #0 is the workload's first call" in out
    f = findings(trace(runs["01_cold_sched"]))
    if "cold_first_step" in f:
        cold = f["cold_first_step"]
        assert cold["evidence"]["first_step"] == "ProfilerStep#0" and cold["evidence"]["warmed_up"] is False
        assert "wait step" in cold["hint"] and "--warmup" in cold["hint"]
        assert "cold start: #0 is the workload's first call" in out
    else:  # the run's own steps say why: too noisy to tell
        assert "noisy_steps" in f, sorted(f)
        assert all("--warmup" not in finding["hint"] for finding in f.values())
    default = findings(trace(runs["01_default"]))
    assert "cold_first_step" not in default and "annotation_gap" not in default
    assert all("--warmup" not in x["hint"] for x in default.values())


# ----------------------------------------------------------------------------- 4. overhead- vs compute-bound


def test_size_64_is_overhead_bound_on_the_cpu(runs):
    if CPU_DTYPE_EMULATED:  # LESSONS_CPU_DTYPE=bf16 on a CPU without bf16 matmuls
        pytest.skip("an emulated bf16 64x64 matmul takes about 200 µs, as long as the dispatch around it: the "
                    "share of compute was 72% in one run, past 75% in another, and the verdict goes with it")
    f = findings(trace(runs["01_default"]))
    assert "compute_bound" not in f
    busy = f.get("regime_cannot_tell", {}).get("evidence", {})
    if "overhead_bound" not in f and busy.get("median_step_matmul_gflops", 1e9) < busy.get("plausible_floor_gflops", 0):
        assert "the machine was busy" in f["regime_cannot_tell"]["message"]  # its median step's matmul says so
        return
    ev = f["overhead_bound"]["evidence"]
    assert ev["compute_pct"] < 75 and set(ev["compute_ops"]) == {"aten::mm", "aten::add"}
    assert "aten::matmul" not in ev["compute_ops"]  # a dispatcher: its time is the hand-off to aten::mm
    assert "bigger" in f["overhead_bound"]["hint"]
    assert re.search(r"\d+% is dispatch", f["overhead_bound"]["message"])


def test_size_2048_warm_is_compute_bound_on_the_cpu(runs):
    f = findings(trace(runs["01_2048"]))
    ev = f["compute_bound"]["evidence"]
    assert "overhead_bound" not in f
    assert ev["compute_pct"] >= 90 and ev["compute_ops"]["aten::mm"]["per_call_us"] > 1000
    assert "amortise" not in f["hotspot_op"]["hint"]  # the hint fits the evidence: the work itself is the cost


# ----------------------------------------------------------------------------- 5. nn.Linear's bias


def test_eager_linear_is_not_told_it_copies_on_a_gpu(runs):
    f = findings(trace(runs["02_eager"]))["addmm_vs_mm_add"]
    assert f["evidence"]["addmm"] == 3 and f["evidence"]["addmm_from_linear"] == 3
    assert "rides in the GEMM's epilogue instead, with no copy" in f["message"]
    assert "on the CPU each addmm first copies" in f["message"]
    assert "Memcpy DtoD" not in f["message"] and "DtoD" not in f["hint"]


# ----------------------------------------------------------------------------- 3. compare medians


def test_compare_reports_medians_and_the_noise(runs):
    a, b = trace(runs["01_default"]), trace(runs["01_warm"])
    cpu = report_json("--compare", a, b)["summary"]["cpu"]
    walls_a = sorted(s["wall_us"] for s in report_json(a)["steps"][1:])  # the profiler's first step left out
    assert cpu["a_median_us"] == pytest.approx((walls_a[0] + walls_a[1]) / 2, abs=1e-3)
    assert cpu["a_range_us"] == pytest.approx(walls_a, abs=1e-3)
    assert isinstance(cpu["inside_noise"], bool) and cpu["judged"] == (not cpu["inside_noise"])
    text = run_module("common.report", "--compare", a, b, env=command_env(COLUMNS="80")).stdout
    text = " ".join(text.split())
    assert "median" in text and "mean" not in text and cpu["verdict"] in text
    ratio_told = re.search(r"B's median is [\d.]+x A's|B/A [\d.]+x at the nearest \([AB]'s steps vary", text)
    assert ("cannot tell" in cpu["verdict"]) == cpu["inside_noise"] != bool(ratio_told)  # a noisy run: the nearest steps'


# ----------------------------------------------------------------------------- 7. commands from another folder


def test_printed_commands_work_from_another_folder(tmp_path):
    """`uv run --project DIR DIR/01_matmul_add.py` from elsewhere: the traces land here, and the
    printed report/view commands run from here."""
    proc = run_script("01_matmul_add.py", "--size", "16", "--no-report", cwd=tmp_path, env={"COLUMNS": "300"})
    assert proc.returncode == 0, proc.stderr
    assert proc.files() == [f"16_{CPU_DTYPE}_cold_eager.json", f"16_{CPU_DTYPE}_cold_eager.txt"]  # under tmp_path/traces
    view = next(line.strip() for line in proc.stdout.splitlines() if "common.view" in line)
    words = shlex.split(view)
    assert words[:4] == ["uv", "run", "--project", os.path.relpath(REPO, tmp_path)] or words[3] == str(REPO)
    assert words[-1] == f"traces/01_matmul_add/16_{CPU_DTYPE}_cold_eager.json"
    report_cmd = words[:-2] + ["common.report", words[-1], "--short"]  # the printed command, as the reader types it
    ran = subprocess.run(report_cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)  # `uv run ...` itself
    assert ran.returncode == 0, ran.stderr
    assert f"trace report traces/01_matmul_add/16_{CPU_DTYPE}_cold_eager.json" in ran.stdout
    listing = subprocess.run(words[:-1] + ["--list"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert listing.returncode == 0 and f"traces/01_matmul_add/16_{CPU_DTYPE}_cold_eager.json" in listing.stdout


# ----------------------------------------------------------------------------- 8. 80 columns


def _tables_truncated(text: str) -> list[str]:
    """Header lines of rich tables that were cut (an ellipsis inside a ┃ or a box-less header)."""
    return [line for line in text.splitlines() if "┃" in line and "…" in line]


def _run80(module: str, *args: str, cwd: Path = REPO) -> str:
    proc = run_module(module, *args, cwd=cwd, env=command_env(COLUMNS="80", PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr
    # every line fits, but the timeline snippet's T=PATH: a long path stays whole there, so the line copies
    assert all(len(line) <= 80 for line in proc.stdout.splitlines() if not line.startswith("  T=")), proc.stdout
    return proc.stdout


@pytest.mark.parametrize("which", ["cpu", "gpu", "compiled"])
def test_report_reads_at_80_columns(runs, which):
    path = {"cpu": trace(runs["01_default"]), "compiled": trace(runs["03_compile"]),
            "gpu": DATA_TRACES / "kineto/v100_resnet50_train.json.gz"}[which]
    out = _run80("common.report", str(path))
    assert not _tables_truncated(out), out
    if which == "compiled":  # Inductor's fused kernel is named whole, on one line, wherever it is named
        lines = [line for line in out.splitlines() if "fused" in line]
        assert lines and all("graph_0_cpp_fused__unsafe_view_gelu_mul_0" in line for line in lines
                             if "cpp_fused" in line or "_unsafe_view_gelu" in line), lines
    if which == "cpu":  # no columns or rows a CPU trace cannot fill
        headers = " ".join(line for line in out.splitlines() if "┃" in line)
        assert "device time" not in headers and "GPU busy" not in headers and "self device" not in headers
        assert "compute" in headers and "│ memcpy" not in out


def test_compare_reads_at_80_columns(runs):
    out = _run80("common.report", "--compare", str(DATA_TRACES / "hta/v100_ddp_rank1.json.gz"),
                 str(DATA_TRACES / "hta/a100_rank3.json.gz"))
    assert not _tables_truncated(out) and "dev A" in out and "device work per step" in out
    head = [line for line in out.splitlines() if "step" in line and "CPU A" in line]
    assert head and "…" not in head[0]


def test_list_reads_at_80_columns(runs):
    root = runs["01_cold_sched"].trace_dir
    out = _run80("common.view", "--list", root.name, cwd=root.parent)  # paths relative to where you stand
    lines = [line.strip() for line in out.splitlines()]
    assert f"{root.name}/64_{CPU_DTYPE}_cold_eager_sched-0-0-20.json" in lines  # whole, on one line, to copy
    assert f"{root.name}/64_{CPU_DTYPE}_cold_eager_sched-0-0-20.annotated.json" in lines
    assert f"size 64, {CPU_DTYPE}, cold, eager; sched-0-0-20" in out


# ----------------------------------------------------------------------------- 9. noise on stderr


def test_the_lessons_stderr_is_quiet(runs):
    """torch's warm-up warning (the posts' wait=0, warmup=0 experiment) and the CPU-only CUDA
    notice are explained on the console, not dumped on stderr."""
    for key in ("01_cold_sched", "01_compile", "03_compile"):
        assert runs[key].stderr.strip() == "", runs[key].stderr
    assert "schedule warmup=0" in runs["01_cold_sched"].stdout
    assert re.search(r"the outputs match: the largest difference, .+, is .+% of the largest output value",
                     runs["01_compile"].stdout.replace("\n", " "))


# ----------------------------------------------------------------------------- 6. share


def test_share_checks_the_login_before_the_run(tmp_path):
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": "", "HUGGING_FACE_HUB_TOKEN": ""}
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("HF_")}, **env}
    env.pop("HF_TOKEN")
    env.pop("HUGGING_FACE_HUB_TOKEN")
    run = run_script("01_matmul_add.py", "--size", "16", "--share", "my-bucket", trace_dir=tmp_path / "out", env=env)
    assert run.returncode == 2 and "not logged in" in run.stderr and run.stderr.count("\n") == 1
    assert run.files() == [] and "profil" not in run.stdout  # refused before anything ran


# ----------------------------------------------------------------------------- 5. the posts' CPU findings


def test_twenty_steps_show_the_op_time_spread(runs):
    """P1.14 on the CPU (--schedule 0,0,20): aten::mm's own time in each of the 20 steps, as the trace holds
    it, with its median and mean; the verdict follows from them (a few slow steps carry the mean, or the
    steps agree). A 3-step run shows no spread."""
    path = trace(runs["01_cold_sched"])
    ev = findings(path)["op_time_spread"]["evidence"]
    t = Trace(path)
    own = []
    for step in t.steps:  # aten::mm's self time: its duration less its child ops' (resolve_conj, not nested deeper)
        (mm,) = t.inside(step, "aten::mm")
        kids = [e for e in t.inside(mm) if e.get("cat") == "cpu_op"]
        assert {e["name"] for e in kids} <= {"aten::resolve_conj"}
        own.append(mm["dur"] - sum(e["dur"] for e in kids))
    assert ev["op"] == "aten::mm" and ev["calls_per_step"] == 1 and len(ev["per_step_us"]) == 20
    assert ev["per_step_us"] == pytest.approx(own, abs=0.06)  # the evidence is rounded to 0.1 µs
    assert ev["median_us"] == pytest.approx(statistics.median(own), abs=0.06)
    assert ev["mean_misleads"] == (statistics.fmean(own) > 1.2 * statistics.median(own))
    for key in ("01_default", "01_warm"):
        assert "op_time_spread" not in findings(trace(runs[key]))


def test_cold_schedule_on_the_cpu_says_why_no_buffer_request(runs):
    """P1.8: the Activity Buffer Request is a GPU-lane event; a CPU run of wait=0, warmup=0 says so, and what
    its cold window does show (the cold first step, when the report finds one)."""
    f = findings(trace(runs["01_cold_sched"]))
    note = f["buffer_request_gpu_only"]
    assert note["level"] == "note" and "GPU lane" in note["message"] and "activity_buffer_request" not in f
    assert note["evidence"]["cold_first_step"] == ("cold_first_step" in f)
    assert "buffer_request_gpu_only" in runs["01_cold_sched"].stdout
    for key in ("01_default", "01_warm", "02_eager"):  # the default schedule waits and warms up
        assert "buffer_request_gpu_only" not in findings(trace(runs[key]))


def test_compile_frames_cost_per_step_on_the_console(runs):
    """P1.18: a compiled single op's frames cost CPU on every step: their own time per step (from the trace's
    self times), beside the compute ops' own work, in the report the lesson prints."""
    path = trace(runs["01_compile"])
    report = report_json(path)
    (f,) = [f for f in report["findings"] if f["rule"] == "torch_compile"]
    def is_frame(name):
        return name.startswith(("Torch-Compiled Region", "## Call CompiledFxGraph")) or name in (
            "TorchDynamo Cache Lookup", "AOTDispatcher Runtime Wrapper Prologue", "Pregraph bytecode", "CompiledFunction")

    t = Trace(path)
    per_step, graph_step = [], []  # the frames' own time in each step: each frame's duration less its direct children's
    for step in t.steps:
        inner = [e for e in t.inside(step) if e.get("tid") == step.get("tid")]
        own = graph = 0.0
        for e in inner:
            if is_frame(e["name"]):
                kids = [c for c in t.inside(e) if c.get("tid") == e.get("tid") and c is not e]
                direct = [c for c in kids if not any(o is not c and o["ts"] <= c["ts"] and c["ts"] + c["dur"] <=
                                                     o["ts"] + o["dur"] for o in kids)]
                own += e["dur"] - sum(c["dur"] for c in direct)
                graph += (e["dur"] - sum(c["dur"] for c in direct)) if "CompiledFxGraph" in e["name"] else 0.0
        per_step.append(own)
        graph_step.append(graph)
    # a typical step's: the median over the steps (one slow step is not the typical cost, #26.5)
    assert f["evidence"]["frames_self_us_per_step"] == pytest.approx(statistics.median(per_step), rel=0.02, abs=0.2)
    # split: the compiled graph's own time is not "guards and wrappers" (issue 37: 20 ms of frees read as guards)
    assert f["evidence"]["graph_self_us_per_step"] == pytest.approx(statistics.median(graph_step), rel=0.02, abs=0.2)
    assert "in the guards and wrappers" in f["message"] and "in the compiled graph's own time" in f["message"]
    assert f["evidence"]["compute_us_per_step"] > 0
    assert "own CPU time" in f["message"] and "per step" in f["message"]
    assert "the frames' own CPU time" in runs["01_compile"].stdout.replace("\n", " ").replace("  ", " ")


def test_hints_fit_the_run(runs):
    """matmul_dispatch: a 2-D run hears nothing of bmm's cost nor cuBLAS; a batched one of bmm, not cuBLAS
    (a CPU run). nn.Linear's chain: eager 02 (P2.1), compiled 02 (P2.2, no aten::t); 01 compiled is not a
    Linear. The regime's Part 1 analogy is told to Part 1's lesson only."""
    plain, batched = (findings(trace(runs[k]))["matmul_dispatch"] for k in ("01_default", "01_batch"))
    assert plain["evidence"]["bmm"] == 0 and "bmm is" not in plain["hint"] and "cuBLAS" not in plain["hint"]
    assert batched["evidence"]["bmm"] > 0 and "bmm is the batched path" in batched["hint"] and "cuBLAS" not in batched["hint"]
    eager, compiled = (findings(trace(runs[k])) for k in ("02_eager", "02_compile"))
    assert eager["linear_chain"]["evidence"]["compiled"] is False and "P2.1" in eager["linear_chain"]["message"]
    assert compiled["linear_chain"]["evidence"] == dict(addmm=3, linear=0, views={"aten::t": 0}, compiled=True)
    assert "linear_chain" not in findings(trace(runs["01_compile"]))
    for key in ("02_eager", "02_compile", "03_eager", "03_compile"):
        for finding in findings(trace(runs[key])).values():
            assert "Part 1's size" not in finding["message"], (key, finding["rule"])


@pytest.mark.parametrize("key", ["01_default", "03_eager", "02_compile"])
def test_the_short_report_is_one_screen_and_says_each_caveat_once(runs, key):
    """Issue 37: the report a lesson prints at its end holds the header, the guess and 5 findings at most (the
    warnings and the variant's lesson first); the rest are named for the full report. What the header says
    (a CPU-only trace has no device lane) and the CPU roofline's missing peak (the full report's table says
    it) are not repeated in every CPU run."""
    out = runs[key].stdout
    short = out[out.index("trace report "):]
    bullets = [line for line in short.splitlines() if line.lstrip().startswith("•")]
    assert 1 <= len(bullets) <= 5, short
    assert "no_device_lane" not in short and "peak unknown" not in short
    full = report_json(trace(runs[key]))["findings"]
    if len(full) > len(bullets) + 1:  # no_device_lane aside
        assert "more in the full report:" in short
