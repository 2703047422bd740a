"""The GPU checks of ``tests/gpu`` on the lessons' real H100 runs (``tests/data/h100/runs``), on the CPU.

``pytest tests/gpu`` runs with ``GPU_RUNS_DIR`` pointed at a temporary copy of those runs, as one does
with a fetched GPU run (docs/testing.md): every claim test must pass, and the count of those that ran is
checked, so the run cannot pass by skipping. What the H100 data does not hold (the Hub kernel's run, the
LLM runs the L.6 tests make themselves, a second GPU for DDP, the G.6 run with each kernel's file) must skip
with its reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import REPO

H100_RUNS = REPO / "tests" / "data" / "h100" / "runs"
CLAIM_TESTS = REPO / "tests" / "gpu" / "test_gpu_claims.py"
NOT_IN_THE_DATA = {  # test -> the start of its skip reason
    "test_p3_16_hub_kernel_one_flash_kernel": "no attn_hub run in GPU_RUNS_DIR",
    "test_l6_decode_leaves_the_gpu_idle_prefill_keeps_it_busy": "needs CUDA: the test makes its own 05_llm.py runs",
    "test_l6_reduce_overhead_static_cache_replays_cuda_graphs": "needs CUDA: the test makes its own 05_llm.py runs",
    "test_one_trace_per_gpu_with_nccl_kernels_in_backward": "needs at least two CUDA devices",
    "test_job_report_on_gpus": "needs at least two CUDA devices",
    "test_more_ranks_than_gpus_is_refused": "needs at least two CUDA devices",
    # G.6, the compiled module and its kernels alone: a run made after these (run_all.py's mlp_compile_kernels)
    "test_g6_the_report_leads_to_the_triton_kernels_code": "no mlp_compile_kernels run in GPU_RUNS_DIR",
    "test_g6_the_module_alone_times_its_kernels_by_category": "needs CUDA: runs the module and the kernel",
    "test_g6_the_kernel_alone_and_with_max_autotune": "needs CUDA: runs the module and the kernel",
}


def claim_ids() -> set[str]:
    """P1.3, ... for every claim test of test_gpu_claims.py (test_p1_3_... -> P1.3)."""
    found = re.findall(r"^def test_p(\d)_(\d+)_", CLAIM_TESTS.read_text(), re.M)
    return {f"P{part}.{n}" for part, n in found}


def test_the_gpu_checks_pass_on_the_h100_runs(tmp_path):
    runs = tmp_path / "runs"
    shutil.copytree(H100_RUNS, runs)
    log, junit = tmp_path / "claims.jsonl", tmp_path / "pytest.xml"
    env = {"GPU_RUNS_DIR": str(runs), "GPU_CLAIMS_LOG": str(log), "CUDA_VISIBLE_DEVICES": ""}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        f"--junitxml={junit}", "tests/gpu"], cwd=REPO, capture_output=True, text=True, timeout=600,
                       env={**os.environ, **env})
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    skipped = {name: c.find("skipped").get("message", "") for name, c in cases.items() if c.find("skipped") is not None}
    assert set(skipped) == set(NOT_IN_THE_DATA), skipped
    for name, reason in skipped.items():
        assert NOT_IN_THE_DATA[name] in reason, (name, reason)
    ran = [name for name in cases if name not in skipped]
    assert ran and len(ran) == len(claim_ids()) - 1, ran  # every claim test but the Hub kernel's
    verdicts = [json.loads(line) for line in log.read_text().splitlines()]
    assert {v["claim"] for v in verdicts} == claim_ids() - {"P3.16"}
    assert all(v["holds"] for v in verdicts), [v for v in verdicts if not v["holds"]]
    p315 = next(v for v in verdicts if v["claim"] == "P3.15")["variant"]
    assert "inside the steps' own spread" in p315 and "this run cannot rank the backends' CPU cost" in p315
    p310 = next(v for v in verdicts if v["claim"] == "P3.10")["variant"]
    assert "here cuDNN is the fastest (57.3 µs vs flash 94.4 µs)" in p310
