"""06_ddp.py under torchrun (gloo, two ranks on the CPU), and the report over a job's traces.

Two launches, one after the other (this machine has 2 cores): small gradient buckets with
--record-shapes, and the straggler (rank 1 sleeps 50 ms every step, DDP's default buckets).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import (CPU_DTYPE, CPU_DTYPE_BYTES, DATA_TRACES, Run, Trace, command_env, event, run_module,
                      run_script, run_torchrun, write_trace)
from test_pictures import verdicts_under

TINY = ["--batch", "2", "--seq", "16", "--dim", "64", "--hidden", "256", "--blocks", "2"]
TAG = f"2x16x64x256x2_{CPU_DTYPE}_warm_eager"
# the straggler job is the README's command as given: the CPU's own sizes (06_ddp.py: a step of about 0.1 s)
CPU_TAG = f"2x64x256x1024x4_{CPU_DTYPE}_warm_eager"
WEIGHT_BYTES = 64 * 256 * CPU_DTYPE_BYTES  # one [256, 64] projection: 32 KiB in bf16
WEIGHTS = 2 * 3  # two blocks of gate, up, down
BUCKET_MB = 0.04  # 41,943 bytes: a bucket closes once it holds 2 weights (DDP closes it at the cap)
DELAY_MS = 50.0


def torchrun(*args: str, trace_dir: Path) -> Run:
    return run_torchrun("06_ddp.py", *args, trace_dir=trace_dir)


def report(*args, columns: int = 200, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_module("common.report", *args, timeout=timeout, env=command_env(COLUMNS=str(columns)))


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Both launches at once: the tests' time is mostly four processes importing torch."""
    base = tmp_path_factory.mktemp("ddp")
    plan = {
        "buckets": (*TINY, "--bucket-cap-mb", str(BUCKET_MB), "--record-shapes", "--no-report"),
        "straggler": ("--straggler", "1", "--delay-ms", f"{DELAY_MS:g}", "--html", "--annotate"),
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(torchrun, *args, trace_dir=base / key) for key, args in plan.items()}
        runs = {key: f.result() for key, f in futures.items()}
    for run in runs.values():
        assert run.returncode == 0, f"{run.args}:\n{run.stdout}\n{run.stderr}"
    return runs


def rank_files(run: Run, variants: str) -> dict[int, Path]:
    return {k: run.path(f"{tag_of(variants)}_{variants}_rank{k}.json") for k in (0, 1)}


def tag_of(variants: str) -> str:
    """The run's tag: the straggler job runs at the CPU's own sizes, the others at TINY's."""
    return CPU_TAG if variants.startswith("straggler") else TAG


