"""``--compare`` on the real H100 runs (issues 25 and 26): the device time per step judged, the device
work per step with its memcpys and memsets (gone, new, or a GEMM renamed only in its flags), the ops
whose calls or device time changed, and the control: work that did not change between the runs must
keep its time before a difference is called a result (a busier machine is simulated by slowing one
run's unchanged work in a copy of its trace); apart in every step is a result even when a run is noisy."""

from __future__ import annotations

import gzip
import json

import pytest

from conftest import command_env, event, run_module, trace_of, write_trace
from h100 import h100_trace



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
    # how much wider it was, per run: said, not assumed ("wider in every run" was not true of every run)
    s = c["summary"]
    assert s["a_first_ratio"] > 1 and f"which the profiler starting may widen: here A's took {s['a_first_ratio']:.2f}x " \
        f"the others' median, B's {s['b_first_ratio']:.2f}x" in text
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
    assert dev["verdict"].startswith("device per step: cannot tell which run is faster: the difference is within "
                                     "the machine's drift: 6 device events common to both")
    assert dev["control"]["explains"][1] == pytest.approx(1.65 * 1.05, abs=0.03) and dev["ratio"] < 1.65
    assert "took 1.65x as long in B" in text and "every B step is faster" not in dev["verdict"]
    assert "x A's" not in dev["verdict"]  # no ratio of medians claimed where the verdict cannot tell


def test_a_busier_cpu_is_not_a_slower_program(attention_runs, tmp_path):
    """A CPU lesson run (the session's in-place attention) against a copy of itself on a machine 1.65x
    busier: the control moved."""
    trace = trace_of(attention_runs["inplace"])
    slow = slowed_copy(trace, tmp_path / "busier.json.gz", 1.65, device=False, cpu=True)
    c, _ = compared(trace, slow)
    cpu = c["summary"]["cpu"]
    assert cpu["control"]["unit"] == "op" and "aten::bmm" in cpu["control"]["names"]
    assert cpu["control"]["ratio"] == pytest.approx(1.65, rel=0.02) and cpu["control"]["moved"]
    assert not cpu["judged"]  # the control moved (or, on a loaded machine, the steps overlap as well)
    same, _ = compared(trace, trace)  # the same run twice: the control kept its time
    assert same["summary"]["cpu"]["control"]["ratio"] == pytest.approx(1.0) and not same["summary"]["cpu"]["judged"]


# ----------------------------------------------------------------------------- 26.3: apart in every step


def compile_steps(path, body_us, compiled: bool, control_us=1000.0):
    """CPU steps of 01_matmul_add's shape: an unchanged aten::empty (the control: ``control_us`` a step, or
    one figure per step), then eager's aten::mm and aten::add, or the compiled region's aten::addmm, in
    ``body_us`` (one figure per step)."""
    ev, t = [], 0.0
    controls = control_us if isinstance(control_us, (list, tuple)) else [control_us] * len(body_us)
    for i, (body_len, control) in enumerate(zip(body_us, controls)):
        wall = body_len + control + 4
        ev += [event(f"ProfilerStep#{i + 2}", t, wall, "user_annotation"),
               event("matmul_add", t + 1, wall - 2, "user_annotation"), event("aten::empty", t + 1.5, control)]
        body = t + 2 + control
        if compiled:
            ev += [event("Torch-Compiled Region: 0/0", body, body_len), event("aten::addmm", body + 1, 20)]
        else:
            ev += [event("aten::mm", body, 20), event("aten::add", body + 21, 4)]
        t += wall + 1
    return write_trace(path, ev)


EAGER = [3000, 1440, 2360, 1800, 1600, 2000]
COMPILED = [18000, 4060, 11040, 6000, 5000, 8000]  # noisy: 4.06-11.04 ms
COMPILED_STEADY = [9000, 6000, 6100, 5900, 6050, 5950]


