"""``--compare`` on the real H100 runs (issues 25 and 26): the device time per step judged, the device
work per step with its memcpys and memsets (gone, new, or a GEMM renamed only in its flags), the ops
whose calls or device time changed, and the control: work that did not change between the runs must
keep its time before a difference is called a result (a busier machine is simulated by slowing one
run's unchanged work in a copy of its trace); apart in every step is a result even when a run is noisy."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import command_env, event, run_module, run_script, write_trace
from h100 import h100_trace

ATTN_SMALL = ["--batch", "2", "--heads", "4", "--seq", "128", "--head_dim", "32"]


def compared(a, b) -> tuple[dict, str]:
    """(the JSON, the console text at 80 columns with its lines joined) of ``--compare a b``."""
    out = run_module("common.report", "--compare", a, b, "--json")
    assert out.returncode == 0, out.stderr
    text = run_module("common.report", "--compare", a, b, env=command_env(COLUMNS="80"))
    assert text.returncode == 0, text.stderr
    assert max(map(len, text.stdout.splitlines())) <= 80
    return json.loads(out.stdout), " ".join(text.stdout.split())


def slowed_copy(src, dest, factor: float, *, device: bool = True, cpu: bool = False):
    """A copy of the trace ``src`` as if its machine were ``factor`` times busier: every device event's
    duration (``device``), or every CPU event's times (``cpu``: start and duration, so nesting holds), scaled."""
    opener = gzip.open if str(src).endswith(".gz") else open
    with opener(src, "rt") as f:
        doc = json.load(f)
    device_cats = {"kernel", "gpu_memcpy", "gpu_memset"}
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        if device and e.get("cat") in device_cats:
            e["dur"] = e["dur"] * factor
        elif cpu and e.get("cat") not in device_cats:
            e["ts"], e["dur"] = e["ts"] * factor, e["dur"] * factor
    with gzip.open(dest, "wt") as f:
        json.dump(doc, f)
    return dest


# ----------------------------------------------------------------------------- 25.5: naive vs in-place


def test_naive_vs_inplace_the_copy_is_gone_and_the_device_time_is_judged():
    c, text = compared(h100_trace("attn_naive"), h100_trace("attn_inplace"))
    dev = c["summary"]["device"]
    assert dev["judged"] and dev["ratio"] == pytest.approx(1083.7 / 1263.0, abs=0.01)
    assert dev["control"]["ratio"] == pytest.approx(1.0, abs=0.01) and not dev["control"]["moved"]
    assert "device per step: B's median is 0.86x A's (1.26 ms vs 1.08 ms), and every B step is faster" in text
    assert c["summary"]["a_left_out"] == ["ProfilerStep#2"]  # the profiler's first step, said on the console
    assert "leave out the profiler's first step (A #2, B #2)" in text
    (gone,) = c["kernels"]["only_a"]
    assert gone["kind"] == "memcpy" and gone["name"].startswith("Memcpy DtoD")
    assert gone["a_calls_per_step"] == 1 and gone["a_per_step_us"] == pytest.approx(179, abs=2)
    assert c["kernels"]["only_b"] == [] and len(c["kernels"]["both"]) == 6  # 5 kernels and the small memset
    assert "device work per step (median): A 5 kernels, 1 memcpy, 1 memset; B 5 kernels, 1 memset" in text
    assert "gone Memcpy DtoD (Device -> Device) 1→0 179 µs - gone" in text


def test_the_page_shows_the_same_device_work_and_verdict(tmp_path):
    from test_pictures import verdicts_under

    page = tmp_path / "c.html"
    out = run_module("common.report", "--compare", h100_trace("attn_naive"), h100_trace("attn_inplace"), "--html", page)
    assert out.returncode == 0, out.stderr
    c, _ = compared(h100_trace("attn_naive"), h100_trace("attn_inplace"))
    text = page.read_text()
    assert verdicts_under(text, "compare-device") == {"compare": c["summary"]["device"]["verdict"]}
    assert "<td>gone</td><td>Memcpy DtoD (Device -&gt; Device)</td>" in text and "aten::copy_" in text