def job_json(*paths) -> dict:
    p = report(*paths, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["ranks"]


# ----------------------------------------------------------------------------- the lesson


@pytest.mark.parametrize("key, variants", [("buckets", "shapes_bucket-0.04"), ("straggler", "straggler-1-50")])
def test_one_trace_and_table_per_rank(jobs, key, variants):
    run = jobs[key]
    extras = (".html", ".annotated.json") if key == "straggler" else ()  # --html --annotate: one of each per rank
    names = [f"{tag_of(variants)}_{variants}_rank{k}{suffix}" for k in (0, 1) for suffix in (".json", ".txt", *extras)]
    assert run.files() == sorted(names)  # nothing else: no temporary file left behind
    assert run.stdout.count("device  CPU") == 1  # one console: rank 0's
    for k in (0, 1):
        assert f"{tag_of(variants)}_{variants}_rank{k}.json" in run.stdout.replace("\n", "")


def test_each_trace_is_its_rank_of_one_job(jobs):
    docs = {}
    for k, path in rank_files(jobs["straggler"], "straggler-1-50").items():
        with open(path) as f:
            docs[k] = json.load(f)
    for k, doc in docs.items():
        assert doc["distributedInfo"]["rank"] == k and doc["distributedInfo"]["backend"] == "gloo"
        assert doc["lesson"]["job"]["rank"] == k and doc["lesson"]["variants"]["straggler"] == "1-50"
    assert docs[0]["lesson"]["job"]["id"] == docs[1]["lesson"]["job"]["id"] != ""


@pytest.mark.parametrize("key, variants", [("buckets", "shapes_bucket-0.04"), ("straggler", "straggler-1-50")])
def test_annotations_and_allreduce_in_every_step(jobs, key, variants):
    """forward, backward, optimizer_step in every step; DDP's all-reduce is issued inside backward."""
    for k, path in rank_files(jobs[key], variants).items():
        trace = Trace(path)
        assert [s["name"] for s in trace.steps] == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
        for step in trace.steps:
            names = [e["name"] for e in trace.inside(step)]
            assert names.count("forward") == names.count("backward") == names.count("optimizer_step") == 1
            (backward,) = trace.inside(step, "backward")
            assert trace.inside(backward, "c10d::allreduce_"), f"rank {k}: no all-reduce in the backward"
            delayed = trace.inside(step, "straggler_delay")
            assert len(delayed) == (1 if key == "straggler" and k == 1 else 0)
        # the all-reduce itself runs on gloo's own thread
        gloo = trace.named("gloo:all_reduce")
        assert gloo and all(e["tid"] != trace.steps[0]["tid"] for e in gloo)


def test_bucket_count_follows_bucket_cap(jobs):
    """A 0.04 MB cap closes a bucket every 2 weights (3 per step), each all-reduce carrying its bucket's
    bytes; DDP's default buckets, a small first one then 25 MiB, make 2 per step of the straggler job."""
    per_bucket = -(-int(BUCKET_MB * 2**20) // WEIGHT_BYTES)  # weights until the bucket reaches the cap
    # the straggler job's 12 weights of [1024, 256] (4 blocks, the CPU's sizes): DDP's first bucket closes at
    # 1 MiB (its default first bucket), the rest fit its 25 MiB: 2 all-reduces per step
    expected = {"buckets": WEIGHTS // per_bucket, "straggler": 2}
    for key, variants in (("buckets", "shapes_bucket-0.04"), ("straggler", "straggler-1-50")):
        for k, path in rank_files(jobs[key], variants).items():
            trace = Trace(path)
            for step in trace.steps:
                end = step["ts"] + step["dur"]
                inside = [e for e in trace.named("gloo:all_reduce") if step["ts"] <= e["ts"] <= end]
                assert len(inside) == expected[key], (key, k, step["name"])
    ranks = job_json(*rank_files(jobs["buckets"], "shapes_bucket-0.04").values())
    for r in ranks["ranks"]:
        assert {(c["name"], c["count"], c["bytes"]) for c in r["collectives"]} == {
            ("gloo:all_reduce", expected["buckets"], WEIGHTS * WEIGHT_BYTES)}


def test_straggler_named_and_rank0_waits_about_the_delay(jobs):
    """What the verdict says follows from the run's own evidence, however busy the machine was: rank 1
    sleeps at least the delay in every step (idle, in straggler_delay); a named straggler is rank 1, with
    that annotation's time; "cannot tell" only when the steps show why. On a quiet run (steps that vary by
    under a tenth of the delay) rank 0 waits about the delay more than without it."""
    baseline = job_json(jobs["buckets"].trace_dir)
    slow = job_json(jobs["straggler"].trace_dir)
    delay_us = DELAY_MS * 1e3
    slept = [e["dur"] for e in Trace(rank_files(jobs["straggler"], "straggler-1-50")[1]).named("straggler_delay")]
    assert len(slept) == 3 and min(slept) >= 0.99 * delay_us, slept
    assert slow["ranks"][1]["idle_us"] >= 0.99 * delay_us  # its sleep: neither compute nor comm
    for job in (baseline, slow):  # overlapping all-reduces are waited once: within the communication, the step
        for step in (s for r in job["ranks"] for s in r["steps"]):
            assert step["wait_us"] <= step["communication_us"] + 1e-3 and step["wait_us"] <= step["wall_us"] + 1e-3
    named, why = slow["straggler"], slow["straggler_cannot_tell"]
    if named is None:
        assert why is not None and ("no more than the ranks' steps vary" in why or "not in every step" in why), why
        assert "straggler: cannot tell" in " ".join(jobs["straggler"].stdout.split())
        return
    assert named["rank"] == 1 and named["own_annotation"] == "straggler_delay"
    assert named["own_annotation_us"] == pytest.approx(sorted(slept)[1], abs=1.0)  # the median sleep
    assert named["collective"] == "gloo:all_reduce" and named["issued_in"] == "backward"
    assert named["behind_us"] > slow["step_spread_us"] and why is None
    per_step = {r["rank"]: [s["wait_us"] for s in r["steps"]] for r in slow["ranks"]}
    assert all(w0 > w1 for w0, w1 in zip(per_step[0], per_step[1]))  # rank 0 waited more in every step
    assert "straggler: rank 1" in jobs["straggler"].stdout  # the lesson's own last words say so too
    if slow["step_spread_us"] < 0.1 * delay_us and baseline["step_spread_us"] < 0.1 * delay_us:  # a quiet run
        grew = slow["ranks"][0]["wait_us"] - baseline["ranks"][0]["wait_us"]
        assert 0.7 * delay_us < grew < 1.5 * delay_us, (baseline["ranks"][0], slow["ranks"][0])


def test_report_reads_a_folder_and_its_short_form(jobs):
    folder = jobs["straggler"].trace_dir
    full = report(folder, columns=80)
    assert full.returncode == 0, full.stderr
    verdict = _straggler_line(full.stdout)  # rank 1, or "cannot tell" on a busy machine (the test above)
    assert "per rank" in full.stdout and verdict.startswith(("straggler: rank 1: ", "straggler: cannot tell: "))
    assert "#4" in full.stdout
    assert all(len(line) <= 80 and "…" not in line for line in full.stdout.splitlines()), full.stdout
    short = report(*rank_files(jobs["straggler"], "straggler-1-50").values(), "--short")
    assert short.returncode == 0 and _straggler_line(short.stdout) == verdict
    assert "wall time / waiting" not in short.stdout


def _straggler_line(console: str) -> str:
    """The job report's straggler line as the console prints it, joined where it wrapped."""
    text = " ".join(console.split())
    return text[text.index("straggler: "):].split(" collectives (rank")[0]


def test_each_rank_page_shows_the_jobs_straggler_under_its_steps(jobs):
    """06_ddp.py --html: one page per rank, each with the job report's straggler line under the steps' plot."""
    line = _straggler_line(report(jobs["straggler"].trace_dir, "--short").stdout)
    assert line.startswith(("straggler: rank 1: the other ranks wait", "straggler: cannot tell: "))
    for k in (0, 1):
        page = jobs["straggler"].path(f"{CPU_TAG}_straggler-1-50_rank{k}.html").read_text()
        assert verdicts_under(page, "breakdown")["straggler"] == line


# ----------------------------------------------------------------------------- bad input


def _one_error(p: subprocess.CompletedProcess | Run, words: str) -> None:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], p.stderr


def test_report_refuses_two_jobs_a_non_trace_and_a_missing_rank(jobs, tmp_path):
    a = rank_files(jobs["buckets"], "shapes_bucket-0.04")
    b = rank_files(jobs["straggler"], "straggler-1-50")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(a[0], mixed)
    shutil.copy(b[1], mixed)
    _one_error(report(mixed), "2 different jobs")
    _one_error(report(a[0], b[1]), "2 different jobs")
    notes = tmp_path / "notes"
    shutil.copytree(jobs["buckets"].trace_dir, notes)
    (notes / "results.json").write_text('{"loss": 1.5}')
    _one_error(report(notes), "results.json: not a trace")
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(a[0], alone)
    out = tmp_path / "out.json"
    _one_error(report(alone, "--json", "-o", out), "rank 1 is missing")
    assert not out.exists()  # nothing half-written


def _rank_env(rank: int = 0, world: int = 2) -> dict:
    """What torchrun sets for one rank of a job (the lesson reads them when it starts, torch not at import)."""
    return {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world)}


BAD_LAUNCHES = {
    "run directly": (None, [], "torchrun --standalone --nproc-per-node 2 06_ddp.py"),
    "no such rank": (_rank_env(), ["--straggler", "2"], "--straggler 2: the ranks of this job are 0..1"),
    "delay alone": (_rank_env(), ["--delay-ms", "20"], "--delay-ms needs --straggler"),
}


@pytest.fixture(scope="module")
def bad_launches(tmp_path_factory):
    """Each case as one process (two at a time), with a trace folder it must not create; "run directly" without
    any of torchrun's variables (this process has none)."""
    base = tmp_path_factory.mktemp("bad_launch")
    assert not {"RANK", "WORLD_SIZE", "LOCAL_RANK"} & set(os.environ)

    def launch(item):
        key, (env, args, _) = item
        folder = base / key.replace(" ", "_")
        return key, (run_script("06_ddp.py", *args, trace_dir=folder, env=env, timeout=120), folder)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(launch, BAD_LAUNCHES.items()))