def test_apart_in_every_step_is_a_result_even_when_one_run_is_noisy(tmp_path):
    eager = compile_steps(tmp_path / "eager.json", EAGER, compiled=False)
    comp = compile_steps(tmp_path / "compiled.json", COMPILED, compiled=True)
    c, text = compared(eager, comp)
    cpu = c["summary"]["cpu"]
    # judged, at the nearest steps (B's slowest is a stall: its median ratio, 2.50x, rests on it)
    assert cpu["judged"] and cpu["at_least"] and cpu["ratio"] == pytest.approx(5064 / 3364, abs=1e-3)
    assert ("every A step is faster than every step of the other (A 2.44 ms-3.36 ms, B 5.06 ms-12.04 ms), B/A "
            "1.51x at the nearest (B's steps vary 2.4x") in text
    assert ("control: 1 op common to both, with the same ops inside (aten::empty) took 1.00x as long in B "
            "(1.00 ms vs 1.00 ms per step): the machine's drift explains B/A from 0.95x to 1.05x, not 1.51x") in text


def test_a_difference_beyond_the_drift_is_a_result(tmp_path):
    """Issue 37, item 1: a 2.7x difference with no overlap is a result, though the control moved 1.65x."""
    eager = compile_steps(tmp_path / "eager.json", EAGER, compiled=False)
    busier = compile_steps(tmp_path / "busier.json", COMPILED_STEADY, compiled=True, control_us=1650.0)
    c, _ = compared(eager, busier)
    cpu = c["summary"]["cpu"]
    assert cpu["judged"] and cpu["control"]["moved"] and cpu["ratio"] == pytest.approx(7654 / 2804, abs=1e-3)
    assert "the machine's drift explains B/A from 0.95x to 1.73x, not 2.73x" in cpu["verdict"]


def test_the_same_code_on_a_busier_machine_cannot_tell(tmp_path):
    """Busy against idle of the same code: every op 1.65x slower in B, the control too."""
    idle = compile_steps(tmp_path / "idle.json", EAGER, compiled=False)
    busy = compile_steps(tmp_path / "busy.json", [x * 1.65 for x in EAGER], compiled=False, control_us=1650.0)
    c, _ = compared(idle, busy)
    cpu = c["summary"]["cpu"]
    assert not cpu["judged"] and cpu["ratio"] == pytest.approx(1.65, abs=0.01)
    assert cpu["verdict"].startswith("CPU per step: cannot tell which run is faster: the difference is within the "
                                     "machine's drift: 3 ops common to both, with the same ops inside")
    assert "explains B/A from 0.95x to 1.72x; the steps' B/A is 1.65x" in cpu["verdict"]


def test_a_small_difference_is_judged_only_beyond_the_drift(tmp_path):
    """Issue 37, item 3: B's code 10 % faster. On a steady machine (the control within 1 %) that is a result;
    on a machine 15 % busier for B the steps read 1.03x slower, which the drift explains: never "B slower"."""
    a = compile_steps(tmp_path / "a.json", [2000, 2000, 2010, 1995], compiled=False,
                      control_us=[1000, 1000, 1005, 995])
    faster = [1700, 1700, 1705, 1710]
    steady = compile_steps(tmp_path / "steady.json", faster, compiled=False, control_us=[1000, 1004, 998, 1000])
    c, _ = compared(a, steady)
    assert c["summary"]["cpu"]["judged"] and c["summary"]["cpu"]["ratio"] == pytest.approx(0.90, abs=0.01)
    busier = compile_steps(tmp_path / "busier.json", [x * 1.15 for x in faster], compiled=False,
                           control_us=[1150, 1155, 1148, 1150])
    c, _ = compared(a, busier)
    cpu = c["summary"]["cpu"]
    assert cpu["ratio"] == pytest.approx(1.035, abs=0.01) and not cpu["judged"]
    assert "the difference is within the machine's drift" in cpu["verdict"] and "explains B/A from 0.95x to 1.2" \
        in cpu["verdict"]


# ----------------------------------------------------------------------------- issue 37: the same work, the probe


def knobs(probe_us: list, **more) -> dict:
    """A lesson's knobs for a synthetic trace: the workload and the machine probe's samples."""
    return dict(script="synthetic", warmup=True, shape=[8, 16, 1024, 64], dtype="fp32", device="cpu",
                probe=dict(work="Python 3.11 loop of 100,000 squares", us=probe_us), **more)


