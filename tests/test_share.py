"""common.share: what it would run, the privacy warning, the login check. trace-util and uvx are
replaced at the process boundary by recorders on PATH; nothing touches the network."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from conftest import REPO, run_module

RECORDER = """#!{python}
import json, os, sys
with open(os.environ["RECORD"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
sys.exit(int(os.environ.get("FAKE_RC", "0")))
"""


@pytest.fixture
def box(tmp_path: Path):
    """A traces folder, an empty bin folder for fakes, an empty HF_HOME, a record file."""
    traces = tmp_path / "traces" / "01_matmul_add"
    traces.mkdir(parents=True)
    (traces / "64_bf16_cold_eager.json").write_text("{}")
    (tmp_path / "bin").mkdir()
    (tmp_path / "hf").mkdir()

    class Box:
        dir = tmp_path / "traces"
        bin = tmp_path / "bin"
        record = tmp_path / "record.jsonl"

        def fake(self, name: str) -> None:
            exe = self.bin / name
            exe.write_text(RECORDER.format(python=sys.executable))
            exe.chmod(0o755)

        def env(self, token: str | None = "dummy", **extra: str) -> dict[str, str]:
            env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
            env.update(PATH=str(self.bin), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1",
                       RECORD=str(self.record), COLUMNS="300", **extra)
            if token is not None:
                env["HF_TOKEN"] = token
            return env

        def run(self, *args: str, **env) -> subprocess.CompletedProcess:
            return run_module("common.share", *args, env=self.env(**env), timeout=60)

        def calls(self) -> list[list[str]]:
            if not self.record.exists():
                return []
            return [json.loads(line) for line in self.record.read_text().splitlines()]

    return Box()


def test_runs_trace_util_with_its_real_flags(box):
    box.fake("trace-util")
    box.fake("uvx")  # trace-util on PATH wins
    r = box.run(str(box.dir), "-b", "my-traces")
    assert r.returncode == 0, r.stderr
    assert box.calls() == [["-b", "my-traces", "-f", str(box.dir), "--no-delete"]]
    assert r.stdout.count("before you share") == 1
    for words in ("host name", "process and thread ids", "--with_stack", "source file paths"):
        assert words in r.stdout


def test_mirror_lets_trace_util_delete(box):
    box.fake("trace-util")
    assert box.run(str(box.dir), "--bucket", "b", "--mirror").returncode == 0
    assert box.calls() == [["-b", "b", "-f", str(box.dir)]]


def test_falls_back_to_uvx(box):
    box.fake("uvx")
    r = box.run(str(box.dir), "-b", "my-traces")
    assert r.returncode == 0, r.stderr
    assert box.calls() == [["--python", "3.12", "--from", "trace-util>=0.2,<0.3", "trace-util",
                            "-b", "my-traces", "-f", str(box.dir), "--no-delete"]]


def test_neither_trace_util_nor_uvx(box):
    r = box.run(str(box.dir), "-b", "my-traces")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: cannot find trace-util or uvx")
    assert "common.view" in r.stderr


def test_not_logged_in(box):
    box.fake("trace-util")
    r = box.run(str(box.dir), "-b", "my-traces", token=None)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: not logged in to Hugging Face")
    for words in ("hf auth login", "HF_TOKEN", "uv run -m common.view"):
        assert words in r.stderr
    assert box.calls() == []  # nothing was run, nothing uploaded
    assert "before you share" not in r.stdout


def test_trace_util_failure_is_passed_on(box):
    box.fake("trace-util")
    r = box.run(str(box.dir), "-b", "my-traces", FAKE_RC="3")
    assert r.returncode == 3
    assert "trace-util failed" in r.stdout


def test_default_folder_is_traces(box):
    box.fake("trace-util")
    r = run_module("common.share", "-b", "x", cwd=box.dir.parent, env=box.env(PYTHONPATH=str(REPO)), timeout=60)
    assert r.returncode == 0, r.stderr
    assert box.calls() == [["-b", "x", "-f", "traces", "--no-delete"]]


@pytest.mark.parametrize("args", [["nowhere", "-b", "x"], ["EMPTY", "-b", "x"], ["TRACES"], ["TRACES", "-b", "-x"]])
def test_bad_input_is_one_line_exit_2(box, args):
    box.fake("trace-util")
    (box.dir.parent / "empty").mkdir()
    args = [str(box.dir) if a == "TRACES" else str(box.dir.parent / "empty") if a == "EMPTY" else a for a in args]
    r = box.run(*args)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ")
    assert box.calls() == []


def test_share_function_for_the_scripts_share_flag(box, monkeypatch):
    """What ``01_matmul_add.py --share BUCKET`` calls, in-process, with the script's console."""
    monkeypatch.syspath_prepend(str(REPO))  # the repo root, where `common` lives
    from common.share import share

    box.fake("trace-util")
    monkeypatch.setenv("PATH", str(box.bin))
    monkeypatch.setenv("HF_TOKEN", "dummy")
    monkeypatch.setenv("RECORD", str(box.record))
    out = io.StringIO()
    rc = share(box.dir / "01_matmul_add", "my-traces", console=Console(file=out, width=300))
    assert rc == 0
    assert box.calls() == [["-b", "my-traces", "-f", str(box.dir / "01_matmul_add"), "--no-delete"]]
    assert out.getvalue().count("before you share") == 1
