"""Bad input, tried as an attacker would: each recipe ends in one `error:` line and exit status 2, or in a
report whose numbers could be true (no percentage over 100, no gap longer than its step), with a note that
counts what was dropped. Then the same for common.view."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from conftest import event, run_module, write_trace

GOOD = [event("ProfilerStep#1", 0, 100, cat="user_annotation"), event("aten::mm", 10, 50)]


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


# name: (make the input in a folder -> its path, extra arguments, the words of the error line)
REFUSED = {
    "missing file": (lambda d: d / "nope.json", [], "no such file"),
    "not JSON": (lambda d: _text(d / "x.json", "this is not json {"), [], "not JSON"),
    "truncated gzip": (lambda d: _bytes(d / "t.json.gz", gzip.compress(json.dumps(GOOD).encode() * 50)[:40]), [],
                       "not a valid gzip file"),
    "no traceEvents": (lambda d: _text(d / "x.json", '{"schemaVersion": 1}'), [], "no traceEvents"),
    "an array of numbers": (lambda d: _text(d / "x.json", "[1, 2, 3]"), [], "its events are not JSON objects"),
    "a number": (lambda d: _text(d / "x.json", "42"), [], "not a trace"),
    "an empty array": (lambda d: _text(d / "x.json", "[]"), [], "no complete events"),
    "empty file": (lambda d: _text(d / "x.json", ""), [], "empty file"),
    "2 MB of white space": (lambda d: _text(d / "x.json", " \n" * (1 << 20)), [], "empty file"),
    "named .gz, not gzip": (lambda d: _text(d / "x.json.gz", "{}"), [], "named .gz but not gzip"),
    "[ x 10,000 in the file": (lambda d: _text(d / "x.json", _nested(10_000)), [], "nested too deeply"),
    "[ x 10,000 in traceEvents": (lambda d: _text(d / "x.json", '{"traceEvents": ' + _nested(10_000) + "}"), [],
                                  "nested too deeply"),
    "[ x 10,000 in an event's args": (lambda d: _text(d / "x.json", '{"traceEvents": [{"ph": "X", "name": "a", '
                                                       '"ts": 1, "dur": 2, "args": {"x": ' + _nested(10_000) + "}}]}"),
                                      [], "nested too deeply"),
    "[ x 10,000 in the metadata": (lambda d: _text(d / "x.json", json.dumps({"traceEvents": GOOD})[:-1]
                                                    + ', "distributedInfo": ' + _nested(10_000) + "}"),
                                   [], "nested too deeply"),
    "a path over 255 bytes": (lambda d: d / ("x" * 300 + ".json"), [], "File name too long"),
    "/dev/zero": (lambda d: Path("/dev/zero"), [], "not a regular file"),
    "/dev/urandom": (lambda d: Path("/dev/urandom"), [], "not a regular file"),
    "a FIFO with no writer": (lambda d: _fifo(d / "fifo.json"), [], "not a regular file"),
    # one folder is a job (every rank's trace in it); --compare wants two trace files
    "a folder without traces": (lambda d: d, [], ("no traces (.json or .json.gz) in this folder", "is a directory")),
    "over --max-size": (lambda d: write_trace(d / "x.json", GOOD), ["--max-size", "64"], "the limit"),
    "a gzip bomb over --max-size": (lambda d: _bytes(d / "b.json.gz", gzip.compress(b" " * (64 << 20))),
                                    ["--max-size", "1M"], "once decompressed, the limit"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_with_one_line(tmp_path, name):
    make, extra, words = REFUSED[name]
    path = make(tmp_path)
    for mode, args in enumerate(([path, *extra], ["--compare", path, path, *extra])):
        if isinstance(words, tuple):
            words_here = words[mode]
        else:
            words_here = words
        proc = run_module("common.report", *args, timeout=60)  # a FIFO or /dev/zero must not hang
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2, (args, proc.stderr[-2000:])
        assert len(lines) == 1 and lines[0].startswith("error: ") and words_here in lines[0], proc.stderr[-2000:]
        assert len(lines[0]) < 400  # a long path is shortened, not echoed whole


# ----------------------------------------------------------------------------- read, with what cannot be true left out

KERNEL_ARGS = {"grid": [8, 1, 1], "block": [128, 1, 1], "est. achieved occupancy %": 50}


def _gpu_step(i: int, kernel_start: float, kernel_dur: float = 50, **args) -> list:
    t = 1000.0 * i
    return [event(f"ProfilerStep#{i}", t, 900, cat="user_annotation"), event("aten::mm", t + 10, 200),
            event("cudaLaunchKernel", t + 20, 5, cat="cuda_runtime", correlation=i),
            event("k", t + kernel_start, kernel_dur, cat="kernel", pid=0, tid=7, correlation=i,
                  **{**KERNEL_ARGS, **args}),
            event("cudaLaunchKernel", t + 30, 5, cat="cuda_runtime", correlation=100 + i),
            event("k2", t + 300, 20, cat="kernel", pid=0, tid=7, correlation=100 + i, **KERNEL_ARGS)]


def _ops(report: dict) -> set:
    return {o["name"] for o in report["ops"]}


def _gpu_trace(d: Path, steps: list, props=None) -> Path:
    ev = [e for s in steps for e in s]
    return write_trace(d / "g.json", ev, deviceProperties=props or [{"id": 0, "name": "GPU", "numSms": 80}])


READ = {
    # name: (make, what the JSON report must show)
    "Chrome's JSON Array format": (lambda d: _text(d / "a.json", json.dumps(GOOD)),
                                   lambda r: "aten::mm" in _ops(r) and r["trace"]["events"] == 2),
    "a UTF-8 byte-order mark": (lambda d: _bytes(d / "bom.json", b"\xef\xbb\xbf" + json.dumps(
        {"traceEvents": GOOD}).encode()), lambda r: "aten::mm" in _ops(r)),
    "a byte-order mark before an array, gzipped": (
        lambda d: _bytes(d / "bom.json.gz", gzip.compress(b"\xef\xbb\xbf " + json.dumps(GOOD).encode())),
        lambda r: "aten::mm" in _ops(r)),
    "a name that is not UTF-8": (
        lambda d: _bytes(d / "u.json", b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::\xff", '
                                       b'"ts": 1, "dur": 4, "pid": 1, "tid": 1}]}'),
        lambda r: r["ops"][0]["name"] == "aten::\ufffd"),
    "metadata nested 100 deep": (
        lambda d: _text(d / "m.json", json.dumps({"traceEvents": GOOD})[:-1] + ', "distributedInfo": '
                        + _nested(100) + "}"),
        lambda r: r["meta"]["distributed"] is None and "nested more than 32 levels" in " ".join(r["notes"])),
    "a negative duration": (
        lambda d: write_trace(d / "n.json", GOOD + [event("k", 10, -3, cat="kernel", pid=0, tid=7),
                                                    event("k", 20, 5, cat="kernel", pid=0, tid=7)]),
        lambda r: r["kernels"][0]["min_us"] == 0 and r["gpu"]["busy_us"] == 5
        and "1 event(s) with a negative duration counted as zero" in r["notes"]),
    "a kernel dur of 1e30": (
        lambda d: _gpu_trace(d, [_gpu_step(1, 40), _gpu_step(2, 40, kernel_dur=1e30)]),
        lambda r: r["gpu"]["kernels"] == 3 and r["gpu"]["busy_us"] == 90
        and any(n.startswith("dropped 1 event(s) whose time cannot be true") for n in r["notes"])),
    "an occupancy of 1e30 %": (
        lambda d: _gpu_trace(d, [_gpu_step(1, 40), _gpu_step(2, 40, **{"est. achieved occupancy %": 1e30})]),
        lambda r: r["efficiency"]["est_achieved_occupancy_pct"] == 50
        and "ignored launch arguments out of any real range: 1 'est. achieved occupancy %'" in r["notes"]),
    "numSms -5": (
        lambda d: _gpu_trace(d, [_gpu_step(1, 40), _gpu_step(2, 40)], props=[{"id": 0, "name": "G", "numSms": -5}]),
        lambda r: r["meta"]["gpus"][0]["num_sms"] is None and r["efficiency"]["est_sm_efficiency_pct"] is None
        and "ignored device properties no device has: numSms -5" in r["notes"]),
    "a kernel starting before its step": (
        lambda d: _gpu_trace(d, [_gpu_step(1, 40), _gpu_step(2, -1600), _gpu_step(3, 40)]),
        lambda r: all(f["rule"] != "kernel_gap" or f["evidence"]["gap_us"] <= 900 for f in r["findings"])),
    "huge pid and correlation ids": (
        lambda d: write_trace(d / "h.json", GOOD + [
            event("cudaLaunchKernel", 20, 5, cat="cuda_runtime", correlation=2 ** 70),
            event("k", 30, 5, cat="kernel", pid=2 ** 70, tid=7, correlation=2 ** 64 + 1)]),
        lambda r: r["gpu"]["launches_correlated"] == 0 and any("not integers below" in n for n in r["notes"])),
    "overlapping ProfilerSteps": (
        lambda d: write_trace(d / "o.json", [
            event("ProfilerStep#1", 0, 100, cat="user_annotation"), event("ProfilerStep#2", 50, 100,
                                                                          cat="user_annotation"),
            event("aten::mm", 10, 80), event("aten::mm", 60, 80), event("aten::add", 140, 5)]),
        lambda r: r["cpu"]["self_cpu_total_us"] <= r["window"]["wall_us"]
        and [s["wall_us"] for s in r["steps"]] == [50, 100]
        and "1 ProfilerStep(s) overlapped the next one: each cut where the next starts" in r["notes"]),
}


def _percentages(report: dict):
    """Every value of a key that names a percentage, anywhere in the report."""
    todo = [report]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key.endswith("pct") and isinstance(value, (int, float)):
                    yield key, value
                todo.append(value)
        elif isinstance(node, list):
            todo.extend(node)


@pytest.mark.parametrize("name", list(READ))
def test_read_and_kept_true(tmp_path, name):
    make, check = READ[name]
    path = make(tmp_path)
    proc = run_module("common.report", "--json", path)
    assert proc.returncode == 0 and "Warning" not in proc.stderr, proc.stderr
    r = json.loads(proc.stdout)
    assert check(r), json.dumps({k: r[k] for k in ("notes", "efficiency", "steps", "gpu")})[:3000]
    for key, value in _percentages(r):
        assert 0 <= value <= 100, (key, value)
    for step in r["steps"]:
        assert step["gpu_busy_us"] is None or step["gpu_busy_us"] <= step["wall_us"]
    text = run_module("common.report", path)
    assert text.returncode == 0 and "Warning" not in text.stderr, text.stderr
    shown = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)%", text.stdout)]
    assert all(p <= 100 for p in shown), text.stdout


# ----------------------------------------------------------------------------- common.view


@pytest.mark.parametrize("name", ["a path over 255 bytes", "/dev/zero", "/dev/urandom", "a FIFO with no writer"])
def test_view_refuses_with_one_line(tmp_path, name):
    path = REFUSED[name][0](tmp_path)
    proc = run_module("common.view", path, "--no-browser", "--timeout", "5", timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    proc = run_module("common.view", "--list", path, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("error: "), proc.stderr


def test_view_list_takes_no_trace_for_a_folder(tmp_path):
    trace = write_trace(tmp_path / "64_bf16_cold_eager.json", GOOD)
    for args in (["--list", trace], [trace, "--list"]):
        proc = run_module("common.view", *args)
        assert proc.returncode == 2 and "is a file; to open it, drop --list" in proc.stderr, proc.stderr
    assert "64_bf16_cold_eager.json" in run_module("common.view", "--list", tmp_path).stdout


def test_a_refused_trace_writes_no_output(tmp_path):
    deep = _text(tmp_path / "deep.json", _nested(10_000))
    proc = run_module("common.report", deep, "--json", "-o", tmp_path / "r.json", timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and not (tmp_path / "r.json").exists()