def sdpa_steps(path, step_us, backend: str, probe_us: list):
    """SDPA per step, as the two CPU backends run it: its own op, then the math backend's ops (its own
    time 40 ms: the backend's preparation) or the flash op (its own time 15 µs)."""
    ev, t = [], 0.0
    for i, wall in enumerate(step_us):
        ev += [event(f"ProfilerStep#{i + 2}", t, wall, "user_annotation"),
               event("sdpa_fwd", t + 1, wall - 2, "user_annotation"),
               event("aten::scaled_dot_product_attention", t + 2, wall - 4)]
        if backend == "math":
            inner, third = t + 40_000, (wall - 40_010) / 3
            ev += [event("aten::_scaled_dot_product_attention_math", inner, wall - 40_006)]
            for j, op in enumerate(("aten::bmm", "aten::_safe_softmax", "aten::bmm")):
                ev.append(event(op, inner + 1 + j * third, third - 1))
        else:
            ev += [event("aten::_scaled_dot_product_flash_attention_for_cpu", t + 17, wall - 19)]
        t += wall + 1
    return write_trace(path, ev, lesson=knobs(probe_us, variants={"backend": backend}))


def test_math_against_flash_is_judged_though_the_machine_got_busier(tmp_path):
    """Issue 37, item 1: SDPA's own op is not the same work under two backends (40 ms of preparation
    against 15 µs), so it is no control; the probe is, and moved 1.2x: a 5x gap that no step overlaps
    is a result."""
    math = sdpa_steps(tmp_path / "math.json", [4.99e6, 3.46e6, 5.28e6, 4.23e6], "math",
                      [5000, 5100, 4950, 5050, 5020, 4980, 5010])
    flash = sdpa_steps(tmp_path / "flash.json", [0.9e6, 0.70e6, 0.80e6, 0.75e6], "flash",
                       [6000, 6100, 5950, 6050, 6020, 5980, 6010])
    c, text = compared(math, flash)
    cpu = c["summary"]["cpu"]
    assert cpu["control"]["unit"] == "probe" and cpu["control"]["ratio"] == pytest.approx(1.2, abs=0.01)
    assert "aten::scaled_dot_product_attention" not in str(cpu["control"])
    assert cpu["judged"] and cpu["ratio"] == pytest.approx(0.75 / 4.23, abs=0.001)
    assert "every B step is faster than every step of the other" in cpu["verdict"]
    assert "the machine probe (Python 3.11 loop of 100,000 squares, timed 7x before each run's profiler " \
           "started) took 1.20x as long in B (5.01 ms vs 6.01 ms a sample)" in text
    # the same two runs from traces without a probe: no control, "cannot tell", and the reason is true
    for path in (math, flash):
        doc = json.loads(path.read_text())
        del doc["lesson"]["probe"]
        path.write_text(json.dumps(doc))
    c, _ = compared(math, flash)
    cpu = c["summary"]["cpu"]
    assert not cpu["judged"] and cpu["control"] is None
    assert "no work ran unchanged in both runs (the same op with the same ops inside it" in cpu["verdict"]
    assert "the machine changed" not in cpu["verdict"]


def mlp_steps(path, compiled: bool, mm_us: float = 1500.0, steps: int = 4):
    """The MLP's CPU steps: three GEMMs, each an aten::mm with its two aten::resolve_conj, under eager's
    aten::linear/aten::matmul or under the compiled graph; GeLU and mul between, or their fused loop."""
    ev, t = [], 0.0
    for i in range(steps):
        wall = 3 * mm_us + (300 if compiled else 900) + 40
        ev += [event(f"ProfilerStep#{i + 2}", t, wall, "user_annotation"),
               event("mlp_fwd", t + 1, wall - 2, "user_annotation")]
        at = t + 5
        if compiled:
            ev += [event("Torch-Compiled Region: 0/0", at, wall - 10),
                   event("## Call CompiledFxGraph f00 ##", at + 1, wall - 12)]
            at += 2
        for j in range(3):
            if not compiled:
                ev += [event("aten::linear", at, mm_us + 6), event("aten::matmul", at + 1, mm_us + 4)]
            ev += [event("aten::mm", at + 2, mm_us), event("aten::resolve_conj", at + 3, 1),
                   event("aten::resolve_conj", at + 5, 0.5)]
            at += mm_us + 8
            if j == 0:
                ev += ([event("graph_0_cpp_fused__unsafe_view_gelu_mul_0", at, 290)] if compiled else
                       [event("aten::gelu", at, 500), event("aten::mul", at + 501, 390)])
                at += 300 if compiled else 900
        t += wall + 1
    return write_trace(path, ev)


