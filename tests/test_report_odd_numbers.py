"""The report on the inputs of issue 38's fuzzing round: a gzip member followed by junk, a gzip bomb, numbers at
a float's limits in the lesson's metadata, absurd deviceProperties, sub-µs kernels, a memory peak no device
holds; and the writing side: hidden temporaries left by ``kill -9``, a folder reached through a broken link,
matplotlib with no writable HOME. Each ends in a report or one ``error:`` line, never a traceback, and no
impossible number is printed as fact."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from conftest import DATA_TRACES, REPO, command_env, event, module_command, run_module, write_trace
from h100 import h100_trace


def h100_doc(run: str = "p1_4096_compile") -> dict:
    return json.loads(gzip.decompress(h100_trace(run).read_bytes()))


def assert_one_error_line(proc) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr


def assert_clean(proc) -> None:
    assert proc.returncode == 0 and "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-2000:]


# ----------------------------------------------------------------------------- gzip


def test_gzip_with_junk_after_it_is_read_as_the_plain_report_reads_it(tmp_path):
    trace = tmp_path / "junk.json.gz"
    trace.write_bytes(h100_trace("p1_64").read_bytes() + b"junk bytes after the member")
    page, copy = tmp_path / "p.html", tmp_path / "a.json"
    proc = run_module("common.report", trace, "--short", "--html", page, "--annotate", copy)
    assert_clean(proc)
    assert page.exists() and json.loads(copy.read_text())["report_findings"]["events"] > 0


def test_an_annotation_refused_leaves_no_page(tmp_path):
    """The annotated copy is read and checked before the page is written: a refusal leaves neither."""
    copy = tmp_path / "a.json"
    assert_clean(run_module("common.report", h100_trace("p1_64"), "--short", "--annotate", copy))
    page = tmp_path / "p.html"
    proc = run_module("common.report", copy, "--short", "--html", page, "--annotate", tmp_path / "again.json")
    assert_one_error_line(proc)
    assert "already annotated" in proc.stderr and not page.exists()


def gzip_bomb(path: Path, megabytes: int) -> Path:
    pack = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [pack.compress(b'{"traceEvents": [')] + [pack.compress(b" " * (1 << 20)) for _ in range(megabytes)]
    path.write_bytes(b"".join(parts) + pack.compress(b"]}") + pack.flush())
    return path


def peak_rss_mb(*args) -> tuple[int, float, str]:
    """(exit status, the most memory it held in MB, stderr) of ``common.report ARGS``, a process of its own."""
    proc = subprocess.Popen(module_command("common.report", *args), cwd=REPO, env=command_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024, err


def test_a_gzip_bomb_stops_at_the_limit_holding_no_more_than_it(tmp_path):
    """A 300 MB expansion with --max-size 200 MB: the error at the limit, having held the limit once (the old
    decompression held it twice: the pieces and their join)."""
    bomb = gzip_bomb(tmp_path / "bomb.json.gz", 300)
    code, peak, err = peak_rss_mb(bomb, "--max-size", str(200 << 20))
    assert code == 2 and "over 209,715,200 bytes of JSON once decompressed" in err, err
    _, baseline, _ = peak_rss_mb(h100_trace("p1_64"), "--short")
    assert peak - baseline < 1.4 * 200 * 1.048576, (peak, baseline)


# ----------------------------------------------------------------------------- metadata at a float's limits


@pytest.mark.parametrize("mode", [[], ["--json"], ["--short", "--html", "PAGE"]])
def test_a_lesson_shape_at_the_float_limit_is_no_lesson_shape(tmp_path, mode):
    doc = h100_doc()
    lesson = json.loads(doc["lesson"]) if isinstance(doc["lesson"], str) else doc["lesson"]
    lesson["shape"] = [1e308]
    doc["lesson"] = json.dumps(lesson)
    trace = tmp_path / "4096_bf16_warm_compile.json"
    trace.write_text(json.dumps(doc))
    proc = run_module("common.report", trace, *[str(tmp_path / "p.html") if a == "PAGE" else a for a in mode])
    assert_clean(proc)


def test_one_odd_trace_does_not_end_a_glance(tmp_path):
    doc = h100_doc()
    lesson = json.loads(doc["lesson"]) if isinstance(doc["lesson"], str) else doc["lesson"]
    lesson["shape"] = [1e308]
    doc["lesson"] = json.dumps(lesson)
    (tmp_path / "odd.json").write_text(json.dumps(doc))
    (tmp_path / "good.json.gz").write_bytes(h100_trace("p1_64").read_bytes())
    proc = run_module("common.report", "--glance", tmp_path, "--json")
    assert_clean(proc)
    assert sorted(Path(row["trace"]).name for row in json.loads(proc.stdout)) == ["good.json.gz", "odd.json"]


@pytest.mark.parametrize("threads", [16, 0, 1, 31])
def test_an_sm_of_less_than_a_warp_gives_no_occupancy(tmp_path, threads):
    doc = h100_doc("attn_naive")
    doc["deviceProperties"][0]["maxThreadsPerMultiprocessor"] = threads
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(doc))
    for mode in ([], ["--json"]):
        assert_clean(run_module("common.report", trace, *mode))


# ----------------------------------------------------------------------------- impossible numbers


def sub_microsecond_trace(path: Path) -> Path:
    """Three steps of six 0.3 µs kernels, apart: HTA's rounding inward makes each end before it starts."""
    evs = []
    for s in range(3):
        t0 = 1000 + s * 300
        evs.append(event(f"ProfilerStep#{s + 1}", t0, 300, cat="user_annotation"))
        for k in range(6):
            evs.append(event("cudaLaunchKernel", t0 + 10 + k * 40, 5, cat="cuda_runtime", correlation=s * 100 + k))
            evs.append(event("tiny_kernel", t0 + 20.4 + k * 40, 0.3, cat="kernel", pid=0, tid=7,
                             correlation=s * 100 + k))
    return write_trace(path, evs, deviceProperties=[{"id": 0, "name": "GPU", "numSms": 80}])


