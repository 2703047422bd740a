"""Part 3's report on a GPU: the attention rules and the guess table over synthetic A100- and
Hopper-style runs (tests/gpu_synth.py), each carrying its lesson's knobs and guess as a real run does."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import gpu_synth as S  # noqa: E402
from conftest import REPO  # noqa: E402

from common.knobs import METADATA_KEY  # noqa: E402
from common.report import analyze  # noqa: E402

LESSONS = {"attn_naive": "04_a_naive_attention", "attn_inplace": "04_b_inplace_ops_attention",
           "sdpa_math": "04_c_sdpa_attention", "sdpa_efficient": "04_c_sdpa_attention",
           "sdpa_flash": "04_c_sdpa_attention", "sdpa_cudnn": "04_c_sdpa_attention",
           "attn_hub": "04_d_kernels_attention"}


def _guess(script: str) -> dict:
    """The lesson's own GUESS (the module imported, not run)."""
    spec = importlib.util.spec_from_file_location(f"lesson_{script}", REPO / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GUESS.to_json()


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """key -> {style label: (findings by rule, guess JSON)} for A100 and H200 styles."""
    base = tmp_path_factory.mktemp("attn_gpu")
    guesses = {s: _guess(s) for s in set(LESSONS.values())}
    out = {}
    for style in (S.A100, S.H200):
        for key, (doc, _, tag) in S.attention_runs(style).items():
            knobs = dict(script=LESSONS[key], tag=tag, shape=[8, 16, 1024, 64], dtype="bf16", device="cuda",
                         warmup=True, warmup_calls=3, compile=False, compile_mode="default",
                         schedule=dict(wait=1, warmup=1, active=3, repeat=1), guess=guesses[LESSONS[key]])
            path = base / f"{key}_{style.major}.json"
            path.write_text(json.dumps({**doc, METADATA_KEY: json.dumps(knobs)}))
            tables, findings = analyze(str(path))
            out.setdefault(key, {})[style.label] = ({f.rule: f for f in findings}, tables.guess.to_json())
    return out


def each(reports, key):
    return reports[key].items()


def test_naive_copy_is_the_unguessed_memcpy(reports):
    """P3.2 with P3.17: six device events per forward, five as guessed, one Memcpy launched by aten::copy_
    under masked_fill -> clone that nobody guessed (on Hopper also cuBLAS's 4-byte memset before the first
    GEMM, not guessed and never taken for a GEMM); the rule names the copy and its time."""
    for label, (found, guess) in each(reports, "attn_naive"):
        assert guess["on_device"] and guess["calls"] == 3, label
        extra = [r for r in guess["rows"] if r["status"] == "not guessed" and r["seen"]["device_kind"] != "memset"]
        assert len(extra) == 1 and extra[0]["seen"]["op"] == "aten::copy_", (label, guess["rows"])
        assert all(r["seen"]["device_kind"] == "kernel" for r in guess["rows"] if r["status"] == "as guessed")
        assert extra[0]["seen"]["kernel"].startswith("Memcpy") and "aten::clone" in extra[0]["seen"]["via"]
        assert sum(r["status"] == "as guessed" for r in guess["rows"]) == 5
        copy = found["out_of_place_copy"]
        assert copy.evidence["copy_kernels"] and all(k.startswith("Memcpy") for k in copy.evidence["copy_kernels"])
        assert copy.evidence["copy_us"] == pytest.approx(3 * 190.0)


def test_inplace_has_no_copy(reports):
    """P3.3: in place, five kernels per forward, all as guessed; no out-of-place finding."""
    for label, (found, guess) in each(reports, "attn_inplace"):
        assert [r["status"] for r in guess["rows"] if r["seen"]["device_kind"] != "memset"] == ["as guessed"] * 5, label
        assert found["guess_vs_seen"].message.count(" as guessed") == 1 and "all 5 as guessed" in \
            found["guess_vs_seen"].message
        assert "out_of_place_copy" not in found


def test_math_upcast_shows_as_fp32_gemms(reports):
    """P3.6 on a GPU: math's GEMMs are fp32 kernels (not tensor cores), with its casts; P3.7, P3.8 as findings;
    the fused kernel guessed and not run, every kernel unguessed."""
    for label, (found, guess) in each(reports, "sdpa_math"):
        upcast = found["fp32_upcast"]
        assert upcast.level == "warn" and upcast.evidence["fp32_gemm_kernels"], label
        assert upcast.evidence["casts"] == 4 * 3  # three up, one down, per forward
        assert "causal_mask_rebuilt" in found and "safe_softmax" in found
        statuses = [r["status"] for r in guess["rows"]]
        assert statuses[0] == "missing" and statuses.count("not guessed") == 20


@pytest.mark.parametrize("key, backend, launch, transposes", [
    ("sdpa_efficient", "efficient", "cudaLaunchKernel", 4), ("sdpa_flash", "flash", "cudaLaunchKernel", 4),
    ("sdpa_cudnn", "cuDNN", "cuLaunchKernelEx", 0)])
def test_fused_kernel_decoded(reports, key, backend, launch, transposes):
    """P3.9/P3.10/P3.12/P3.13: one fused kernel per forward, its name decoded, its launch API, the
    transposes before it (none for cuDNN); the guess holds."""
    for label, (found, guess) in each(reports, key):
        f = found["fused_attention"].evidence
        assert sum(f["kernels"].values()) == 3 and len(f["decoded"]) == len(f["kernels"]), label
        assert backend.lower() in " ".join(f["decoded"]).lower() or backend == "flash"
        assert list(f["launches"]) == [launch] and f["transposes"] == 3 * transposes
        assert [r["status"] for r in guess["rows"] if r["seen"]["device_kind"] != "memset"] == ["as guessed"]


def _sdpa_cpu_by_hand(doc: dict) -> tuple[float, float]:
    """From the raw events: SDPA's CPU per call, and the share of it that is the own time (duration less the
    child events': ops and runtime calls, as the profiler's Self CPU counts) of aten::scaled_dot_product_attention
    and the backend's ops."""
    ops = sorted((e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "cuda_runtime",
                                                                                          "cuda_driver")),
                 key=lambda e: (e["ts"], -e["dur"]))

    def kids(outer):
        inside = [e for e in ops if e is not outer and outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"]]
        return [e for e in inside if not any(o is not e and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"]
                                             for o in inside)]

    calls = [e for e in ops if e["name"] == "aten::scaled_dot_product_attention"]
    wall = sum(e["dur"] for e in calls)
    library = [e for e in ops if e["name"] == "aten::scaled_dot_product_attention" or
               (e["name"].startswith("aten::_") and e["name"].endswith(("_attention", "_attention_forward")))]
    own = sum(e["dur"] - sum(k["dur"] for k in kids(e)) for e in library)
    return wall / len(calls), 100 * own / wall


def test_cudnn_spends_its_cpu_inside_the_library(reports):
    """P3.15: SDPA's CPU per call and the share of it that is the own time of SDPA and the backend's op, as
    the raw events give them; cuDNN spends the most CPU, nearly all of it inside the library calls."""
    for style in (S.A100, S.H200):
        docs = S.attention_runs(style)
        seen = {}
        for key in ("sdpa_efficient", "sdpa_flash", "sdpa_cudnn"):
            found, _ = reports[key][style.label]
            ev = found["sdpa_cpu_in_library"].evidence
            per_call, share = _sdpa_cpu_by_hand(docs[key][0])
            assert ev["cpu_us_per_call"] == pytest.approx(per_call, abs=0.1)
            assert ev["library_share_pct"] == pytest.approx(share, abs=0.1)
            seen[key] = ev
        cudnn = seen.pop("sdpa_cudnn")
        assert all(cudnn["cpu_us_per_call"] > ev["cpu_us_per_call"] for ev in seen.values())
        assert cudnn["library_share_pct"] > 80 and all(ev["library_share_pct"] < cudnn["library_share_pct"]
                                                      for ev in seen.values())
        assert "the work moved into the library" in reports["sdpa_cudnn"][style.label][0]["sdpa_cpu_in_library"].message
    for key in ("attn_naive", "sdpa_math"):  # no fused backend: nothing to say
        for found, _ in reports[key].values():
            assert "sdpa_cpu_in_library" not in found
