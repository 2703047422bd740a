"""Bad input: one clear line on stderr, exit status 2, no traceback, nothing written."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import SMALL_MLP, run_script

CASES = {
    # name: (script, args, env, what the line must say)
    "zero size": ("01_matmul_add.py", ["--size", "0"], {}, "must be positive"),
    "negative size": ("01_matmul_add.py", ["--size", "-3"], {}, "must be positive"),
    "size not a number": ("01_matmul_add.py", ["--size", "big"], {}, "not a whole number"),
    "absurd size": ("01_matmul_add.py", ["--size", "10000000"], {}, "GiB"),
    "absurd mlp": ("03_simple_mlp.py", ["--hidden", "100000000"], {}, "use smaller sizes"),
    "zero in_dim, hyphenated": ("02_linear.py", ["--in-dim", "0"], {}, "must be positive"),
    "unknown dtype": ("01_matmul_add.py", ["--dtype", "int8"], {}, "invalid choice: 'int8'"),
    "unknown dtype in the environment": ("01_matmul_add.py", [], {"LESSONS_CPU_DTYPE": "int8"},
                                         "LESSONS_CPU_DTYPE='int8' is not a dtype: one of bf16, fp16, fp32"),
    "cuda without cuda": ("02_linear.py", ["--device", "cuda"], {}, "CUDA is not available"),
    "schedule too short": ("01_matmul_add.py", ["--schedule", "1,1"], {}, "WAIT,WARMUP,ACTIVE"),
    "schedule no active": ("01_matmul_add.py", ["--schedule", "1,1,0"], {}, "ACTIVE and REPEAT must be 1 or more"),
    "schedule words": ("01_matmul_add.py", ["--schedule", "a,b,c"], {}, "whole numbers"),
    "bad compile mode": ("01_matmul_add.py", ["--compile-mode", "fastest"], {}, "invalid choice: 'fastest'"),
    "no C++ compiler": ("03_simple_mlp.py", [*SMALL_MLP, "--compile"], {"CXX": "/nonexistent/g++"},
                        "needs a C++ compiler"),
    "kernels lesson without CUDA": ("03_kernels_mlp.py", [], {}, "03_simple_mlp.py --compile"),
    "efficient on the CPU": ("04_c_sdpa_attention.py", ["--backend", "efficient"], {}, "does not exist on the CPU"),
    "cudnn on the CPU": ("04_c_sdpa_attention.py", ["--backend", "cudnn", "--device", "cpu"], {},
                         "on the CPU, SDPA has math, flash"),
    "unknown backend": ("04_c_sdpa_attention.py", ["--backend", "xformers"], {}, "invalid choice: 'xformers'"),
    "hub attention without CUDA": ("04_d_kernels_attention.py", [], {}, "04_c_sdpa_attention.py --backend flash"),
    "zero head_dim, hyphenated": ("04_a_naive_attention.py", ["--head-dim", "0"], {}, "must be positive"),
    "absurd seq": ("04_b_inplace_ops_attention.py", ["--seq", "10000000"], {}, "use smaller sizes"),
    # a prefix of a flag is a typo, never that flag (argparse's abbreviations would run --size 64 over a trace)
    "flag prefix": ("01_matmul_add.py", ["--siz", "64"], {}, "unrecognized arguments: --siz 64"),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    base = tmp_path_factory.mktemp("bad")

    def go(item):
        name, (script, args, env, _) = item
        trace_dir = base / name.replace(" ", "_")
        return name, (run_script(script, *args, trace_dir=trace_dir, env=env), trace_dir)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(go, CASES.items()))


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_one_line_exit_2_nothing_written(results, name):
    run, trace_dir = results[name]
    expected = CASES[name][3]
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("error: ") and expected in lines[0], lines[0]
    assert "Traceback" not in run.stderr + run.stdout
    assert not trace_dir.exists() or not any(trace_dir.iterdir())


def test_unwritable_trace_dir(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    run = run_script("01_matmul_add.py", trace_dir=blocker / "traces")
    assert run.returncode == 2
    assert run.stderr.startswith("error: ") and "cannot write to the trace folder" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert blocker.read_text() == "not a folder"


def test_kernels_lesson_without_cuda_explains(results):
    run, _ = results["kernels lesson without CUDA"]
    assert "needs CUDA" in run.stderr and "Triton" in run.stderr