def test_gone_and_new_rows_are_per_step_not_totals():
    """flash vs cuDNN: the flash kernel's 94 µs per step (283 µs over the three steps) is gone."""
    c, text = compared(h100_trace("sdpa_flash"), h100_trace("sdpa_cudnn"))
    (gone,) = c["kernels"]["only_a"]
    assert "flash_fwd_kernel" in gone["name"] and gone["a_per_step_us"] == pytest.approx(94, abs=2)
    new = {r["kind"]: r for r in c["kernels"]["only_b"]}
    assert new["kernel"]["b_per_step_us"] == pytest.approx(57, abs=1.5) and new["memset"]["b_calls_per_step"] == 1
    assert "283 µs" not in text and "94 µs - gone" in text
    assert c["summary"]["device"]["judged"] and c["summary"]["device"]["ratio"] < 0.65  # cuDNN faster on the device


# ----------------------------------------------------------------------------- 25.13: a GEMM renamed in its flags


def test_compile_changes_the_gemm_flags_and_adds_the_bias_copy():
    c, text = compared(h100_trace("p1_4096"), h100_trace("p1_4096_compile"))
    k = c["kernels"]
    (changed,) = k["changed"]
    assert "_bz_" in changed["name"] and "_badd_" in changed["b_name"]
    assert not any(r["name"].startswith("nvjet") for r in k["only_a"] + k["only_b"])
    (copy,) = [r for r in k["only_b"] if r["kind"] == "memcpy"]
    assert copy["name"].startswith("Memcpy DtoD") and copy["b_calls_per_step"] == 1
    assert [r["kind"] for r in k["only_a"]] == ["kernel"] and "add" in k["only_a"][0]["name"].lower()
    assert "(bz → badd)" in text and "new Memcpy DtoD (Device -> Device) 0→1" in text


# ----------------------------------------------------------------------------- 26.8: per-op changes


def test_ops_whose_calls_or_device_time_changed():
    c, text = compared(h100_trace("attn_naive"), h100_trace("attn_inplace"))
    ops = {r["name"]: r for r in c["ops"]["changed"]}
    copy = ops["aten::copy_"]
    assert (copy["a_calls_per_step"], copy["b_calls_per_step"]) == (1, 0)
    assert copy["a_device_us"] == pytest.approx(179, abs=2) and copy["b_device_us"] == 0
    assert {"aten::clone", "aten::masked_fill"} <= {r["name"] for r in c["ops"]["vanished"]}
    assert "aten::softmax" not in ops and "aten::bmm" not in ops  # unchanged: not listed
    assert "aten::copy_ 1→0" in text


def test_eager_vs_compiled_mlp_gelu_and_mul_become_one_fused_kernel():
    c, text = compared(h100_trace("mlp"), h100_trace("mlp_compile"))
    ops = {r["name"]: r for r in c["ops"]["changed"]}
    assert ops["aten::gelu"]["b_calls_per_step"] == 0 and ops["aten::gelu"]["a_device_us"] > 20
    assert ops["aten::mul"]["b_calls_per_step"] == 0 and ops["aten::mul"]["a_device_us"] > 20
    fused = next(r for r in c["kernels"]["only_b"] if "fused" in r["name"])
    assert "gelu_mul" in fused["name"] and fused["b_calls_per_step"] == 1
    assert len([r for r in c["kernels"]["only_a"] if "elementwise" in r["name"]]) == 2
    assert "triton_poi_fused__unsafe_view_gel" in text


# ----------------------------------------------------------------------------- 26.2: the control


