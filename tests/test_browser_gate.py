"""A browser test without Chromium skips on a developer's machine and fails in CI (#26.9): CI once ran
the whole suite with every browser test skipped because Chromium was not found."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO

BROWSER_TEST = "tests/test_roofline.py::test_roofline_plot_in_a_real_browser"


def run_without_chromium(tmp_path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "CI"}
    nowhere = tmp_path / "bin"  # a PATH with no browser on it
    nowhere.mkdir()
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsfE", "-p", "no:cacheprovider", "-p", "no:xdist",
                           BROWSER_TEST],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**clean, "PATH": str(nowhere), **env})


def test_in_ci_a_missing_chromium_fails(tmp_path):
    ci = "true"
    p = run_without_chromium(tmp_path, CI=ci)
    assert p.returncode == 1 and "1 error" in p.stdout, p.stdout[-3000:]
    assert f"no Chromium on PATH (apt-get install chromium; .ci/run installs it): in CI (CI={ci}) a browser test " \
           "must run, not skip" in p.stdout


def test_elsewhere_a_missing_chromium_skips(tmp_path):
    p = run_without_chromium(tmp_path)  # no CI in its environment
    assert p.returncode == 0 and "1 skipped" in p.stdout, p.stdout[-3000:]
    assert "no Chromium on PATH" in p.stdout
