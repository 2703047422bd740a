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
    under masked_fill -> clone that nobody guessed; the rule names the copy and its time."""
    for label, (found, guess) in each(reports, "attn_naive"):
        assert guess["on_device"] and guess["calls"] == 3, label
        extra = [r for r in guess["rows"] if r["status"] == "not guessed"]
        assert len(extra) == 1 and extra[0]["seen"]["op"] == "aten::copy_", (label, guess["rows"])
        assert extra[0]["seen"]["kernel"].startswith("Memcpy") and "aten::clone" in extra[0]["seen"]["via"]
        assert sum(r["status"] == "as guessed" for r in guess["rows"]) == 5
        copy = found["out_of_place_copy"]
        assert copy.evidence["copy_kernels"] and all(k.startswith("Memcpy") for k in copy.evidence["copy_kernels"])
        assert copy.evidence["copy_us"] == pytest.approx(3 * 190.0)


def test_inplace_has_no_copy(reports):
    """P3.3: in place, five kernels per forward, all as guessed; no out-of-place finding."""
    for label, (found, guess) in each(reports, "attn_inplace"):
        assert [r["status"] for r in guess["rows"]] == ["as guessed"] * 5, label
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
        assert [r["status"] for r in guess["rows"]] == ["as guessed"]