@pytest.mark.parametrize("key", list(BAD_LAUNCHES))
def test_lesson_bad_launch_or_flags(bad_launches, key):
    """Checked before any process group or file exists: one line, exit 2, nothing written."""
    p, folder = bad_launches[key]
    _one_error(p, BAD_LAUNCHES[key][2])
    assert not folder.exists()


def test_more_ranks_than_gpus_is_refused(monkeypatch):
    import torch

    from common.distributed import Ranks, choose_backend
    from common.errors import BadInput

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(BadInput, match="started 2 ranks on this machine but it has 1 GPU; .*--nproc-per-node 1"):
        choose_backend("auto", Ranks(rank=0, world_size=2, local_rank=0, local_world_size=2, run_id="x"))
    assert choose_backend("cpu", Ranks(0, 2, 0, 2, "x")) == "gloo"


# ----------------------------------------------------------------------------- HTA's overlap


def test_overlap_agrees_with_hta_oracle():
    """tests/data/traces/ORACLE.md: HTA 0.5.0's get_comm_comp_overlap, within 1 point."""
    from common.report import tables_of as analyze
    from common.report.model.intervals import Intervals
    from common.report.model.build import KERNEL
    from common.report.facts.overlap import intersection

    for name, hta in (("v100_ddp_rank1.json.gz", 0.00), ("a100_rank3.json.gz", 47.03)):
        overlap = analyze(DATA_TRACES / "hta" / name).numbers.gpu.comm_comp_overlap_pct  # the one table that holds it
        assert abs(overlap - hta) < 1.0, name
    # HTA leaves the last profiled step out: with it, nccl kernels against every other kernel give 46.24
    m = analyze(DATA_TRACES / "hta" / "a100_rank3.json.gz").model
    kernel = m.dev.kind == KERNEL
    comm = kernel & m.name_mask(lambda s: s.startswith("nccl"))[m.dev.name]
    u = lambda sel: Intervals(m.dev.ts[sel], m.dev.end[sel])  # noqa: E731
    plain = 100 * intersection(u(kernel & ~comm), u(comm)).total / u(comm).total
    assert abs(plain - 46.24) < 0.01


