"""Findings that name a moment point at it: each one's spans are the times of the events its
evidence names (µs from the window's start), recomputed here from the trace's raw events, on the
H100 runs and on CPU lesson traces; and the full text report prints, per finding with spans, the
``common.view --at`` command that opens the timeline there (on the annotated copy, where the same
run wrote one)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from common.report import analyze
from common.report.render.timeline_links import finding_window
from tests.conftest import REPO, Trace, command_env, run_module, run_script
from tests.h100 import finding, h100_report, h100_trace

TOL = 0.01  # µs: the model's times are the trace's, less t0
DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")


def _rel(t, e) -> tuple[float, float]:
    """(start, end) of raw event ``e`` in µs from the window's start."""
    return e["ts"] - t.model.t0, e["ts"] + e["dur"] - t.model.t0


def _window(t) -> tuple[float, float]:
    """Where a finding may point, from the raw events: the window, to the end of the device work that runtime
    calls inside it launched (by correlation id; a device-bound run's GPU runs on after the host's last step)."""
    if t.model.path not in _WINDOWS:
        w0, w1 = t.model.window
        events = Trace(REPO / t.model.path).events  # (an absolute path stays as it is)
        inside = {e["args"]["correlation"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
                  and w0 - TOL <= e["ts"] - t.model.t0 <= w1 + TOL and "correlation" in e.get("args", {})}
        ends = [_rel(t, e)[1] for e in events if e.get("cat") in DEVICE and e.get("args", {}).get("correlation") in inside]
        _WINDOWS[t.model.path] = (w0, max([w1, *ends]))
    return _WINDOWS[t.model.path]


_WINDOWS: dict = {}


def _in_window(t, e) -> bool:
    a, b = _rel(t, e)
    w0, w1 = _window(t)
    return a >= w0 - TOL and b <= w1 + TOL


def _clipped(t, e) -> tuple[float, float] | None:
    """(start, end) of ``e`` cut to the window; None when it lies wholly outside."""
    a, b = _rel(t, e)
    w0, w1 = _window(t)
    return (max(a, w0), min(b, w1)) if min(b, w1) >= max(a, w0) else None


def _spans(f) -> list[tuple[float, float]]:
    return sorted((s.start_us, s.start_us + s.dur_us) for s in f.spans)


def _same(t, f, events) -> None:
    """The finding's spans are exactly these raw events' times, cut to the window."""
    want = sorted(w for w in (_clipped(t, e) for e in events) if w is not None)
    got = _spans(f)
    assert want and len(got) == len(want), (f.rule, got, want)
    for (a, b), (x, y) in zip(got, want):
        assert abs(a - x) < TOL and abs(b - y) < TOL, (f.rule, (a, b), (x, y))


def _launched_from(tr: Trace, ops: list[dict]) -> list[dict]:
    """The device events launched by a runtime call nested in one of ``ops`` (by correlation id)."""
    corr = {r["args"]["correlation"] for op in ops for r in tr.inside(op) if r.get("cat") in ("cuda_runtime", "cuda_driver")}
    return [e for e in tr.events if e.get("cat") in DEVICE and e.get("args", {}).get("correlation") in corr]


def _inside_any(tr: Trace, outers: list[dict], name: str) -> list[dict]:
    return [e for o in outers for e in tr.inside(o, name)]


# ----------------------------------------------------------------------------- CPU lesson traces

SMALL = ["--batch", "2", "--heads", "4", "--seq", "256", "--head_dim", "64"]
CPU_PLAN = {"naive": ("04_a_naive_attention.py", SMALL),
            "math": ("04_c_sdpa_attention.py", [*SMALL, "--backend", "math", "--dtype", "bf16"]),
            "flash": ("04_c_sdpa_attention.py", [*SMALL, "--backend", "flash"])}


@pytest.fixture(scope="module")
def cpu_runs(tmp_path_factory):
    """{key: (trace path, tables, findings)} of small Part 3 runs on the CPU."""
    out = {}
    for key, (script, args) in CPU_PLAN.items():
        run = run_script(script, *args, "--no-report", trace_dir=tmp_path_factory.mktemp(key))
        (path,) = [p for p in run.trace_dir.iterdir() if p.name.endswith(".json")]
        out[key] = (path, *analyze(path))
    return out


def _cpu_finding(cpu_runs, key, rule):
    path, t, findings = cpu_runs[key]
    f = next((f for f in findings if f.rule == rule), None)
    assert f is not None, [f.rule for f in findings]
    return Trace(path), t, f


def test_cpu_out_of_place_copy_points_at_the_clones(cpu_runs):
    tr, t, f = _cpu_finding(cpu_runs, "naive", "out_of_place_copy")
    _same(t, f, _inside_any(tr, tr.named("aten::masked_fill"), "aten::clone"))


def _not_guessed(tr: Trace, f) -> list[dict]:
    """The raw events of the work the guess did not name, in every call: the op (inside the ops the
    row says it is under) and, on a GPU, the device event it launched."""
    out = []
    for row in (r["seen"] for r in f.evidence["rows"] if r["status"] == "not guessed"):
        around = tr.named(f.evidence["annotation"])
        for name in row["via"]:
            around = _inside_any(tr, around, name)
        ops = _inside_any(tr, around, row["op"])
        if row["kernel"] is None:
            out += ops
            continue
        launched = {id(op): [e for e in _launched_from(tr, [op]) if e["name"] == row["kernel"]] for op in ops}
        out += [op for op in ops if launched[id(op)]] + [e for found in launched.values() for e in found]
    return list({id(e): e for e in out}.values())  # rows alike (math's casts) name the same events


def test_cpu_guess_vs_seen_points_at_the_work_nobody_guessed(cpu_runs):
    tr, t, f = _cpu_finding(cpu_runs, "naive", "guess_vs_seen")
    assert f.evidence["not_guessed"]
    _same(t, f, _not_guessed(tr, f))


def test_cpu_sdpa_math_points_at_its_mask_casts_and_safe_softmax(cpu_runs):
    tr, t, f = _cpu_finding(cpu_runs, "math", "safe_softmax")
    math = tr.named("aten::_scaled_dot_product_attention_math")
    _same(t, f, _inside_any(tr, math, "aten::_safe_softmax"))
    _, _, mask = _cpu_finding(cpu_runs, "math", "causal_mask_rebuilt")
    direct = [e for e in _inside_any(tr, math, None) if e["name"] in mask.evidence["ops"]
              and _parent(tr, e) in [id(m) for m in math]]
    _same(t, mask, direct)
    _, _, up = _cpu_finding(cpu_runs, "math", "fp32_upcast")
    tos = [e for e in _inside_any(tr, math, "aten::to") if _parent(tr, e) in [id(m) for m in math]]
    _same(t, up, _inside_any(tr, tos, "aten::_to_copy"))
    assert len(up.spans) == up.evidence["casts"]


def _parent(tr: Trace, e: dict) -> int:
    """id() of the innermost event around ``e`` on its thread."""
    around = [o for o in tr.events if o is not e and o.get("tid") == e.get("tid") and o["ts"] <= e["ts"]
              and e["ts"] + e["dur"] <= o["ts"] + o["dur"] + 1e-3 and o.get("cat") == "cpu_op"]
    return id(min(around, key=lambda o: o["dur"])) if around else 0


def test_cpu_fused_attention_points_at_the_fused_op(cpu_runs):
    tr, t, f = _cpu_finding(cpu_runs, "flash", "fused_attention")
    (op,) = f.evidence["ops"]
    _same(t, f, _inside_any(tr, tr.named("aten::scaled_dot_product_attention"), op))


# ----------------------------------------------------------------------------- the H100 runs


def _h100(name: str, rule: str):
    f = finding(name, rule)
    assert f is not None, (name, rule)
    return Trace(h100_trace(name)), h100_report(name)[0], f


def test_out_of_place_copy_points_at_the_clone_and_its_memcpy():
    tr, t, f = _h100("attn_naive", "out_of_place_copy")
    clones = _inside_any(tr, tr.named("aten::masked_fill"), "aten::clone")
    copies = _launched_from(tr, clones)
    assert len(clones) == 3 and [e["name"] for e in copies] == ["Memcpy DtoD (Device -> Device)"] * 3
    _same(t, f, clones + copies)


@pytest.mark.parametrize("name", ["attn_naive", "attn_inplace", "sdpa_math", "sdpa_cudnn"])
def test_guess_vs_seen_points_at_the_work_nobody_guessed(name):
    tr, t, f = _h100(name, "guess_vs_seen")
    want = _not_guessed(tr, f)
    if name == "attn_naive":  # the masked_fill's copy and cuBLAS's memset, with the ops that launched them
        assert {e["name"] for e in want} == {"aten::copy_", "Memcpy DtoD (Device -> Device)", "aten::bmm",
                                             "Memset (Device)"}
    _same(t, f, want)


@pytest.mark.parametrize("name", ["sdpa_flash", "sdpa_efficient", "sdpa_cudnn"])
def test_fused_attention_points_at_its_op_and_kernel(name):
    tr, t, f = _h100(name, "fused_attention")
    sdpa = tr.named("aten::scaled_dot_product_attention")
    ops = [e for op in f.evidence["ops"] for e in _inside_any(tr, sdpa, op)]
    kernels = [e for e in _launched_from(tr, sdpa) if e["name"] in f.evidence["kernels"]]
    assert kernels
    _same(t, f, ops + kernels)


@pytest.mark.parametrize("name", ["p1_4096_compile", "linear", "linear_compile"])
def test_hidden_dtod_copy_points_at_the_copies_or_addmms_gemms(name):
    tr, t, f = _h100(name, "hidden_dtod_copy")
    if f.evidence["variant"] == "copy":
        want = [e for e in tr.events if e.get("cat") == "gpu_memcpy" and e["name"].startswith("Memcpy DtoD")]
        assert len([e for e in want if _in_window(t, e)]) == f.evidence["pairs"]
    else:
        want = [e for e in _launched_from(tr, tr.named("aten::addmm")) if e.get("cat") == "kernel"]
        assert len(want) == f.evidence["addmm_gemms"]
    _same(t, f, want)


@pytest.mark.parametrize("name", ["p1_64_wait0", "p1_64_active20", "liger", "p1_4096_active20"])
def test_kernel_gap_spans_the_idle_time_between_two_device_events(name):
    tr, t, f = _h100(name, "kernel_gap")
    ((a, b),) = _spans(f)
    assert abs((b - a) - f.evidence["gap_us"]) < 0.1
    dev = [_rel(t, e) for e in tr.events if e.get("cat") in DEVICE]
    assert any(abs(end - a) < 0.1 for _, end in dev) and any(abs(start - b) < 0.1 for start, _ in dev)
    assert not any(start < b - 0.1 and end > a + 0.1 for start, end in dev)  # nothing ran in the gap


@pytest.mark.parametrize("name,rule", [("p1_64_wait0", "cold_first_step"), ("p1_64_active20", "cold_first_step"),
                                       ("p1_64_warm", "first_recorded_step"), ("sdpa_flash", "first_recorded_step")])
def test_first_step_findings_point_at_the_first_step(name, rule):
    tr, t, f = _h100(name, rule)
    step = tr.named(f.evidence["first_step"])[0]
    (a, b), *_ = _spans(f)
    start, end = _rel(t, step)
    assert abs(a - start) < TOL and b <= end + TOL and b - a > 0.9 * (end - start)


@pytest.mark.parametrize("name", ["p1_64_wait0", "p1_64_active20"])
def test_annotation_gap_spans_from_the_annotation_to_its_first_op(name):
    tr, t, f = _h100(name, "annotation_gap")
    step = tr.named(t.model.steps[0].name)[0]
    (ann,) = [e for e in tr.inside(step, f.evidence["annotation"]) if e.get("cat") == "user_annotation"]
    first = min((e for e in tr.inside(ann) if e.get("cat") == "cpu_op"), key=lambda e: e["ts"])
    assert first["name"] == f.evidence["first_op"]
    ((a, b),) = _spans(f)
    assert abs(a - _rel(t, ann)[0]) < TOL and abs(b - _rel(t, first)[0]) < TOL


# ----------------------------------------------------------------------------- the commands


def _snippet(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("on the timeline"))
    body = [line.strip() for line in lines[start + 1:] if line.startswith("  ")]
    return [line for line in body if line]


def _run_snippet(lines: list[str]) -> list[list[str]]:
    """The snippet run by a shell with ``uv`` standing in: each command's words."""
    script = "uv() { printf '%s\\0' \"$@\"; printf '\\n'; }\n" + "\n".join(lines)
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    return [line.split("\0")[:-1] for line in out.splitlines() if line]


@pytest.mark.parametrize("columns", ["80", "200"])
def test_text_report_prints_the_commands_that_open_each_moment(columns):
    path = h100_trace("attn_naive")
    t, findings = h100_report("attn_naive")
    text = run_module("common.report", path, env=command_env(COLUMNS=columns)).stdout
    if columns == "80":
        assert all(len(line) <= 80 for line in text.splitlines()), text
    lines = _snippet(text)
    commands = _run_snippet(lines)
    with_spans = [f for f in findings if f.spans]
    assert {"out_of_place_copy", "guess_vs_seen"} <= {f.rule for f in with_spans}
    assert len(commands) == len(with_spans)
    for f, words in zip(with_spans, commands):
        assert words[:3] == ["run", "-m", "common.view"] and words[4] == "--at"
        assert (REPO / words[3]).resolve() == path.resolve()
        start, end = map(float, words[5].split(","))
        window = finding_window(t, f)
        assert (start, end) == pytest.approx(window, abs=1e-3)
        assert any(f"# {f.rule}" in line for line in lines)
    # each copy under masked_fill that starts inside the report's window (the host's steps: on this
    # GPU-bound run the later copies run after it) starts inside the window its command opens
    tr = Trace(path)
    copies = _launched_from(tr, _inside_any(tr, tr.named("aten::masked_fill"), "aten::clone"))
    start, end = map(float, commands[[f.rule for f in with_spans].index("out_of_place_copy")][5].split(","))
    inside = [e for e in copies if e["ts"] - t.model.t0 < t.model.window[1]]
    assert len(copies) == 3 and inside and all(start <= e["ts"] < end for e in inside)
    short = run_module("common.report", "--short", path, env=command_env(COLUMNS=columns)).stdout
    assert "on the timeline" not in short


def test_commands_name_the_annotated_copy_the_same_run_wrote(tmp_path):
    path = h100_trace("attn_naive")
    folder = tmp_path / "a_folder_name_long_enough_that_T_does_not_fit_80_columns"  # a learner's long path
    folder.mkdir()
    page, annotated = folder / "r.html", folder / "a.json.gz"
    proc = run_module("common.report", path, "--html", page, "--annotate", annotated,
                      env=command_env(COLUMNS="80"))
    assert proc.returncode == 0, proc.stderr
    commands = _run_snippet(_snippet(proc.stdout))
    assert commands and all((REPO / w[3]).resolve() == annotated.resolve() for w in commands)
    shown = re.findall(r"see it on the timeline: <code>uv run -m common.view (\S+) --at", page.read_text())
    assert shown and all((REPO / s).resolve() == annotated.resolve() for s in shown)
    plain = tmp_path / "plain.html"
    run_module("common.report", path, "--html", plain, env=command_env(COLUMNS="80"))
    assert str(path.name) in plain.read_text() and annotated.name not in plain.read_text()


def test_outside_the_project_a_long_command_continues_on_the_next_line(tmp_path):
    from common.report.render.timeline_links import timeline_snippet

    t, findings = h100_report("attn_naive")
    lines = timeline_snippet(t, findings, width=60)
    assert all(len(line) <= 60 for line in lines[1:]), lines
    assert any(line.endswith("\\") for line in lines)
    words = _run_snippet(lines)
    assert len(words) == sum(1 for f in findings if f.spans) and all(w[4] == "--at" for w in words)



def test_a_lessons_page_names_the_annotated_copy_it_wrote(tmp_path):
    """A lesson's ``--html --annotate`` (:func:`common.report.lesson_report`): the page's timeline
    commands open the copy it wrote beside it."""
    import io

    from rich.console import Console

    from common.report import lesson_report

    page, annotated = tmp_path / "r.html", tmp_path / "r.annotated.json"
    lesson_report(h100_trace("attn_naive"), Console(file=io.StringIO()), short=False, html=page, annotated=annotated)
    shown = re.findall(r"see it on the timeline: <code>uv run (?:--project \S+ )?-m common.view (\S+) --at",
                       page.read_text())
    assert annotated.exists() and shown and all(Path(s).name == annotated.name for s in shown)
