"""Each numbered script, run as a user would on the CPU, shows what the posts say (CLAIMS.md)."""

from __future__ import annotations

import re

import pytest

from conftest import CPU_DTYPE, Trace, load_events

TABLE_HEADER = re.compile(r"^\s*Name\s+Self CPU %\s+Self CPU\s+CPU total %\s+CPU total", re.M)


def ok(run):
    assert run.returncode == 0, f"{run.script} {run.args} failed:\n{run.stdout}\n{run.stderr}"
    return run


def step_numbers(trace: Trace) -> list[int]:
    return [int(e["name"].split("#")[1]) for e in trace.steps]


# -- files and table (P1.1, P1.2, P1.5) -------------------------------------------------------------

@pytest.mark.parametrize("key, files", [
    ("01_default", [f"64_{CPU_DTYPE}_cold_eager.json", f"64_{CPU_DTYPE}_cold_eager.txt"]),
    ("01_batch", [f"8x32_{CPU_DTYPE}_cold_eager.json", f"8x32_{CPU_DTYPE}_cold_eager.txt"]),
    ("01_compile", [f"64_{CPU_DTYPE}_warm_compile.graph0.py", f"64_{CPU_DTYPE}_warm_compile.json", f"64_{CPU_DTYPE}_warm_compile.txt"]),
    ("01_gzip", ["16_fp32_warm_eager_sched-0-0-4_shapes.json.gz", "16_fp32_warm_eager_sched-0-0-4_shapes.txt"]),
    ("02_eager", [f"1024x32x64_{CPU_DTYPE}_warm_eager.json", f"1024x32x64_{CPU_DTYPE}_warm_eager.txt"]),
    ("02_compile", [f"64x32x64_{CPU_DTYPE}_warm_compile.graph0.py", f"64x32x64_{CPU_DTYPE}_warm_compile.json", f"64x32x64_{CPU_DTYPE}_warm_compile.txt"]),
    ("03_eager", [f"2x16x64x256_{CPU_DTYPE}_warm_eager.json", f"2x16x64x256_{CPU_DTYPE}_warm_eager.txt"]),
    ("03_compile", [f"2x16x64x256_{CPU_DTYPE}_warm_compile.graph0.py", f"2x16x64x256_{CPU_DTYPE}_warm_compile.json", f"2x16x64x256_{CPU_DTYPE}_warm_compile.txt"]),
])
def test_writes_exactly_the_named_files(runs, key, files):
    """P1.1: the file names are the run's knobs, and nothing else (no temporary file) is left; a compiled run also
    copies Inductor's compiled module beside its trace (<tag>.graph0.py, docs/compiled-kernels.md)."""
    run = ok(runs[key])
    assert run.files() == files
    for name in files:
        assert name in run.stdout.replace("\n", "")  # the console says what it wrote


@pytest.mark.parametrize("key", ["01_default", "02_eager", "03_eager", "03_compile"])
def test_table_has_header_and_total_line(runs, key):
    """P1.2: the .txt is the key_averages table (sorted by CPU time here), ending with the totals."""
    run = ok(runs[key])
    text = next(run.trace_dir.glob("*.txt")).read_text()
    assert TABLE_HEADER.search(text)
    assert text.rstrip().splitlines()[-1].startswith("Self CPU time total:")
    assert "Self CUDA time total" not in text  # CPU run: no device column
    rows = [line for line in text.splitlines() if line.strip() and not line.startswith(("-", "Self"))]
    assert len(rows) - 1 <= 15  # --row-limit default
    assert "Self CPU time total:" in run.stdout  # echoed on the console


@pytest.mark.parametrize("key", ["01_default", "01_compile", "02_eager", "03_eager", "03_compile"])
def test_default_schedule_records_steps_2_to_4(runs, key):
    """P1.5: schedule(wait=1, warmup=1, active=3, repeat=1) -> ProfilerStep#2, #3, #4 only."""
    run = ok(runs[key])
    assert step_numbers(Trace(next(run.trace_dir.glob("*.json")))) == [2, 3, 4]
    assert "ProfilerStep#2..#4" in run.stdout


def test_schedule_flag_and_gzip(runs):
    """--schedule 0,0,4 -> exactly 4 steps numbered from 0; --gzip writes a gzipped trace that loads."""
    run = ok(runs["01_gzip"])
    trace = Trace(run.path("16_fp32_warm_eager_sched-0-0-4_shapes.json.gz"))
    assert step_numbers(trace) == [0, 1, 2, 3]
    # --record-shapes (hyphenated spelling) reached the profiler: ops carry their input dims
    mm = trace.named("aten::mm")[0]
    assert mm["args"]["Input Dims"] == [[16, 16], [16, 16]]


# -- Part 1 ------------------------------------------------------------------------------------------

def test_dispatch_chain_nests(runs):
    """P1.9: ProfilerStep#N -> matmul_add -> aten::matmul -> aten::mm, then aten::add, by timestamps."""
    trace = Trace(ok(runs["01_default"]).path(f"64_{CPU_DTYPE}_cold_eager.json"))
    for step in trace.steps:
        (annotation,) = trace.inside(step, "matmul_add")
        (matmul,) = trace.inside(annotation, "aten::matmul")
        (mm,) = trace.inside(matmul, "aten::mm")
        (add,) = trace.inside(annotation, "aten::add")
        assert add["ts"] >= matmul["ts"] + matmul["dur"]  # the add comes after the matmul returns
        assert not trace.inside(matmul, "aten::add")
        assert mm["ts"] >= matmul["ts"]


