"""05_llm.py on the CPU: the claims L.1-L.5 of the LLM lesson, a checkpoint from a local folder, bad input.

Every run is a subprocess as a user would start it, with HF_HUB_OFFLINE=1 (no test needs the
network) and OMP_NUM_THREADS=1 (two runs share this 2-core machine; two OpenMP teams of two
threads each would spin against each other and blur the timings the claims compare).
"""

from __future__ import annotations

import bisect
import functools
import importlib.util
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import CPU_DTYPE, REPO, Trace, run_script

from common import llm
from common.errors import BadInput
from common.lesson import setup
from common.llm import default_config
from common.paths import parse_tag
from common.report import report_json

ENV = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
TINY_LAYERS = 2


@functools.cache
def layers() -> int:
    """The default model's layers (transformers loads when a test asks, not while pytest collects)."""
    return default_config().num_hidden_layers


SMALL = ["--prompt-len", "16", "--new-tokens", "4"]
WORDS = ("the a of to and in is it that was for on are as with his they at be this from have or by one had not "
         "but what all were when we there can an your which their said if do will each about how up out them then "
         "she many some so these would other into has more her two like him see time could no make than first people "
         "water").split()


def save_tiny_checkpoint(folder: Path, *, tokenizer: bool) -> None:
    """A 2-layer Llama with random weights (and a word-level tokenizer), saved like any checkpoint."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[PAD]": 1, **{w: i + 2 for i, w in enumerate(dict.fromkeys(WORDS))}}
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=64, intermediate_size=128, num_hidden_layers=TINY_LAYERS,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    LlamaForCausalLM(config).save_pretrained(folder)
    if tokenizer:
        words = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
        words.pre_tokenizer = pre_tokenizers.Whitespace()
        words.decoder = decoders.WordPiece()  # joins the words with spaces
        PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]", pad_token="[PAD]").save_pretrained(folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    base = tmp_path_factory.mktemp("checkpoints")
    out = {"tiny": base / "tiny-llama", "no_tokenizer": base / "no-tokenizer", "not_causal": base / "vit",
           "empty": base / "empty"}
    save_tiny_checkpoint(out["tiny"], tokenizer=True)
    save_tiny_checkpoint(out["no_tokenizer"], tokenizer=False)
    from transformers import ViTConfig

    ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64).save_pretrained(
        out["not_causal"])
    out["empty"].mkdir()
    return out


def plan(f: dict) -> dict:
    """The runs the tests read (four lessons, and the bad input that needs a whole run to show)."""
    return {
        "default": ["--prompt-len", "64", "--new-tokens", "8", "--record-shapes"],
        "eager_static": [*SMALL, "--attn", "eager", "--cache", "static"],
        "compile_dynamic": ["--model", str(f["tiny"]), *SMALL, "--compile", "--cache", "dynamic"],
        "compile_static": ["--model", str(f["tiny"]), "--prompt", "the people of the water", "--new-tokens", "4",
                           "--compile", "--cache", "static"],
        **{f"bad: {name}": args for name, (args, _) in BAD_RUNS.items()},
    }


# bad input a whole run shows: one line on stderr, exit status 2, nothing written
BAD_RUNS = {
    "hub id offline": (["--model", "nobody/no-such-model"],
                       "use the default model (leave out --model) or a local folder"),
}


@pytest.fixture(scope="module")
def llm_runs(folders, tmp_path_factory):
    base = tmp_path_factory.mktemp("llm")
    env = {**ENV, "HF_HOME": str(base / "hf-home")}  # an empty Hugging Face cache: nothing to fall back on
    items = sorted(plan(folders).items(), key=lambda kv: not kv[0].startswith("compile"))  # the slow ones first

    def go(item):
        key, args = item
        return key, run_script("05_llm.py", *args, trace_dir=base / key.replace(": ", "-").replace(" ", "_"),
                               env=env)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(go, items))


def ok(run):
    assert run.returncode == 0, f"05_llm.py {run.args} failed:\n{run.stdout}\n{run.stderr}"
    return run


def trace_of(run) -> Path:
    (path,) = run.trace_dir.glob("*.json")
    return path


class LlmTrace(Trace):
    """A Trace whose ``inside`` looks only at the events that start within ``outer`` (by bisection):
    an LLM trace holds tens of thousands of events, and the tests ask about every forward."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.starts = [e["ts"] for e in self.events]

    def inside(self, outer: dict, name: str | None = None) -> list[dict]:
        end = outer["ts"] + outer["dur"]
        lo, hi = bisect.bisect_left(self.starts, outer["ts"]), bisect.bisect_right(self.starts, end + 1e-3)
        return [e for e in self.events[lo:hi] if e is not outer and e.get("tid") == outer.get("tid")
                and e["ts"] + e["dur"] <= end + 1e-3 and (name is None or e["name"] == name)]


