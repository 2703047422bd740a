"""``--glance`` as the posts' closing table (issues 25, 26, 27): the device time per call on a GPU run
(the fused backends ranked as the device ran them, not as the host waited), the variants in the
posts' order, each against the one before it with compare's control, the lesson each variant teaches,
and folders that hold other JSON (a report.json, the command's own -o output)."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from rich.console import Console

from conftest import command_env, run_module, run_script
from h100 import RUN_NAMES, h100_report, h100_trace
from test_compare_control import slowed_copy

ATTN_SMALL = ["--batch", "2", "--heads", "4", "--seq", "128", "--head_dim", "32"]


def glance(*paths, extra=()) -> list[dict]:
    out = run_module("common.report", "--glance", "--json", *extra, *paths)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def glance_text(*paths) -> str:
    out = run_module("common.report", "--glance", *paths, env=command_env(COLUMNS="80"))
    assert out.returncode == 0, out.stderr
    assert max(map(len, out.stdout.splitlines())) <= 80
    return " ".join(out.stdout.split())


def by_run(rows: list[dict]) -> dict:
    return {r["trace"].split("/runs/")[1].split("/")[0]: r for r in rows}


# ----------------------------------------------------------------------------- 25.3: time per call


def test_the_fused_backends_rank_by_device_time_per_call():
    """cuDNN 57 µs < flash 94 µs < efficient 182 µs on the device, whatever the host waited."""
    rows = by_run(glance(*(h100_trace(n) for n in ("sdpa_cudnn", "sdpa_flash", "sdpa_efficient"))))
    assert {r["time"] for r in rows.values()} == {"device"}
    us = {n: rows[f"sdpa_{n}"]["median_us"] for n in ("cudnn", "flash", "efficient")}
    assert us["cudnn"] < us["flash"] < us["efficient"]
    assert us == pytest.approx(dict(cudnn=58, flash=95, efficient=182), abs=2)
    assert all(r["cpu_median_us"] > 60 for r in rows.values())  # the host's time, beside it, named
    text = glance_text(h100_trace("sdpa_cudnn"))
    assert "device 58 µs per call (median; 58 µs-58 µs; the work a call launched), CPU 85 µs (wall, median)" in text  # the calls of #3, #4


def test_inplace_saves_14_percent_of_device_time_per_call():
    naive, inplace = (h100_report(n)[0].phases[0] for n in ("attn_naive", "attn_inplace"))
    assert inplace.device_median_us / naive.device_median_us - 1 == pytest.approx(-0.14, abs=0.01)


def test_the_short_report_and_the_annotation_table_lead_with_device_time():
    from common.report.render.text import phases_table, render_short

    tables, findings = h100_report("sdpa_cudnn")
    buf = io.StringIO()
    render_short(tables, findings, Console(file=buf, width=200))
    assert "per call: sdpa_fwd 3x device 58 µs median, CPU 113 µs mean (7 ops, GPU busy 16%)" in buf.getvalue()
    buf = io.StringIO()
    Console(file=buf, width=200).print(phases_table(tables))
    header = next(line for line in buf.getvalue().splitlines() if "┃" in line and "annotation" in line)
    assert header.index("device time") < header.index("CPU wall")
    assert "58 µs" in buf.getvalue()


# ----------------------------------------------------------------------------- 26.7: the posts' table


def test_every_run_in_the_posts_order_with_its_lesson():
    rows = glance(*(h100_trace(n).parent for n in RUN_NAMES))
    order = [r["trace"].split("/runs/")[1].split("/")[0] for r in rows]
    part3 = [n for n in order if n.startswith(("attn_", "sdpa_"))]
    assert part3 == ["attn_naive", "attn_inplace", "sdpa_math", "sdpa_efficient", "sdpa_flash", "sdpa_cudnn"]
    assert order.index("mlp") < order.index("mlp_compile") < order.index("liger") < order.index("attn_naive")
    by = by_run(rows)
    assert by["attn_naive"]["lesson"].startswith("out_of_place_copy:")
    assert by["sdpa_math"]["lesson"].startswith("fp32_upcast: SDPA's math backend computes in fp32")
    v = by["attn_inplace"]["versus"]
    assert v["against"].startswith("04_a_naive_attention") and v["judged"] and v["ratio"] == pytest.approx(0.86, abs=0.01)
    assert [name for name, _ in v["gone"]] == ["Memcpy DtoD (Device -> Device)"] and not v["new"]
    changed = by["p1_4096_compile"]["versus"]["changed"]
    assert len(changed) == 1 and "(bz -> badd)" in changed[0][0]


def test_the_cpu_lessons_teach_their_own_point(tmp_path):
    """Small CPU runs: in-place says the copy is gone (not "all as guessed"); an fp32 math run shows the
    rebuilt mask or _safe_softmax, not the upcast it does not do."""
    for script, args in (("04_a_naive_attention.py", []), ("04_b_inplace_ops_attention.py", []),
                         ("04_c_sdpa_attention.py", ["--backend", "math", "--dtype", "fp32"])):
        run = run_script(script, *ATTN_SMALL, *args, "--no-report", trace_dir=tmp_path / script[:4])
        assert run.returncode == 0, run.stderr
    rows = glance(tmp_path)
    assert [r["variant"].split()[0] for r in rows] == ["04_a_naive_attention", "04_b_inplace_ops_attention",
                                                       "04_c_sdpa_attention"]
    naive, inplace, math = rows
    assert "all as guessed" not in inplace["lesson"]
    gone = [name for name, _ in inplace["versus"]["gone"]]
    assert "aten::clone" in gone and inplace["versus"]["against"].startswith("04_a_naive_attention")
    assert math["lesson"].startswith(("causal_mask_rebuilt:", "safe_softmax:")), math["lesson"]


# ----------------------------------------------------------------------------- 26.2: the same control


def test_glance_uses_compare_s_control(tmp_path):
    shutil.copy(h100_trace("attn_naive"), tmp_path / "naive.json.gz")
    doc = json.load(__import__("gzip").open(h100_trace("attn_inplace"), "rt"))
    assert doc["lesson"]["script"] == "04_b_inplace_ops_attention"
    slowed_copy(h100_trace("attn_inplace"), tmp_path / "inplace.json.gz", 1.65)
    naive, inplace = glance(tmp_path)
    v = inplace["versus"]
    assert not v["judged"] and "the difference is within the machine's drift" in v["short"]
    assert "took 1.65x as long in B" in v["short"]


# ----------------------------------------------------------------------------- 25.15 / 27.4: other JSON


def test_a_folder_with_a_report_json_and_the_glance_s_own_output(tmp_path):
    run = tmp_path / "attn_naive"
    shutil.copytree(h100_trace("attn_naive").parent, run)
    (run / "report.json").write_text(json.dumps({"schema": "common.report/1", "findings": []}))
    text = glance_text(tmp_path)
    assert "04_a_naive_attention" in text and "skipped 1 file that is not a trace:" in text
    assert "attn_naive/report.json(notatrace(notraceEvents))" in "".join(text.split())
    out = tmp_path / "out.json"
    for _ in range(2):  # the second run finds its first output in the folder: never read
        proc = run_module("common.report", "--glance", "--json", "-o", out, tmp_path)
        assert proc.returncode == 0, proc.stderr
        rows = json.loads(out.read_text())
        assert len(rows) == 1 and rows[0]["variant"].startswith("04_a_naive_attention")
        assert "out.json" not in proc.stderr and "report.json" in proc.stderr
    (run / "8x16x1024x64_bf16_warm_eager.json.gz").unlink()
    proc = run_module("common.report", "--glance", tmp_path / "attn_naive")
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "report.json" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
