"""The tests' warm start (tests/zygote.py) stays warm: a lesson run forks from an interpreter that has imported
torch already, about 0.2 s, where a plain process takes 3 to 5 s of CPU importing it again. A run whose environment
differs from the server's in a variable torch reads at import must start cold; one that differs only in what
torch itself writes into os.environ while a test process uses it must not."""

from __future__ import annotations

import os

import pytest

from conftest import WARM, run_script


WRITTEN_IN_PROCESS = {
    # Inductor's first look at its cache folder (its cache_dir(), which sets the variable where it is unset): a
    # test process that compiled anything in-process carries it from then on
    "TORCHINDUCTOR_CACHE_DIR": os.path.join("/tmp", "torchinductor_someone"),
    # common/llm.py's setup, which tests/test_llm.py calls in-process
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    # common/lesson.py, imported in-process by the tests of a lesson's flags and set-up: the level every lesson
    # sets itself before torch's profiler starts
    "KINETO_LOG_LEVEL": "6",
}


@pytest.mark.skipif(os.environ.get("LESSONS_COLD") == "1", reason="LESSONS_COLD=1 asks for cold runs")
@pytest.mark.parametrize("name", list(WRITTEN_IN_PROCESS))
def test_a_run_after_a_library_wrote_into_os_environ_still_forks_warm(tmp_path, monkeypatch, name):
    """What torch or transformers write into a test process's os.environ, read where it is used, never while
    torch imports: a run still forks from the server. Every lesson run after it started cold (10 of
    test_bad_input's 22 cases, 3 s of CPU each; 29 report runs after test_llm's in-process setup)."""
    run_script("01_matmul_add.py", "--size", "0", trace_dir=tmp_path / "before")  # the server, started if not yet
    monkeypatch.setenv(name, WRITTEN_IN_PROCESS[name])
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