_parsed: dict = {}


def parsed(run) -> LlmTrace:
    """The run's trace, parsed once for all the tests that read it."""
    path = trace_of(ok(run))
    if path not in _parsed:
        _parsed[path] = LlmTrace(path)
    return _parsed[path]


def names_in(trace: Trace, outer: dict) -> Counter:
    return Counter(e["name"] for e in trace.inside(outer))


def forwards(trace: Trace):
    """Every prefill and decode annotation of the trace (one forward each), in time order."""
    return [e for e in trace.events if e["name"] in ("prefill", "decode")]


# -- files and console ---------------------------------------------------------------------------------------------

def test_default_run_files_and_console(llm_runs):
    run = ok(llm_runs["default"])
    assert run.files() == [f"1x64x8_{CPU_DTYPE}_warm_eager_shapes.json", f"1x64x8_{CPU_DTYPE}_warm_eager_shapes.txt"]
    out = run.stdout.replace("\n", " ")
    assert "the weights are random" in out
    assert re.search(r"prefill\s+[\d,]+ tokens/s", out) and re.search(r"decode\s+[\d,]+ tokens/s", out)
    assert re.search(r"[\d.]+ ms per decoded token", out)
    assert "ProfilerStep#2..#4" in out
    assert run.stderr.strip() == ""  # transformers' advice and progress bars stay off the console


def test_variants_in_the_file_name(llm_runs):
    name = ok(llm_runs["eager_static"]).files()[0]
    assert name == f"1x16x4_{CPU_DTYPE}_warm_eager_attn-eager_cache-static.json"
    tag = parse_tag(name)
    assert tag.shape == (1, 16, 4) and tag.variant("attn") == "eager" and tag.variant("cache") == "static"
    assert tag.variant("model") is None  # the default model adds no variant
    files = ok(llm_runs["compile_static"]).files()
    compiled = parse_tag(next(n for n in files if n.endswith(".json")))
    assert compiled.mode == "compile" and compiled.variant("model") == "tiny-llama"
    assert f"{Path(next(n for n in files if n.endswith('.json'))).stem}.graph0.py" in files  # the compiled decode's module


# -- L.1 one request per step ----------------------------------------------------------------------------------------

