"""The TorchInductor GPU profiling guide's workflow on a GPU run (G.6, docs/compiled-kernels.md): the compiled MLP
run with TORCHINDUCTOR_BENCHMARK_KERNEL=1 (``mlp_compile_kernels`` of lesson_runs.py), whose lesson copies the
compiled module and each Triton kernel's own file beside the trace; the report's ``generated_code`` finding leads
to the kernel's line and prints the commands, which run here: the module alone (``-p``: the kernels by category,
the share of time the GPU is busy), the one kernel alone (its time and bandwidth), and with max-autotune (the edit
the finding prints). Skipped without CUDA; with GPU_RUNS_DIR and no CUDA only the report's part is checked.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import claims  # noqa: E402
from conftest import REPO  # noqa: E402
from test_gpu_claims import RUNS_DIR, Runs  # noqa: E402

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() and not RUNS_DIR,
                                reason="needs CUDA (or GPU_RUNS_DIR with a GPU run's traces)")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: runs the module and the kernel")
KEY = "mlp_compile_kernels"
FACTOR = 3  # the kernel run alone vs its time in the trace, per call: the same kernel at the same shape


@pytest.fixture(scope="module")
def finding(tmp_path_factory) -> dict:
    files = Runs(tmp_path_factory.mktemp("gpu"))[KEY]
    p = subprocess.run([sys.executable, "-m", "common.report", "--json", str(files.trace)], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    (f,) = [f for f in json.loads(p.stdout)["findings"] if f["rule"] == "generated_code"]
    return f


def _path(shown: str) -> Path:
    return (REPO / shown).resolve()


def _run(command: str, tmp_path: Path) -> str:
    """A command the finding printed, ``uv run`` as this Python; ``-p``'s Chrome trace into ``tmp_path``."""
    words = shlex.split(command)
    at = words.index("uv")
    argv = [sys.executable, *words[at + 2 + (2 if words[at + 2] == "--project" else 0):]]
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(  # where the lesson compiled: TMPDIR moves it
        tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser()))
    p = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "TMPDIR": str(tmp_path), "TORCHINDUCTOR_CACHE_DIR": cache})
    assert p.returncode == 0, f"{command}:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    return p.stdout


def test_g6_the_report_leads_to_the_triton_kernels_code(finding):
    """The fused Triton kernel: its line in the module copy (its definition), the ops from the module's comment,
    its own file copied beside the trace (runnable alone), and 'max_autotune': False in its source."""
    kernel = finding["evidence"]["kernels"][0]
    assert kernel["name"].startswith("triton_") and kernel["lane"] == "device", kernel
    (code, *_) = kernel["code"]
    lines = _path(code["module"]).read_text().splitlines()
    assert re.match(r"^\w+ = async_compile\.triton\(", lines[code["line"] - 1]), lines[code["line"] - 1]
    source = "\n".join(lines[code["line"] - 1:]).split("\n'''", 1)[0]  # the kernel's source, to its closing quotes
    assert f"def {kernel['name']}(" in source
    assert kernel["ops_from"] == "module" and {"gelu", "mul"} <= set(kernel["ops"]), kernel["ops"]
    assert kernel["kernel_file"] and _path(kernel["kernel_file"]).is_file() and kernel["runnable_alone"]
    assert kernel["max_autotune"] is False


@needs_cuda
def test_g6_the_module_alone_times_its_kernels_by_category(finding, tmp_path):
    out = _run(finding["evidence"]["commands"][0], tmp_path)
    kernel = finding["evidence"]["kernels"][0]
    assert "Percent of time when GPU is busy" in out and "triton_pointwise category kernels" in out, out[-3000:]
    assert kernel["name"][:100] in out and (tmp_path / "compiled_module_profile.json").is_file()


@needs_cuda
def test_g6_the_kernel_alone_and_with_max_autotune(finding, tmp_path):
    """The kernel's own file prints its time and bandwidth, near its time per call in the trace; with the
    finding's edit ('max_autotune': True) it autotunes and prints them again: both times are recorded."""
    kernel = finding["evidence"]["kernels"][0]
    _, alone, tuned = finding["evidence"]["commands"]
    timed = re.compile(r"([\d.]+)ms\s+([\d.]+)GB\s+([\d.]+)GB/s")
    first = timed.search(_run(alone, tmp_path))
    assert first, alone
    edit, run = tuned.split(" && ")
    assert subprocess.run(edit, shell=True, cwd=REPO).returncode == 0
    second = timed.search(_run(run, tmp_path))
    assert second, run
    alone_us, tuned_us = 1e3 * float(first[1]), 1e3 * float(second[1])
    holds = kernel["per_call_us"] / FACTOR <= alone_us <= kernel["per_call_us"] * FACTOR
    verdict = claims.Verdict("G.6", holds, f"{kernel['name']}: alone {alone_us:.1f} µs ({first[3]} GB/s), with "
                             f"max-autotune {tuned_us:.1f} µs ({second[3]} GB/s); in the trace "
                             f"{kernel['per_call_us']:.1f} µs per call", "" if holds else
                             f"alone {alone_us:.1f} µs is not within {FACTOR}x of the trace's {kernel['per_call_us']} µs")
    claims.record(verdict)
    print(verdict)
    assert verdict.holds, str(verdict)