def test_eager_against_compiled_finds_the_unchanged_gemms(tmp_path):
    """Issue 37, item 2: aten::mm under eager's aten::matmul and under the compiled graph is one GEMM, with
    the same ops inside: the control, though the op it was called from differs."""
    c, text = compared(mlp_steps(tmp_path / "eager.json", False), mlp_steps(tmp_path / "compiled.json", True))
    cpu = c["summary"]["cpu"]
    assert cpu["control"]["unit"] == "op" and cpu["control"]["names"][0] == "aten::mm"
    assert cpu["control"]["ratio"] == pytest.approx(1.0) and cpu["control"]["measures"]
    assert "aten::linear" not in cpu["control"]["names"]  # eager's own: not in the compiled run
    assert cpu["judged"] and cpu["ratio"] < 1  # the fused loop: 600 µs less a step


def test_eager_against_compiled_lessons_name_the_gemms(runs):
    """The same on the lessons' own runs: the compiled MLP's GEMMs are found unchanged (as the control,
    or beside the probe where they are too short to measure the machine)."""
    c, _ = compared(trace_of(runs["03_eager"]), trace_of(runs["03_compile"]))
    control = c["summary"]["cpu"]["control"]
    ops = control if control["unit"] == "op" else control["too_short"]
    assert ops is not None and "aten::mm" in ops["names"], control


# ----------------------------------------------------------------------------- issue 36, item 3: unlike runs


def test_runs_of_other_shapes_get_no_verdict_per_step(tmp_path):
    """An LLM run of 1x128x32 against one of 1x64x8 (a static cache under CUDA graphs): "0.32x, every B step
    faster" compared other work. The difference is said first, and no step is judged or given a ratio."""
    c, text = compared(h100_trace("llm_default"), h100_trace("llm_graphs"))
    s = c["summary"]
    assert s["workload_differences"] == ["shape 1x128x32 vs 1x64x8"]
    assert text.startswith("compare A = ") and "unlike runs: the runs ran other work (shape 1x128x32 vs 1x64x8)" in text
    assert text.index("unlike runs:") < text.index("step CPU A")
    for side in (s["cpu"], s["device"]):
        assert not side["judged"] and "the runs ran other work" in side["verdict"] and "x A's" not in side["verdict"]
    assert all(step["cpu_ratio"] is None and step["device_ratio"] is None for step in c["steps"])


def test_another_gpu_is_said_before_the_verdict(tmp_path):
    """The same run on an H100 and (its copy renamed) an H200: the card is named as a difference first."""
    from test_roofline import on_h200

    c, text = compared(h100_trace("attn_naive"), on_h200("attn_naive", tmp_path / "naive_h200.json.gz"))
    s = c["summary"]
    assert s["workload_differences"] == [] and s["other_differences"] == ["GPU NVIDIA H100 80GB HBM3 vs NVIDIA H200"]
    assert "they differ in GPU NVIDIA H100 80GB HBM3 vs NVIDIA H200: a difference is theirs as much as the code's" \
        in text
    alike, text = compared(h100_trace("attn_naive"), h100_trace("attn_inplace"))
    assert alike["summary"]["unlike"] == "" and "unlike runs" not in text  # the posts' compare: nothing to say