def test_each_step_is_one_prefill_then_new_tokens_decodes(llm_runs):
    """L.1: every ProfilerStep holds exactly one prefill and --new-tokens decode annotations, in that order."""
    trace = parsed(llm_runs["default"])
    assert len(trace.steps) == 3
    for step in trace.steps:
        inside = [e for e in trace.inside(step) if e["name"] in ("prefill", "decode")]
        assert [e["name"] for e in inside] == ["prefill"] + ["decode"] * 8
        for a, b in zip(inside, inside[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-3  # one after the other, never nested


# -- L.2 decode is overhead-bound ------------------------------------------------------------------------------------

def test_decode_dispatches_as_many_ops_as_prefill_and_costs_many_times_more_per_token(llm_runs):
    """L.2: a decode forward dispatches about as many ops as a prefill forward (same layers, one token), so its
    time per token is many times prefill's; the report says so with the numbers."""
    report = report_json(trace_of(ok(llm_runs["default"])))
    phases = {p["name"]: p for p in report["phases"]}
    prefill, decode = phases["prefill"], phases["decode"]
    assert prefill["calls"] == 3 and decode["calls"] == 3 * 8
    assert 0.8 <= decode["ops_per_call"] / prefill["ops_per_call"] <= 1.25
    per_token = (decode["mean_us"] / 1) / (prefill["mean_us"] / 64)
    assert per_token >= 4, phases
    (finding,) = [f for f in report["findings"] if f["rule"] == "overhead_bound_phase"]
    ev = finding["evidence"]
    assert ev["phase"] == "decode" and ev["reference"] == "prefill"
    assert ev["tokens_per_call"] == 1 and ev["reference_tokens_per_call"] == 64
    assert ev["per_token_ratio"] >= 4
    said = int(re.search(r"in prefill \(([\d,]+)x\)", finding["message"]).group(1).replace(",", ""))
    assert abs(said - ev["per_token_ratio"]) <= 0.55  # the message's whole number, the evidence's 0.1 (32.5: 32 or 33)


def test_roofline_sets_prefill_against_decode_from_the_lessons_own_count(llm_runs):
    """Without --record-shapes, the lesson's own count (common/work.py) gives the roofline one row of GEMMs
    per phase; decode's (one token: each weight read once per token) sit under 2 FLOP/byte, so the report
    calls them memory-bound by intensity alone, on the CPU too, while prefill's reuse each weight for the
    whole prompt."""
    report = report_json(trace_of(ok(llm_runs["eager_static"])))
    r = report["roofline"]
    assert r["source"] == "count", r
    gemms = {row["shape"].split(":")[0]: row for row in r["rows"] if row["op"].startswith("GEMMs")}
    assert set(gemms) == {"prefill", "decode"}, r["rows"]
    assert gemms["decode"]["flops"] / gemms["decode"]["bytes"] < 2 < gemms["prefill"]["flops"] / gemms["prefill"]["bytes"]
    (finding,) = [f for f in report["findings"] if f["rule"] == "roofline"]
    assert "decode's GEMMs at" in finding["message"] and "memory-bound on any CPU or GPU" in finding["message"]


# -- L.3 attention ---------------------------------------------------------------------------------------------------

def test_sdpa_one_fused_attention_op_per_layer_and_forward(llm_runs):
    """L.3: --attn sdpa: one aten::scaled_dot_product_attention per layer and forward, dispatching a fused
    backend op (aten::_scaled_dot_product_flash_attention_for_cpu here); no softmax of its own."""
    trace = parsed(llm_runs["default"])
    for fwd in forwards(trace):
        sdpas = trace.inside(fwd, "aten::scaled_dot_product_attention")
        assert len(sdpas) == layers()
        for sdpa in sdpas:
            backends = [e["name"] for e in trace.inside(sdpa) if e["name"].startswith("aten::_scaled_dot_product_")]
            assert len(backends) == 1, backends
        assert not trace.inside(fwd, "aten::softmax") and not trace.inside(fwd, "aten::bmm")


def test_eager_attention_is_matmul_softmax_matmul(llm_runs):
    """L.3: --attn eager: no SDPA; per layer and forward two batched matmuls (scores, then values) and a softmax."""
    trace = parsed(llm_runs["eager_static"])
    for fwd in forwards(trace):
        names = names_in(trace, fwd)
        assert not any(n.startswith("aten::scaled_dot_product") or n.startswith("aten::_scaled_dot_product")
                       for n in names)
        assert names["aten::softmax"] == layers()
        assert names["aten::bmm"] == 2 * layers()


# -- L.4 the KV cache ------------------------------------------------------------------------------------------------

def test_dynamic_cache_grows_by_concatenation_every_token(llm_runs):
    """L.4: --cache dynamic: per layer and token, keys and values are concatenated onto the cache (aten::cat),
    whose length grows by one each decode step; nothing is written in place."""
    trace = parsed(llm_runs["default"])
    for step in trace.steps:
        lengths = []
        for dec in trace.inside(step, "decode"):
            assert not trace.inside(dec, "aten::index_copy_")
            cache_cats = [e for e in trace.inside(dec, "aten::cat")
                          if len(e["args"]["Input Dims"][0][0]) == 4 and e["args"]["Input Dims"][0][0][2] > 1]
            assert len(cache_cats) == 2 * layers()  # keys and values of every layer
            lengths.append({e["args"]["Input Dims"][0][0][2] for e in cache_cats})
        assert lengths == [{64 + t} for t in range(8)]  # the prompt, then one more token each step


def test_static_cache_written_in_place_no_growth(llm_runs):
    """L.4: --cache static: preallocated and written in place (aten::index_copy_, keys and values per layer),
    with 2 concatenations per layer fewer than the dynamic cache (those left are the rotary embedding's)."""
    static = parsed(llm_runs["eager_static"])
    dynamic = parsed(llm_runs["default"])
    for fwd in forwards(static):
        assert len(static.inside(fwd, "aten::index_copy_")) == 2 * layers()
    cats = {len(static.inside(f, "aten::cat")) for f in forwards(static)}
    grown = {len(dynamic.inside(f, "aten::cat")) for f in forwards(dynamic)}
    assert len(cats) == 1 and len(grown) == 1 and grown.pop() - cats.pop() == 2 * layers()


# -- L.5 torch.compile with each cache -------------------------------------------------------------------------------

def compiled_regions(trace: Trace) -> list[str]:
    return [e["name"] for e in trace.events if e["name"].startswith("Torch-Compiled Region: ")]


def test_compile_dynamic_cache_went_dynamic_and_the_report_says_so(llm_runs):
    """L.5: the growing cache made torch.compile recompile (region 0/1) before the window; that one graph, with
    dynamic shapes, serves every decode; the report's compile findings say so."""
    run = ok(llm_runs["compile_dynamic"])
    trace = parsed(run)
    assert "compiled decode vs eager: the outputs match" in run.stdout.replace("\n", " ")
    for dec in trace.named("decode"):
        assert len(trace.inside(dec, "Torch-Compiled Region: 0/1")) == 1
    assert not trace.inside(trace.named("prefill")[0], "TorchDynamo Cache Lookup")  # prefill runs eager
    assert set(compiled_regions(trace)) == {"Torch-Compiled Region: 0/1"}
    findings = {f["rule"]: f for f in report_json(trace_of(run))["findings"]}
    went = findings["recompiled_before_window"]
    assert went["evidence"]["compile_id"] == 1 and went["evidence"]["phase"] == "decode"
    assert "dynamic shapes" in went["message"] and "recompiles" not in findings


@pytest.mark.parametrize("key", ["compile_dynamic", "compile_static"])
def test_compiled_llm_runs_never_get_the_compile_advice(llm_runs, key):
    """--compile (05_llm.py warms up by default): no hint says to try torch.compile or to warm up."""
    for f in report_json(trace_of(ok(llm_runs[key])))["findings"]:
        assert "torch.compile" not in f["hint"] and "warm up" not in f["hint"], (f["rule"], f["hint"])


def test_compile_static_cache_one_graph_for_every_decode(llm_runs):
    """L.5: with a static cache one compiled graph (region 0/0, one CompiledFxGraph hash) serves every decode
    step after warm-up: no recompiles in the profiled steps."""
    run = ok(llm_runs["compile_static"])
    trace = parsed(run)
    assert "compiled decode vs eager: the outputs match" in run.stdout.replace("\n", " ")
    hashes = Counter()
    for dec in trace.named("decode"):
        assert [e["name"] for e in trace.inside(dec) if e["name"].startswith("Torch-Compiled Region")] == \
            ["Torch-Compiled Region: 0/0"]
        hashes.update(e["name"] for e in trace.inside(dec) if e["name"].startswith("## Call CompiledFxGraph"))
    assert len(hashes) == 1 and sum(hashes.values()) == 3 * 4
    findings = {f["rule"] for f in report_json(trace_of(run))["findings"]}
    assert "torch_compile" in findings and not findings & {"recompiles", "recompiled_before_window"}


# -- a real checkpoint from a local folder ---------------------------------------------------------------------------

def test_local_checkpoint_with_a_prompt(llm_runs):
    """--model FOLDER (save_pretrained) loads with AutoModelForCausalLM.from_pretrained and AutoTokenizer;
    the prompt's 5 words are the prompt length, and the generated text is printed."""
    run = ok(llm_runs["compile_static"])
    stem = f"1x5x4_{CPU_DTYPE}_warm_compile_model-tiny-llama_cache-static"
    assert run.files() == [f"{stem}.graph0.py", f"{stem}.json", f"{stem}.txt"]  # compiled: Inductor's module beside it
    out = run.stdout.replace("\n", " ")
    assert "the weights are random" not in out and "2 layers of 64" in out
    generated = re.search(r"generated \((\d+) tokens, greedy\): '([^']*)'", out)
    assert generated and int(generated[1]) == 5  # prefill's token and 4 decode steps
    assert generated[2].split() and set(generated[2].split()) <= set(WORDS)


def test_local_checkpoint_without_a_prompt_uses_random_ids(llm_runs):
    out = ok(llm_runs["compile_dynamic"]).stdout.replace("\n", " ")
    assert "1 x 16 prompt tokens (random token ids)" in out
    assert re.search(r"generated token ids \(5, greedy\): \[\d+(, \d+){4}\]", out)


# -- bad input -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(BAD_RUNS))
def test_bad_input_one_line_exit_2_nothing_written(llm_runs, name):
    run = llm_runs[f"bad: {name}"]
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and BAD_RUNS[name][1] in lines[0], run.stderr
    assert "Traceback" not in run.stderr + run.stdout
    assert not run.trace_dir.exists() or not any(run.trace_dir.iterdir())


@pytest.fixture(scope="module")
def lesson_cli():
    """05_llm.py's parser, to check the flags against a model without starting a run."""
    spec = importlib.util.spec_from_file_location("llm_lesson", REPO / "05_llm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.cli


def test_weights_and_cache_too_big_refused_before_allocating(lesson_cli, tmp_path):
    """The weights plus a KV cache for 10^8 sequences: refused by setup's memory estimate, nothing written."""
    argv = ["--batch", "100000000", "--trace_dir", str(tmp_path / "traces")]
    p = llm.plan(lesson_cli.parse_args(argv))
    assert p.elements > 2 * 4 * 10**8 * 4 * (128 + 32) * 32  # keys and values, 4 layers, 4 KV heads of 32
    with pytest.raises(BadInput, match=r"these shapes need about [\d,.]+ [KMG]iB on cpu"):
        setup(lesson_cli.parse_args([*argv, "--device", "cpu"]), shape=p.shape, elements=p.elements,
              variants=p.variants)
    assert not (tmp_path / "traces").exists()


@pytest.mark.parametrize("case, args, words", [
    ("too many positions", ["--prompt-len", "2040", "--new-tokens", "16"], "need 2056 positions, but random Llama has 2048"),
    ("not a causal LM", ["--model", "{not_causal}"], "a 'vit' model is not a causal LM"),
    ("not a model folder", ["--model", "{empty}"], "not a model folder (no config.json in it)"),
    ("no such folder", ["--model", "./no/such/folder"], "no such folder"),
    ("prompt without a model", ["--prompt", "hello"], "--prompt needs --model"),
    ("prompt without a tokenizer", ["--model", "{no_tokenizer}", "--prompt", "the water"], "needs a tokenizer"),
    ("attention not installed", ["--attn", "flash_attention_2"], "--attn flash_attention_2 is not installed here"),
    ("prompt too long", ["--model", "{tiny}", "--prompt", " ".join(["water"] * 250), "--new-tokens", "8"],
     "the prompt's 250 tokens plus --new-tokens 8 need 258 positions"),
])
def test_plan_refuses_before_allocating(lesson_cli, folders, case, args, words):
    """llm.plan checks the flags against the model's config (nothing allocated): one message for each case."""
    argv = [a.format(**{k: str(v) for k, v in folders.items()}) for a in args]
    with pytest.raises(BadInput) as exc:
        llm.plan(lesson_cli.parse_args(argv))
    assert words in str(exc.value)
    assert "\n" not in str(exc.value)


# -- L.3/L.4 in the report: what the variants change in one decode call -----------------------------------------------

def test_report_names_each_variants_decode_chain(llm_runs):
    """The short report (the lesson's console) names the attention op and the KV cache's write op of a decode
    call, with the counts the trace holds: SDPA per layer and aten::cat (2 per layer for the cache) by
    default; bmm + softmax and aten::index_copy_ with --attn eager --cache static."""
    for key, attention, cache in (("default", "sdpa", "dynamic"), ("eager_static", "eager", "static")):
        run = ok(llm_runs[key])
        trace = parsed(run)
        decode = trace.named("decode")[0]
        seen = names_in(trace, decode)
        (f,) = [f for f in report_json(trace_of(run))["findings"] if f["rule"] == "llm_decode_chain"]
        ev = f["evidence"]
        assert (ev["attention"], ev["cache"], ev["layers"]) == (attention, cache, layers())
        for op, per_call in ev["per_call"].items():
            assert per_call == seen[op], op  # every decode call runs the same ops
        if cache == "dynamic":
            assert f"aten::cat {seen['aten::cat']}x, {2 * layers()} of them appending" in f["message"]
            assert "--cache static" in f["hint"] and "index_copy_" not in f["message"]
        else:
            assert f"aten::index_copy_ {2 * layers()}x (2 per layer" in f["message"] and "--cache static" not in f["hint"]
        assert ("aten::scaled_dot_product_attention" in f["message"]) == (attention == "sdpa")
        assert ("aten::softmax" in f["message"]) == (attention == "eager")
        assert "llm_decode_chain: decode, per call:" in run.stdout.replace("\n", " ")