def test_overlap_in_one_traces_report():
    p = report(DATA_TRACES / "hta" / "a100_rank3.json.gz", "--json")
    assert p.returncode == 0, p.stderr
    assert abs(json.loads(p.stdout)["gpu"]["comm_comp_overlap_pct"] - 47.03) < 0.01
    assert "47.0% of their time overlaps computation kernels" in report(DATA_TRACES / "hta" / "a100_rank3.json.gz").stdout


# ----------------------------------------------------------------------------- a GPU job, synthetic

GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def gpu_rank(path: Path, rank: int, nccl_us: float, steps: int = 3) -> Path:
    """One rank of a 2-rank NCCL job: per 1 ms step, a GEMM in forward, a GEMM and an all-reduce of
    1024 floats in backward. The all-reduce starts 100 µs before the backward GEMM ends; in the last
    step it starts after it (so HTA's rule of leaving the last step out shows)."""
    ev, corr = [], 1

    def x(name, ts, dur, cat, **kw):
        args = kw.pop("args", None)
        e = {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": kw.get("pid", 1), "tid": kw.get("tid", 1)}
        ev.append({**e, "args": args} if args else e)

    def launch(kernel, at, start, dur, stream, **args):
        nonlocal corr
        x("cudaLaunchKernel", at, 5, "cuda_runtime", args={"correlation": corr})
        x(kernel, start, dur, "kernel", pid=0, tid=stream, args={"correlation": corr, "stream": stream, **args})
        corr += 1

    for i in range(steps):
        t = 1000.0 * i
        x(f"ProfilerStep#{i + 2}", t, 900, "user_annotation")
        x("forward", t + 10, 290, "user_annotation")
        launch(GEMM, t + 20, t + 100, 200, 7)
        x("backward", t + 300, 500, "user_annotation")
        launch(GEMM, t + 310, t + 350, 200, 7)
        nccl_start = t + (450 if i < steps - 1 else 600)
        launch(NCCL, t + 320, nccl_start, nccl_us, 20, **{"In msg nelems": 1024, "dtype": "Float"})
    doc = {"traceEvents": ev, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}}
    path.write_text(json.dumps(doc))
    return path


