"""06_ddp.py with NCCL, one rank per GPU. Skipped without at least two CUDA devices.

Two launches on every GPU the machine has (DDP's default buckets, then rank 1 as a straggler) and
one with a rank more than there are GPUs, which the lesson refuses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import REPO, Trace, run_torchrun  # noqa: E402

torch = pytest.importorskip("torch")
GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.skipif(GPUS < 2, reason="needs at least two CUDA devices (one rank per GPU)")

SHAPES = ["--batch", "8", "--seq", "128", "--dim", "768", "--hidden", "3072", "--blocks", "4"]
DELAY_MS = 50.0


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    base = tmp_path_factory.mktemp("ddp_gpu")
    runs = {key: run_torchrun("06_ddp.py", *SHAPES, "--device", "cuda", "--gzip", *extra, trace_dir=base / key,
                              nproc=GPUS)
            for key, extra in (("default", []), ("straggler", ["--straggler", "1", "--delay-ms", str(DELAY_MS)]))}
    for run in runs.values():
        assert run.returncode == 0, f"{run.args}:\n{run.stdout}\n{run.stderr}"
    return runs


def job_json(folder: Path) -> dict:
    p = subprocess.run([sys.executable, "-m", "common.report", str(folder), "--json"], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["ranks"]


def test_one_trace_per_gpu_with_nccl_kernels_in_backward(jobs):
    traces = sorted(jobs["default"].trace_dir.glob("*_rank*.json.gz"))
    assert len(traces) == GPUS
    for path in traces:
        trace = Trace(path)
        nccl = [e for e in trace.events if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
        assert nccl, f"{path.name}: no NCCL kernel"
        for step in trace.steps:
            assert [e["name"] for e in trace.inside(step) if e["name"] in ("forward", "backward", "optimizer_step")] \
                == ["forward", "backward", "optimizer_step"]


def test_job_report_on_gpus(jobs):
    default, slow = job_json(jobs["default"].trace_dir), job_json(jobs["straggler"].trace_dir)
    assert default["on_gpu"] and default["backend"] == "nccl" and default["world_size"] == GPUS
    assert all(r["overlap_pct"] is not None and r["communication_us"] > 0 for r in default["ranks"])
    assert all(c["bytes"] for r in default["ranks"] for c in r["collectives"])  # NCCL kernels carry their sizes
    assert slow["straggler"]["rank"] == 1 and slow["straggler"]["issued_in"] == "backward"
    grew = slow["ranks"][0]["wait_us"] - default["ranks"][0]["wait_us"]
    assert 0.7 * DELAY_MS * 1e3 < grew < 1.5 * DELAY_MS * 1e3


def test_more_ranks_than_gpus_is_refused(tmp_path):
    run = run_torchrun("06_ddp.py", *SHAPES, "--device", "cuda", trace_dir=tmp_path / "t", nproc=GPUS + 1)
    ours = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert run.returncode != 0 and len(ours) == 1, run.stderr  # torchrun adds its own failure summary
    assert f"started {GPUS + 1} ranks on this machine but it has {GPUS} GPUs" in ours[0]
    assert not (tmp_path / "t").exists()
