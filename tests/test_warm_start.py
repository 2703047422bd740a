"""The tests' warm start (tests/zygote.py) stays warm: a lesson run forks from an interpreter that has imported
torch already, about 0.2 s, where a plain process takes 3 to 5 s of CPU importing it again. A run whose environment
differs from the server's in a variable torch reads at import must start cold; one that differs only in what
torch itself writes into os.environ while a test process uses it must not."""

from __future__ import annotations

import os

import pytest

from conftest import WARM, run_script


@pytest.mark.skipif(os.environ.get("LESSONS_COLD") == "1", reason="LESSONS_COLD=1 asks for cold runs")
def test_a_run_after_inductor_set_its_cache_folder_still_forks_warm(tmp_path, monkeypatch):
    """Inductor's first look at its cache folder writes TORCHINDUCTOR_CACHE_DIR into os.environ
    (torch/_inductor/runtime/cache_dir_utils.py): a test process that ran anything compiled in-process carries it
    from then on. Every lesson run after it started cold (10 of test_bad_input's 22 cases, 3 s of CPU each)."""
    run_script("01_matmul_add.py", "--size", "0", trace_dir=tmp_path / "before")  # the server, started if not yet
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", os.path.join("/tmp", "torchinductor_someone"))
    forks = WARM.forks
    run = run_script("02_linear.py", "--device", "cuda", trace_dir=tmp_path / "after")
    assert run.returncode == 2 and "CUDA is not available" in run.stderr
    assert WARM.forks == forks + 1


def test_a_run_whose_threads_differ_starts_cold(tmp_path):
    """OMP_NUM_THREADS is read when torch imports: the server's torch has its own, so such a run is a process
    of its own."""
    forks = WARM.forks
    run = run_script("01_matmul_add.py", "--size", "0", trace_dir=tmp_path, env={"OMP_NUM_THREADS": "2"})
    assert run.returncode == 2 and WARM.forks == forks