def test_gpu_job_waits_straggler_and_overlap(tmp_path):
    """Rank 0's all-reduce lasts 300 µs, rank 1's 100 µs: rank 0 waited 200 µs per step for rank 1."""
    paths = [gpu_rank(tmp_path / f"job_rank{k}.json", k, nccl_us) for k, nccl_us in ((0, 300.0), (1, 100.0))]
    job = job_json(*paths)
    assert job["on_gpu"] and job["backend"] == "nccl" and job["overlap_basis"] == "hta"
    r0, r1 = job["ranks"]
    assert [s["wait_us"] for s in r0["steps"]] == [200.0, 200.0, 200.0] and r1["wait_us"] == 0.0
    assert job["straggler"] == {"rank": 1, "behind_us": 200.0, "collective": "AllReduce", "issued_in": "backward",
                                "own_annotation": None, "own_annotation_us": None}
    # HTA's overlap, steps #2 and #3 only: 100 µs of the 300 (rank 0) and of the 100 (rank 1) under the GEMM
    assert abs(r0["overlap_pct"] - 100 / 3) < 1e-3 and abs(r1["overlap_pct"] - 100.0) < 1e-3
    step = r0["steps"][0]
    assert (step["compute_us"], step["communication_us"], step["overlap_us"]) == (400.0, 300.0, 100.0)
    assert step["idle_us"] == 900.0 - (400.0 + 300.0 - 100.0)
    assert r0["collectives"][0] == {"step": 2, "name": "AllReduce", "count": 1, "bytes": 4096}


def test_job_with_a_rank_twice_or_outside_the_world(tmp_path):
    a = gpu_rank(tmp_path / "a_rank0.json", 0, 100.0)
    b = gpu_rank(tmp_path / "b_rank0.json", 0, 100.0)
    _one_error(report(a, b), "rank 0 appears in 2 traces")
    c = gpu_rank(tmp_path / "c_rank2.json", 2, 100.0)
    _one_error(report(a, c), "rank 2 is outside the job's 2 ranks")


