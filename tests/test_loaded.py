"""Part 1's and Part 2's CPU story on a busy machine (issue 17): the lessons run, as the README gives
them, two at a time, while a bounded load keeps every core busy (started and stopped here). The verdicts
must be the posts' or "cannot tell", never the opposite: a busy machine's waiting is not a regime.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import BIG_SIZE, CPU_DTYPE_EMULATED, REPO, run_module

LOAD_SECONDS = 240  # the load ends by itself after this, whatever happens to the test


@pytest.fixture(scope="module")
def load():
    """Busy processes, one per core but one, bounded in time; stopped when the module's tests are done. With
    the two lessons :func:`loaded` runs at a time (and the other test worker) every core has more work than
    it can do: on 2 cores, three processes share two (one more spinner only burnt 25 s of the suite's CPU)."""
    spin = f"import time\nend = time.time() + {LOAD_SECONDS}\nwhile time.time() < end: pass\n"
    procs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(max(1, (os.cpu_count() or 2) - 1))]
    yield procs
    for p in procs:
        p.kill()
        p.wait()


LINEAR = ("--in_dim", "256", "--out_dim", "256", "--batch", "64")
PLAN = {"64": ("01_matmul_add.py", "--size", "64"), "64x8": ("01_matmul_add.py", "--size", "64", "--batch", "8"),
        "2048": ("01_matmul_add.py", "--size", str(BIG_SIZE), "--warmup"), "linear": ("02_linear.py", *LINEAR),
        "linear_compiled": ("02_linear.py", *LINEAR, "--compile")}


@pytest.fixture(scope="module")
def loaded(load, tmp_path_factory):
    """Every lesson of the plan, run under the load, two at a time (more load still)."""
    base = tmp_path_factory.mktemp("loaded")
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = {key: pool.submit(lesson, base, *cmd) for key, cmd in PLAN.items()}
        return {key: f.result() for key, f in done.items()}


def lesson(tmp_path, script: str, *args: str) -> dict:
    """The lesson as a reader runs it (no OMP_NUM_THREADS of ours: the lesson pins its threads), and
    its report's findings by rule."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = tmp_path / f"{script}{'-'.join(args)}"
    proc = subprocess.run([sys.executable, str(REPO / script), *args, "--trace_dir", str(out), "--no-report"],
                          cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (trace,) = [p for p in out.iterdir() if p.name.endswith(".json")]
    report = run_module("common.report", "--json", trace, timeout=120)
    assert report.returncode == 0, report.stderr
    return dict(trace=trace, rules={f["rule"]: f for f in json.loads(report.stdout)["findings"]})


def test_size_64_reads_overhead_bound_or_cannot_tell(loaded):
    """P1: size 64 is overhead-bound. Under load it reads so, or says it cannot tell; never compute-bound."""
    found = loaded["64"]["rules"]
    assert "compute_bound" not in found
    assert "overhead_bound" in found or "regime_cannot_tell" in found, sorted(found)


def test_batched_64_is_never_compute_bound(loaded):
    if CPU_DTYPE_EMULATED:  # LESSONS_CPU_DTYPE=bf16 on a CPU without bf16 matmuls
        pytest.skip("an emulated bf16 bmm of 8 64x64 matrices takes about 16 ms a call: compute-bound indeed")
    found = loaded["64x8"]["rules"]
    assert "compute_bound" not in found, found.get("compute_bound")


def test_size_2048_warm_reads_compute_bound(loaded):
    """P1: a big matmul is compute-bound, and a busy machine does not hide it (512, not 2048, where the CPU
    emulates the dtype: 28 s a call, and the run would outlast its timeout)."""
    found = loaded["2048"]["rules"]
    assert "compute_bound" in found, sorted(found)
    assert "overhead_bound" not in found


def test_compare_eager_and_compiled_linear_never_claims_more_than_3x(loaded):
    """P2: compiling one linear changes its time by a small factor; a stalled step must not read as 200x."""
    eager, compiled = loaded["linear"]["trace"], loaded["linear_compiled"]["trace"]
    proc = run_module("common.report", "--compare", eager, compiled, timeout=120)
    assert proc.returncode == 0, proc.stderr
    ratios = [float(x) for x in re.findall(r"([0-9.]+)x A's", proc.stdout)]
    assert all(1 / 3 <= r <= 3 for r in ratios), proc.stdout
