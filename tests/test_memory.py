"""Memory from the trace's [memory] events: the TensorBoard plugin's figures on its ResNet-50 sample, a small
trace worked out by hand, and the three lessons memory teaches (04_a vs 04_b, naive vs flash, the KV cache)."""

from __future__ import annotations

import gzip
import html
import json
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from browser import in_ci
from conftest import (CPU_DTYPE_BYTES, DATA_TRACES, REPO, event, report_json, run_module, run_script, trace_of,
                      write_trace)
from test_pictures import BROWSER, _chromium

KINETO = DATA_TRACES / "kineto"
RESNET = KINETO / "v100_resnet50_train.json.gz"
PLUGIN = json.loads((KINETO / "v100_resnet50_train.tb_memory.json").read_text())
COLUMNS = ("self_size_increase_bytes", "self_allocation_bytes", "self_allocation_count", "size_increase_bytes",
           "allocation_bytes", "allocation_count", "calls")  # the order of the plugin's figures


def rows_of(report: dict) -> dict:
    return {(r["device"], r["name"]): [r[c] for c in COLUMNS] for r in report["memory"]["ops"]}


@pytest.fixture(scope="module")
def resnet() -> dict:
    return report_json(RESNET)


def test_resnet_op_table_equals_the_plugins(resnet):
    """Every row of the plugin's Memory view (56 op names on CPU and GPU0), every column, to the byte."""
    plugin = {(d, name): v for d, ops in PLUGIN["stats"].items() for name, v in ops.items()}
    assert rows_of(resnet) == plugin
    assert sum(d["events"] for d in resnet["memory"]["devices"]) == PLUGIN["records"] == 12_838