def test_a_busier_machine_is_not_a_slower_program(tmp_path):
    """In-place's unchanged kernels slowed 1.65x (the machine, not the code): cannot tell; the control named."""
    slow = slowed_copy(h100_trace("attn_inplace"), tmp_path / "inplace_busier.json.gz", 1.65)
    c, text = compared(h100_trace("attn_naive"), slow)
    dev = c["summary"]["device"]
    assert not dev["judged"] and dev["control"]["moved"] and dev["control"]["ratio"] == pytest.approx(1.65, abs=0.02)
    assert dev["verdict"].startswith("device per step: cannot tell which run is faster: the machine changed "
                                     "between the runs, or the work common to both did")
    assert "6 device events common to both" in dev["verdict"]
    assert "took 1.65x as long in B" in text and "B's median is" not in dev["verdict"]


def test_a_busier_cpu_is_not_a_slower_program(tmp_path):
    """A CPU lesson run against a copy of itself on a machine 1.65x busier: the control moved."""
    run = run_script("04_b_inplace_ops_attention.py", *ATTN_SMALL, "--no-report", trace_dir=tmp_path / "b")
    assert run.returncode == 0, run.stderr
    (trace,) = sorted((tmp_path / "b").glob("*.json"))
    slow = slowed_copy(trace, tmp_path / "busier.json.gz", 1.65, device=False, cpu=True)
    c, _ = compared(trace, slow)
    cpu = c["summary"]["cpu"]
    assert cpu["control"]["unit"] == "op" and "aten::bmm in aten::matmul" in cpu["control"]["names"]
    assert cpu["control"]["ratio"] == pytest.approx(1.65, rel=0.02) and cpu["control"]["moved"]
    assert not cpu["judged"]  # the control moved (or, on a loaded machine, the steps overlap as well)
    same, _ = compared(trace, trace)  # the same run twice: the control kept its time
    assert same["summary"]["cpu"]["control"]["ratio"] == pytest.approx(1.0) and not same["summary"]["cpu"]["judged"]


# ----------------------------------------------------------------------------- 26.3: apart in every step


def compile_steps(path, step_us, compiled: bool, control_us: float = 15.0):
    """CPU steps of 01_matmul_add's shape: an unchanged aten::empty (the control), then eager's aten::mm
    and aten::add, or the compiled region's aten::addmm."""
    ev, t = [], 0.0
    for i, wall in enumerate(step_us):
        ev += [event(f"ProfilerStep#{i + 2}", t, wall, "user_annotation"),
               event("matmul_add", t + 1, wall - 2, "user_annotation"), event("aten::empty", t + 1.5, control_us)]
        body = t + 2 + control_us
        if compiled:
            ev += [event("Torch-Compiled Region: 0/0", body, wall - 4 - control_us),
                   event("aten::addmm", body + 1, 20)]
        else:
            ev += [event("aten::mm", body, 20), event("aten::add", body + 21, 4)]
        t += wall + 1
    return write_trace(path, ev)


def test_apart_in_every_step_is_a_result_even_when_one_run_is_noisy(tmp_path):
    eager = compile_steps(tmp_path / "eager.json", [150, 72, 118, 90, 80, 100], compiled=False)
    comp = compile_steps(tmp_path / "compiled.json", [900, 203, 552, 300, 250, 400], compiled=True)
    c, text = compared(eager, comp)
    cpu = c["summary"]["cpu"]
    assert cpu["judged"] and cpu["ratio"] == pytest.approx(300 / 90, abs=1e-3)
    assert "every A step is faster than every step of the other (A 72 µs-118 µs, B 203 µs-552 µs)" in text
    assert "control: 1 op common to both (aten::empty in matmul_add) took 1.00x" in text
    # ... but still subject to the control: the same runs with the unchanged op 1.65x slower in B
    busier = compile_steps(tmp_path / "busier.json", [900, 203, 552, 300, 250, 400], compiled=True, control_us=24.75)
    c, _ = compared(eager, busier)
    assert not c["summary"]["cpu"]["judged"] and "the machine changed between the runs" in c["summary"]["cpu"]["verdict"]