def percents_and_times(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"(-?\d+(?:\.\d+)?)(?:%| µs)", text)]


def test_sub_microsecond_kernels_give_no_negative_busy_time(tmp_path):
    trace = sub_microsecond_trace(tmp_path / "t.json")
    g = json.loads(run_module("common.report", trace, "--json").stdout)["gpu"]
    assert 0 <= g["busy_us"] <= g["span_us"] and 0 <= g["idle_pct"] <= 100 and 0 <= g["busy_pct"] <= 100, g
    assert g["hta_impossible"] and g["busy_us"] == pytest.approx(18 * 0.3)
    text = run_module("common.report", trace).stdout
    assert "unrounded (HTA's rounding" in text
    assert all(0 <= x for x in percents_and_times(text)), text


def test_the_unrounded_idle_is_over_the_unrounded_span():
    """a100_triton_example: HTA says busy 1 µs of a 1 µs span; the unrounded busy is 1.8 µs, so its idle is
    over the unrounded span (it printed -76 %)."""
    text = run_module("common.report", DATA_TRACES / "hta/a100_triton_example.json.gz").stdout
    idle = re.search(r"unrounded: busy [\d.]+ µs, idle (-?[\d.]+)%", " ".join(text.split()))
    assert idle and 0 <= float(idle[1]) <= 100, text


@pytest.mark.parametrize("props", [None, [{"id": 0, "name": "", "totalGlobalMem": 10**15}],
                                   [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 10**15}]])
def test_a_memory_peak_no_device_holds_is_not_printed(tmp_path, props):
    evs = [event("ProfilerStep#1", 0, 100, cat="user_annotation"), event("aten::empty", 10, 5),
           event("ProfilerStep#2", 100, 100, cat="user_annotation"),
           {"ph": "i", "s": "t", "name": "[memory]", "pid": 100, "tid": 100, "ts": 12,
            "args": {"Device Type": 1, "Device Id": 0, "Bytes": 300 << 30, "Total Allocated": 300 << 30,
                     "Total Reserved": 300 << 30, "Addr": 1234}}]
    trace = write_trace(tmp_path / "t.json", evs, **({"deviceProperties": props} if props else {}))
    proc = run_module("common.report", trace)
    assert_clean(proc)
    text = " ".join(proc.stdout.split())
    assert "300.00 GiB" not in text and "memory view left out" in text, text