def test_resnet_peaks_and_counts_reconstructed_from_bytes(resnet):
    """The 2021 trace records only Bytes (the plugin shows no peak for it): the running sum per device,
    computed here from the raw JSON, gives the peak; the window's allocations and frees are counted."""
    assert PLUGIN["peaks"] == {}
    raw = json.loads(gzip.decompress(RESNET.read_bytes()))["traceEvents"]
    mem = sorted((e for e in raw if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    steps = [e for e in raw if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
    w0, w1 = min(e["ts"] for e in steps), max(e["ts"] + e["dur"] for e in steps)
    for d in resnet["memory"]["devices"]:
        mine = [e for e in mem if ("CPU" if e["args"]["Device Type"] == 0 else f"GPU{e['args']['Device Id']}")
                == d["device"]]
        level = np.cumsum([e["args"]["Bytes"] for e in mine])
        inside = [e["args"]["Bytes"] for e in mine if w0 <= e["ts"] <= w1]
        assert d["totals"] == "reconstructed" and d["live_at_window_end"] is None  # no Total Allocated, no Addr
        assert d["peak_allocated_bytes"] == level.max()
        assert d["allocations_in_window"] == sum(b > 0 for b in inside)
        assert d["frees_in_window"] == sum(b < 0 for b in inside)
        assert d["allocated_bytes_in_window"] == sum(b for b in inside if b > 0)
    gpu = resnet["memory"]["devices"][0]
    assert gpu["device"] == "GPU0" and gpu["peak_allocated_bytes"] == 2_791_636_480


def memory(ts, nbytes, total, addr, tid=7, device_type=1, device_id=0, reserved=None):
    args = {"Device Type": device_type, "Device Id": device_id, "Bytes": nbytes, "Total Allocated": total,
            "Addr": addr}
    if reserved is not None:
        args["Total Reserved"] = reserved
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": tid, "ts": ts, "args": args}


def small_trace(path):
    """Worked by hand: ProfilerStep#1 [0, 100) holds aten::to [10, 60) whose only child is aten::to [12, 50)
    (one node), holding aten::empty [20, 30); aten::add [60, 90); a user annotation fwd [5, 95) (not a node)."""
    ops = [event("ProfilerStep#1", 1000, 100, cat="user_annotation", tid=7), event("fwd", 1005, 90,
           cat="user_annotation", tid=7),
           event("aten::to", 1010, 50, tid=7), event("aten::to", 1012, 38, tid=7), event("aten::empty", 1020, 10, tid=7),
           event("aten::add", 1060, 30, tid=7)]
    mem = [memory(1021, 1024, 1024, 1, reserved=2048),  # in aten::empty
           memory(1040, 512, 1536, 2, reserved=2048),  # in the inner aten::to: the outer one's (merged)
           memory(1061, 4096, 5632, 3, reserved=8192),  # in aten::add
           memory(1070, -1024, 4608, 1, reserved=8192),  # a free in aten::add: counted there (where it happens)
           memory(1090, 256, 4864, 4, reserved=8192),  # at aten::add's end: not in it (start <= ts < end), in fwd
           memory(1096, -512, 4352, 2, reserved=8192)]  # in the step only: no op's
    return write_trace(path, ops + mem)


def test_small_trace_by_hand(tmp_path):
    report = report_json(small_trace(tmp_path / "small.json"))
    (gpu,) = report["memory"]["devices"]
    assert (gpu["device"], gpu["totals"], gpu["peak_allocated_bytes"], gpu["peak_reserved_bytes"]) == \
        ("GPU0", "recorded", 5632, 8192)
    assert (gpu["allocations_in_window"], gpu["frees_in_window"], gpu["allocated_at_window_end_bytes"]) == (4, 2, 4352)
    assert (gpu["live_at_window_end"], gpu["live_at_window_end_bytes"]) == (2, 4096 + 256)  # addresses 3 and 4
    assert gpu["curve"][:2] == [[21.0, 1024], [40.0, 1536]]
    assert rows_of(report) == {
        ("GPU0", "aten::empty"): [1024, 1024, 1, 1024, 1024, 1, 1],
        ("GPU0", "aten::to"): [512, 512, 1, 1536, 1536, 2, 1],  # one node, its child merged in
        ("GPU0", "aten::add"): [3072, 4096, 1, 3072, 4096, 1, 1],
    }
    (fwd,) = report["memory"]["annotations"]
    assert (fwd["name"], fwd["calls"], fwd["allocations_per_call"], fwd["allocated_bytes_per_call"]) == \
        ("fwd", 1, 4, 1024 + 512 + 4096 + 256)
    assert {o["name"]: o["bytes_per_call"] for o in fwd["ops"]} == {"aten::to": 1536, "aten::add": 4096,
                                                                     "(no op)": 256}


def test_small_trace_and_resnet_equal_the_plugin_run_directly(tmp_path):
    """The plugin's own parser on the small trace and the sample, from uv's cache (offline: ``.ci/run`` fetches it;
    elsewhere the test skips where it was never fetched)."""
    small = small_trace(tmp_path / "small.json")
    proc = subprocess.run(["uv", "run", "--offline", "--no-project", "--with", "torch-tb-profiler==0.4.3", "python",
                           str(REPO / "tests" / "tb_plugin_memory.py"), str(small), str(RESNET)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        missing = f"the TensorBoard plugin is not in uv's cache: {proc.stderr.strip()[-200:]}"
        if in_ci():  # .ci/run fetches it first: a test that skips in CI checks nothing
            pytest.fail(f"{missing} (in CI, .ci/run fetches it before the tests)")
        pytest.skip(missing)
    plugin = json.loads(proc.stdout)
    for path in (small, RESNET):
        theirs = {(d, name): v for d, ops in plugin[str(path)]["stats"].items() for name, v in ops.items()}
        assert rows_of(report_json(path)) == theirs
    assert plugin[str(small)]["peaks"] == {"GPU0": 5632}


def test_text_html_and_annotated_copy(tmp_path):
    trace = small_trace(tmp_path / "small.json")
    proc = run_module("common.report", trace, "--html", tmp_path / "p.html", "--annotate", tmp_path / "a.json")
    assert proc.returncode == 0, proc.stderr
    assert "Memory" in proc.stdout and "peak allocated 5.5 KiB" in proc.stdout
    page = (tmp_path / "p.html").read_text()
    curve = figure_data(page, "memory-curve")
    assert curve["peaks"] == {"GPU0": dict(at_us=61.0, bytes=5632, label="peak 5.5 KiB")}  # aten::add's 4 KiB
    assert curve["unit"] == "KiB" and curve["curves"]["GPU0"] == report_json(trace)["memory"]["devices"][0]["curve"]
    counters = [e for e in json.loads((tmp_path / "a.json").read_text())["traceEvents"] if e["ph"] == "C"]
    assert [(e["name"], e["args"]["bytes"]) for e in counters][:3] == [("allocated GPU0", 1024), ("allocated GPU0", 1536),
                                                                       ("allocated GPU0", 5632)]
    assert report_json(tmp_path / "a.json")["memory"] == report_json(trace)["memory"]  # the track is left out
    assert report_json(RESNET.parent.parent / "hta" / "cpu_only_rank34.json.gz")["memory"] is None


def figure_data(page: str, plot_id: str) -> dict:
    """The numbers a figure of the page draws (its data-plot attribute)."""
    found = re.search(rf'<figure id="{plot_id}" data-plot="([^"]*)"', page)
    assert found, f"no {plot_id} figure"
    return json.loads(html.unescape(found.group(1)))


# -- the lessons ----------------------------------------------------------------------------------------------------

LLM = ["--prompt-len", "8", "--new-tokens", "5", "--dtype", "fp32"]
FAST = ["--profile-memory", "--schedule", "0,0,2", "--no-report"]
LLM_RUNS = {
    "dynamic": ("05_llm.py", LLM),
    "static": ("05_llm.py", [*LLM, "--cache", "static"]),
}
SCORES = (2, 4, 256, 256)  # conftest's ATTENTION_SMALL: [batch, heads, seq, seq]
SCORES_BYTES = 2 * 4 * 256 * 256 * CPU_DTYPE_BYTES


@pytest.fixture(scope="module")
def lessons(attention_runs, tmp_path_factory) -> dict:
    """The report's JSON of each memory lesson: the session's Part 3 runs (naive, in-place, flash record
    allocations), and the LLM lesson once per cache, with --profile-memory, at tiny shapes."""
    base = tmp_path_factory.mktemp("memory")

    def go(item):
        key, (script, args) = item
        run = run_script(script, *args, *FAST, trace_dir=base / key, env={"HF_HUB_OFFLINE": "1"})
        return key, report_json(trace_of(run))

    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = dict(pool.map(go, LLM_RUNS.items()))
        reports.update(pool.map(lambda k: (k, report_json(trace_of(attention_runs[k]))), ("naive", "inplace", "flash")))
    return reports


def finding(report: dict, rule: str) -> dict:
    (f,) = [f for f in report["findings"] if f["rule"] == rule]
    return f


def test_inplace_mask_saves_one_score_matrix_per_forward(lessons):
    scores = SCORES_BYTES
    naive, inplace = (finding(lessons[k], "attention_scores_memory") for k in ("naive", "inplace"))
    assert naive["evidence"]["allocated_bytes_per_call"] - inplace["evidence"]["allocated_bytes_per_call"] == scores
    assert naive["evidence"]["masked_fill_copy_bytes_per_call"] == scores
    assert inplace["evidence"]["masked_fill_copy_bytes_per_call"] == 0
    assert naive["evidence"]["score_sized_per_call"] == inplace["evidence"]["score_sized_per_call"] + 1
    assert f"aten::masked_fill's copy is {scores:,} B" in naive["message"]


def test_flash_allocates_no_score_matrix(lessons):
    naive, flash = (finding(lessons[k], "attention_scores_memory")["evidence"] for k in ("naive", "flash"))
    assert naive["scores_shape"] == flash["scores_shape"] == list(SCORES)
    assert naive["largest_bytes"] == naive["scores_bytes"] and naive["score_sized_per_call"] >= 3
    assert flash["score_sized_per_call"] == 0 and flash["largest_bytes"] < flash["scores_bytes"]
    assert flash["largest_bytes"] == SCORES_BYTES // 256 * 64  # the output [batch, heads, seq, head_dim]


def test_kv_cache_grows_per_token_under_dynamic_and_not_under_static(lessons):
    from common.llm import default_config

    c = default_config()
    per_token = 2 * c.num_hidden_layers * 1 * c.num_key_value_heads * (c.hidden_size // c.num_attention_heads) * 4
    dynamic = finding(lessons["dynamic"], "kv_cache_growth")
    static = finding(lessons["static"], "kv_cache_growth")
    assert dynamic["evidence"]["verdict"] == "grows" and static["evidence"]["verdict"] == "flat"
    assert abs(dynamic["evidence"]["live_growth_per_token"] - per_token) <= 64  # the keys and values, and the token
    assert abs(dynamic["evidence"]["allocated_growth_per_token"] - per_token) <= 64
    assert abs(static["evidence"]["allocated_growth_per_token"]) < 1
    assert abs(static["evidence"]["live_growth_per_token"]) <= 64
    (cpu,) = lessons["dynamic"]["memory"]["devices"]
    assert cpu["device"] == "CPU" and cpu["totals"] == "recorded" and cpu["peak_allocated_bytes"] > 0


# -- the memory curve in a real browser -----------------------------------------------------------------------------

HARNESS = """<!doctype html><html><body>{frames}<pre id="out">pending</pre><script>
window.onload = () => {{
  const box = e => {{ if (!e) return null; const r = e.getBoundingClientRect();
                     return [r.left, r.top, r.right, r.bottom].map(Math.round); }};
  const seen = [...document.querySelectorAll("iframe")].map(f => {{
    const d = f.contentDocument, fig = d.getElementById("memory-curve");
    const svg = fig && fig.querySelector("svg"), peak = fig && fig.querySelector("[id^=memory-curve-peak-] text");
    const texts = svg ? [...svg.querySelectorAll("text")].map(t => t.textContent) : [];
    return {{svg: box(svg), peak: box(peak), label: peak && peak.textContent,
             shown: !!svg && getComputedStyle(svg).visibility === "visible" && getComputedStyle(fig).display !== "none",
             lines: svg ? [...svg.querySelectorAll("[id^=line2d] path")].filter(p => p.getTotalLength() > 50).length : 0,
             ylabel: texts.find(t => t.startsWith("allocated (")), texts: texts.length}};
  }});
  document.getElementById("out").textContent = "MEMORY " + JSON.stringify(seen);
}};
</script></body></html>"""


@pytest.mark.usefixtures("chromium")  # skips without Chromium, fails in CI
def test_memory_curve_in_a_real_browser(attention_runs, tmp_path):
    """The hand-made trace's page and a real 04_a --profile-memory run's, in one Chromium: each draws the
    curve (an SVG with a size and a drawn line), its peak labelled with the report's peak and inside the
    picture, the y axis in the peak's unit."""
    pages = {"small": (small_trace(tmp_path / "small.json"), "peak 5.5 KiB", "allocated (KiB)"),
             "naive": (trace_of(attention_runs["naive"]), None, None)}
    (cpu,) = report_json(pages["naive"][0])["memory"]["devices"]
    peak = cpu["peak_allocated_bytes"]
    assert SCORES_BYTES <= peak < 1 << 30  # at least one [batch, heads, seq, seq] score matrix, in MiB
    pages["naive"] = (pages["naive"][0], f"peak {peak / (1 << 20):,.1f} MiB", "allocated (MiB)")
    for name, (trace, _, _) in pages.items():
        proc = run_module("common.report", trace, "--html", tmp_path / f"{name}.html")
        assert proc.returncode == 0, proc.stderr
    harness = tmp_path / "harness.html"
    harness.write_text(HARNESS.format(frames="".join(
        f'<iframe src="{name}.html" width="1100" height="900"></iframe>' for name in pages)))
    proc = _chromium("--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom",
                     harness.as_uri(), profile=tmp_path / "p")
    found = re.search(r"MEMORY (\[.*?\])</pre>", proc.stdout)
    assert found, proc.stderr[-2000:]
    for seen, (name, (_, label, ylabel)) in zip(json.loads(found.group(1)), pages.items()):
        left, top, right, bottom = seen["svg"]
        assert right - left > 300 and bottom - top > 100 and seen["shown"], (name, seen)
        assert seen["lines"] >= 1, (name, seen)  # the step line drawn, not an empty axis
        assert (seen["label"], seen["ylabel"]) == (label, ylabel), (name, seen)
        p_left, p_top, p_right, p_bottom = seen["peak"]
        assert left <= p_left < p_right <= right and top <= p_top < p_bottom <= bottom, (name, seen)