def test_batch_axis_dispatches_bmm(runs):
    """P1.10: a leading batch axis (8, n, n) makes aten::matmul dispatch aten::bmm, not aten::mm."""
    trace = Trace(ok(runs["01_batch"]).path(f"8x32_{CPU_DTYPE}_cold_eager.json"))
    for step in trace.steps:
        (matmul,) = trace.inside(step, "aten::matmul")
        assert len(trace.inside(matmul, "aten::bmm")) == 1
        assert not trace.inside(matmul, "aten::mm")


def test_compile_frames_one_hash_every_step(runs):
    """P1.15: compiled steps show the Dynamo/AOT/Inductor rows, with one CompiledFxGraph hash throughout."""
    trace = Trace(ok(runs["01_compile"]).path(f"64_{CPU_DTYPE}_warm_compile.json"))
    hashes = set()
    for step in trace.steps:
        names = {e["name"] for e in trace.inside(step)}
        assert {"Torch-Compiled Region: 0/0", "TorchDynamo Cache Lookup",
                "AOTDispatcher Runtime Wrapper Prologue"} <= names
        calls = [n for n in names if n.startswith("## Call CompiledFxGraph")]
        assert len(calls) == 1
        hashes.add(calls[0])
    assert len(hashes) == 1  # the same graph every step: cache hits, no recompiles


def test_compile_turns_mm_add_into_addmm_with_a_bias_copy(runs):
    """P1.16: one aten::addmm replaces aten::mm + aten::add; P1.17's CPU analogue: the bias is first
    copied into the output (aten::copy_ inside aten::addmm), then the GEMM accumulates onto it."""
    trace = Trace(ok(runs["01_compile"]).path(f"64_{CPU_DTYPE}_warm_compile.json"))
    for step in trace.steps:
        (annotation,) = trace.inside(step, "matmul_add")
        (addmm,) = trace.inside(annotation, "aten::addmm")
        assert not trace.inside(annotation, "aten::mm") and not trace.inside(annotation, "aten::add")
        assert len(trace.inside(addmm, "aten::copy_")) == 1


def test_compiled_output_matches_eager(runs):
    for key in ("01_compile", "02_compile", "03_compile"):
        out = ok(runs[key]).stdout
        assert re.search(r"compiled output vs eager: the outputs match: the largest difference, \S+, is \S+% of the "
                         r"largest output value", out.replace("\n", " ")), out


# -- Part 2 ------------------------------------------------------------------------------------------

def test_linear_is_transpose_plus_addmm_no_add(runs):
    """P2.1: aten::linear -> aten::t (metadata only) -> aten::addmm; no aten::add anywhere."""
    trace = Trace(ok(runs["02_eager"]).path(f"1024x32x64_{CPU_DTYPE}_warm_eager.json"))
    for step in trace.steps:
        (fwd,) = trace.inside(step, "linear_fwd")
        (linear,) = trace.inside(fwd, "aten::linear")
        (t,) = trace.inside(linear, "aten::t")
        (addmm,) = trace.inside(linear, "aten::addmm")
        assert t["ts"] < addmm["ts"]
        assert not trace.inside(step, "aten::add")


def test_compiled_linear_keeps_addmm_drops_transpose(runs):
    """P2.2: compiled Linear: the same aten::addmm, no aten::t in the compiled chain, plus compile rows."""
    trace = Trace(ok(runs["02_compile"]).path(f"64x32x64_{CPU_DTYPE}_warm_compile.json"))
    for step in trace.steps:
        names = [e["name"] for e in trace.inside(step)]
        assert names.count("aten::addmm") == 1
        assert "aten::t" not in names and "aten::linear" not in names and "aten::add" not in names
        assert "Torch-Compiled Region: 0/0" in names and "TorchDynamo Cache Lookup" in names
        assert sum(n.startswith("## Call CompiledFxGraph") for n in names) == 1


def test_mlp_ops_per_step(runs):
    """P2.4 (CPU): per mlp_fwd, 3 aten::linear, one aten::gelu and one aten::mul."""
    trace = Trace(ok(runs["03_eager"]).path(f"2x16x64x256_{CPU_DTYPE}_warm_eager.json"))
    for step in trace.steps:
        (fwd,) = trace.inside(step, "mlp_fwd")
        names = [e["name"] for e in trace.inside(fwd)]
        assert names.count("aten::linear") == 3
        assert names.count("aten::gelu") == 1
        assert names.count("aten::mul") == 1


def test_compiled_mlp_fuses_gelu_mul_into_one_named_kernel(runs):
    """P2.7 (CPU analogue): 3 bare aten::mm and one Inductor C++ kernel fusing view + gelu + mul."""
    trace = Trace(ok(runs["03_compile"]).path(f"2x16x64x256_{CPU_DTYPE}_warm_compile.json"))
    for step in trace.steps:
        names = [e["name"] for e in trace.inside(step)]
        fused = [n for n in names if re.fullmatch(r"graph_\d+_cpp_fused_\w*gelu_mul\w*", n)]
        assert fused == ["graph_0_cpp_fused__unsafe_view_gelu_mul_0"]
        assert names.count("aten::mm") == 3
        assert "aten::gelu" not in names and "aten::mul" not in names and "aten::linear" not in names


def test_cpu_run_has_no_device_lane(runs):
    events = load_events(ok(runs["01_default"]).path(f"64_{CPU_DTYPE}_cold_eager.json"))
    cats = {e.get("cat") for e in events}
    assert not cats & {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime"}
    assert "CUDA is not available: running on the CPU" in runs["01_default"].stdout