# ----------------------------------------------------------------------------- the writing side


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_killed_writers_temporaries_are_removed_by_the_next_write_and_never_read(tmp_path):
    stale = tmp_path / f".tmp-{dead_pid()}-0123abcd"
    stale.mkdir()
    (stale / "64_bf16_cold_eager.json.gz").write_bytes(b"")  # what kill -9 mid-write left
    (stale / "64_bf16_cold_eager.json").write_text('{"traceEvents": [')
    live = tmp_path / f".tmp-{os.getpid()}-89abcdef"  # a writer still running: left alone
    live.mkdir()
    (tmp_path / "good.json.gz").write_bytes(h100_trace("p1_64").read_bytes())
    proc = run_module("common.report", "--glance", tmp_path, "--json")
    assert_clean(proc)
    assert [Path(row["trace"]).name for row in json.loads(proc.stdout)] == ["good.json.gz"], proc.stdout
    assert proc.stderr == "", proc.stderr  # nothing skipped: the hidden folders were never read
    assert_clean(run_module("common.report", tmp_path / "good.json.gz", "--json", "-o", tmp_path / "r.json"))
    assert not stale.exists() and live.is_dir()


def test_a_folder_through_a_broken_link_is_named_as_typed(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "dirlink").symlink_to(tmp_path / "nowhere" / "sub")
    (tmp_path / "nowhere").mkdir()  # the link's parent exists, the folder it names does not
    dest = f"{tmp_path}/out/dirlink/../x.html"
    proc = run_module("common.report", h100_trace("p1_64"), "--short", "--html", dest)
    assert_one_error_line(proc)
    assert f"no such folder {tmp_path}/out/dirlink/.. ({tmp_path}/out/dirlink is a link to " in proc.stderr, proc.stderr


def test_no_writable_home_prints_nothing_of_matplotlib(tmp_path):
    home = tmp_path / "home"
    home.write_text("a file, not a folder: nothing can be made under it")
    env = {k: v for k, v in command_env(HOME=str(home)).items() if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME")}
    proc = subprocess.run(module_command("common.report", h100_trace("p1_64"), "--short", "--html",
                                         tmp_path / "p.html"), cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stderr.splitlines()[0].startswith("wrote "), proc.stderr
    assert "atplotlib" not in proc.stderr


def test_a_step_of_nothing_is_no_ratio_and_no_negative_zero():
    """Issue 38, item 4: "-0.0 µs" step walls, and "B's steps vary 289323000000.0x (-0.0 µs-289 µs)": a step
    of (about) nothing reads as 0.0 µs, and the spread is said from-to, with no ratio over it."""
    from common.report.facts.steadiness import Spread, TwoRuns
    from common.report.units import fmt_us

    assert fmt_us(-0.0) == fmt_us(-0.01) == fmt_us(0.0) == "0.0 µs" and fmt_us(-3.0) == "-3.0 µs"
    b = Spread((-0.0, 289.3, 150.0))
    assert b.vary_text() == "vary from 0.0 µs to 289 µs"
    why = TwoRuns(Spread((100.0, 101.0, 102.0)), b).why_not_apart
    assert "vary from 0.0 µs to 289 µs" in why and "x (" not in why and "-0.0" not in why


@pytest.mark.parametrize("amount, decimal, binary", [
    (4 * 10**14, "400.0 TB", "372,529.03 GiB"),  # --size 10000000: a float still holds it
    (4 * 10**320, "10^320 B", "10^311 GiB"),  # no float holds it: its power of ten, never an OverflowError
    (-(10**400), "-10^400 B", "-10^390 GiB"),
    (float("inf"), "n/a", "n/a"),
], ids=["4e14", "4e320", "-1e400", "inf"])
def test_a_size_beyond_any_float_is_written_by_its_power_of_ten(amount, decimal, binary):
    """The suite's byte formatters (common.amounts) write any whole number a shape can multiply to."""
    from common.amounts import fmt_bytes_binary, fmt_bytes_decimal

    assert (fmt_bytes_decimal(amount), fmt_bytes_binary(amount)) == (decimal, binary)