def test_each_rank_trace_is_read_once(tmp_path, monkeypatch):
    """One read per rank: its rank, its job, its collectives' sizes and its model all come from the one
    decode (a file read twice could tell the job one story and the model another, and costs a decode)."""
    from common.report.job.ranks import read_ranks

    paths = [gpu_rank(tmp_path / f"job_rank{k}.json", k, nccl_us) for k, nccl_us in ((0, 300.0), (1, 100.0))]
    opened: list[str] = []
    real_open = os.open

    def counting_open(path, *args, **kwargs):
        opened.append(os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    job = read_ranks(paths)
    assert sorted(p for p in opened if p in map(str, paths)) == sorted(map(str, paths))
    assert [r.rank for r in job.ranks] == [0, 1]
    assert job.ranks[0].collectives[0].bytes == 4096  # the message size, from that same read


# ----------------------------------------------------------------------------- a CPU job, synthetic


def cpu_rank(path: Path, rank: int, gloo_us: float, step_us=(1000.0, 1000.0, 1000.0)) -> Path:
    """One rank of a 2-rank gloo job: per step, a matmul in forward, then in backward 4 overlapping
    gloo:all_reduce events on gloo's thread, issued 30 µs apart and ending 30 µs apart at 720..810 µs
    into the step (rank 0's last ``gloo_us``, so it waits ``gloo_us`` less rank 1's for each)."""
    ev, t = [], 0.0
    for i, wall in enumerate(step_us):
        ev += [event(f"ProfilerStep#{i + 2}", t, wall, "user_annotation"), event("forward", t + 10, 200, "user_annotation"),
               event("aten::mm", t + 20, 150), event("backward", t + 250, 600, "user_annotation")]
        for k in range(4):
            end = t + 720 + 30 * k
            ev += [event("c10d::allreduce_", end - gloo_us - 5, 4),
                   event("gloo:all_reduce", end - gloo_us, gloo_us, tid=7)]
        t += wall + 1
    return write_trace(path, ev, distributedInfo={"backend": "gloo", "rank": rank, "world_size": 2})


def test_overlapping_collectives_wait_once(tmp_path):
    """Rank 0's 4 all-reduces of a step wait 300 µs each, overlapping: 390 µs of waiting, not 1.2 ms
    (more than the 1 ms step); the wait never exceeds the communication nor the step."""
    paths = [cpu_rank(tmp_path / f"job_rank{k}.json", k, us) for k, us in ((0, 420.0), (1, 120.0))]
    job = job_json(*paths)
    r0, r1 = job["ranks"]
    for step in r0["steps"] + r1["steps"]:
        assert step["wait_us"] <= step["communication_us"] <= step["wall_us"]
    assert [s["wait_us"] for s in r0["steps"]] == [390.0] * 3 and r1["wait_us"] == 0.0
    assert [s["communication_us"] for s in r0["steps"]] == [514.0] * 3  # 510 of gloo, 4 of the first c10d::allreduce_
    # rank 1 ran the same ops as fast and was idle 390 µs longer, in no annotation of its own: on a shared CPU
    # the machine may have kept it from running, so no rank is named (tests/test_ddp_straggler.py)
    assert job["straggler"] is None and job["step_spread_us"] == 0.0
    assert job["straggler_cannot_tell"].startswith("the others wait 390 µs per step for rank 1, which ran the same "
                                                   "ops as every rank (") and "and was idle longer" in job["straggler_cannot_tell"]


def test_a_lead_inside_the_step_noise_names_no_straggler(tmp_path):
    """The same 390 µs lead, but steps of 1 to 1.6 ms: the lead is inside the noise, cannot tell."""
    paths = [cpu_rank(tmp_path / f"job_rank{k}.json", k, us, (1000.0, 1600.0, 1000.0))
             for k, us in ((0, 420.0), (1, 120.0))]
    job = job_json(*paths)
    assert job["straggler"] is None and job["step_spread_us"] == 600.0
    assert job["straggler_cannot_tell"] == ("the others wait 390 µs per step more than rank 1, no more than the ranks' "
                                            "steps vary from step to step (600 µs: rank 0's steps take 1.00 ms to "
                                            "1.60 ms)")
    text = report(*paths, columns=80).stdout
    assert "straggler: cannot tell: the others wait 390 µs" in " ".join(text.split())
    assert "straggler: rank" not in text
    # a rank's page says the same, under its steps (what 06_ddp.py --html writes for each rank)
    from common.report import analyze, job_verdict, write_html

    write_html(*analyze(paths[0]), tmp_path / "rank0.html", job_verdict=job_verdict(paths))
    shown = verdicts_under((tmp_path / "rank0.html").read_text(), "breakdown")["straggler"]
    assert shown == _straggler_line(text) == "straggler: cannot tell: " + job["straggler_cannot_tell"]


def test_gpu_job_text_says_each_collectives_size(tmp_path):
    """The job's text report writes a collective's size per step with the report's decimal byte unit."""
    paths = [gpu_rank(tmp_path / f"job_rank{k}.json", k, nccl_us) for k, nccl_us in ((0, 300.0), (1, 100.0))]
    out = run_module("common.report", *paths, env=command_env(COLUMNS="120"))
    assert out.returncode == 0, out.stderr
    assert "AllReduce x 1 per step (4.1 kB per step)" in " ".join(out.stdout.split()), out.stdout