def test_one_stall_in_a_noisy_run_carries_no_ratio(tmp_path):
    """A CI run under load: eager 388-425 µs, compiled 822 µs and 5.11 ms (one stall): apart in every step,
    so B is slower, but the median of two steps, 2.97 ms, made "7.30x". A noisy run's ratio is its nearest
    steps' (822 / 425: 1.93x), said as such, and the drift is checked against it."""
    eager = compile_steps(tmp_path / "eager.json", [511, 421, 384], compiled=False, control_us=0.0)
    comp = compile_steps(tmp_path / "compiled.json", [931, 818, 5106], compiled=True, control_us=0.0)
    for path in (eager, comp):  # the same probe in both: a steady machine by the probe, as in that CI run
        doc = json.loads(path.read_text())
        path.write_text(json.dumps({**doc, "lesson": knobs([17300, 17320, 17350, 17310, 17330, 17340, 17320])}))
    c, text = compared(eager, comp)
    cpu = c["summary"]["cpu"]
    assert cpu["judged"] and cpu["at_least"] and cpu["ratio"] == pytest.approx(822 / 425, abs=0.01)
    assert "B/A 1.93x at the nearest (B's steps vary 6.2x" in cpu["verdict"] and "7." not in cpu["verdict"].split(";")[0]
    assert "x A's" not in cpu["verdict"] and "≥1.93x" in text


# ----------------------------------------------------------------------------- the probe around the steps


def matmul_add_steps(path, step_us: list, probe: dict):
    """Part 1's size-64 CPU steps: an aten::mm of 30 µs and an aten::add of 6 µs under matmul_add, with the
    lesson's knobs and its machine probe (too short a step for the ops to measure the machine)."""
    ev, t = [], 0.0
    for i, wall in enumerate(step_us):
        ev += [event(f"ProfilerStep#{i + 2}", t, wall, "user_annotation"),
               event("matmul_add", t + 1, wall - 2, "user_annotation"),
               event("aten::mm", t + 2, 30), event("aten::add", t + 33, 6)]
        t += wall + 1
    return write_trace(path, ev, lesson=dict(knobs([]), shape=[64], probe=probe))


def test_a_machine_busier_during_the_steps_than_before_them_is_no_verdict(tmp_path):
    """A CI run: the same work in both runs, the probe before each run's profiler alike, and every step of B
    1.7x A's: the machine got busier after B's probe, and the report judged. The probe timed after the
    steps too (the lessons write it as ``after``) shows the busier machine: cannot tell."""
    work, before = "Python 3.11 loop of 100,000 squares", [5000, 5100, 4950, 5050, 5020, 4980, 5010]
    steady = [p * 1.01 for p in before]
    busy = [p * 1.9 for p in before]
    a = matmul_add_steps(tmp_path / "a.json", [100, 104, 98, 101], dict(work=work, us=before))
    b = matmul_add_steps(tmp_path / "b.json", [170, 172, 169, 175], dict(work=work, us=before))
    blind = compared(a, b)[0]["summary"]["cpu"]
    assert blind["judged"] and blind["control"]["samples_after"] == 0  # before alone: the machine looks steady
    a = matmul_add_steps(tmp_path / "a.json", [100, 104, 98, 101], dict(work=work, us=before, after=steady))
    b = matmul_add_steps(tmp_path / "b.json", [170, 172, 169, 175], dict(work=work, us=before, after=busy))
    c, text = compared(a, b)
    cpu = c["summary"]["cpu"]
    assert not cpu["judged"] and cpu["control"]["unit"] == "probe" and cpu["control"]["samples_after"] == 7
    assert "cannot tell which run is faster: the difference is within the machine's drift" in cpu["verdict"]
    assert "timed 7x before and 7x after each run's profiled steps" in " ".join(text.split())
    # an odd "after" (one sample, a string) is no sample: the probe before counts alone, and says so
    b = matmul_add_steps(tmp_path / "b.json", [170, 172, 169, 175], dict(work=work, us=before, after=["x"]))
    cpu = compared(a, b)[0]["summary"]["cpu"]
    assert cpu["judged"] and cpu["control"]["samples_after"] == 0 and "timed 7x before each run's profiler" in cpu["verdict"]
