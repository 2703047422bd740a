"""What 05_llm.py needs besides its lesson: the model, the request's checks, the KV cache, the speeds.

:func:`plan` reads the flags and checks everything before a byte is allocated: where the model
comes from (the default random Llama, a local folder, or a Hub id), that it is a causal LM, that
the attention implementation is installed, that the prompt plus the new tokens fit the model's
positions, and how many elements the weights, the KV cache and the activations take.
:func:`build` then makes the model, :class:`CacheMaker` the KV cache of each request, and
:func:`read_speeds` reads prefill's and decode's time back from the profiled steps.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import logging
import os
import socket
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.markup import escape

from common.errors import fail
from common.paths import Variant, slug

DEFAULT_MODEL = "random Llama"  # what the console calls the default model
SEED = 0  # the default model's weights and the random prompt are the same on every run


def default_config():
    """The default model: Llama's architecture (RMSNorm, rotary positions, grouped-query attention,
    a SwiGLU MLP, Llama 2's 32,000-token vocabulary) at a width a CPU runs in seconds: 4 layers of
    256, 19 M parameters. Small enough that a decode step costs what dispatching its ops costs."""
    from transformers import LlamaConfig  # lazy: transformers, 1.8 s: 05_llm.py answers --help and bad flags without it

    return LlamaConfig(vocab_size=32000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                       num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=2048,
                       tie_word_embeddings=False)


@dataclass(frozen=True)
class Request:
    """One profiler step: a prompt of ``prompt_len`` tokens per sequence, then ``new_tokens`` decode forwards."""

    batch: int
    prompt_len: int
    new_tokens: int

    @property
    def positions(self) -> int:
        """Positions the KV cache holds at the end: the prompt, then every token fed back by decode."""
        return self.prompt_len + self.new_tokens


@dataclass(frozen=True)
class Plan:
    """The checked run: which model, how it attends and caches, the request. Nothing allocated yet."""

    source: str | None  # None: the default random model; else a Hub id or a local folder
    config: Any  # transformers.PretrainedConfig
    attn: str
    cache: str
    request: Request
    parameters: int
    tokenizer: Any = None  # only with --prompt
    prompt_ids: tuple[int, ...] | None = None  # the tokenized --prompt; None: random token ids

    @property
    def name(self) -> str:
        return self.source or DEFAULT_MODEL

    @property
    def shape(self) -> tuple[int, int, int]:
        r = self.request
        return r.batch, r.prompt_len, r.new_tokens

    @property
    def variants(self) -> list[Variant]:
        """File-name variants; the defaults (random Llama, sdpa, dynamic cache) add none."""
        out: list[Variant] = []
        if self.source:  # a local folder by its name, a Hub id whole (org/name -> org-name)
            local = Path(self.source)
            out.append(("model", slug(local.name if local.is_dir() else self.source)))
        if self.attn != "sdpa":
            out.append(("attn", slug(self.attn)))
        if self.cache != "dynamic":
            out.append(("cache", self.cache))
        return out

    @property
    def elements(self) -> int:
        """Elements alive at once: the weights, the KV cache at its fullest, prefill's activations."""
        text = self.config.get_text_config()
        r = self.request
        hidden = text.hidden_size
        heads = text.num_attention_heads
        kv_heads = getattr(text, "num_key_value_heads", None) or heads
        head_dim = getattr(text, "head_dim", None) or hidden // heads
        kv_cache = 2 * text.num_hidden_layers * r.batch * kv_heads * r.positions * head_dim
        tokens = r.batch * r.prompt_len
        ffn = getattr(text, "intermediate_size", None) or 4 * hidden
        activations = tokens * (6 * hidden + 3 * ffn)  # a layer's inputs, q/k/v/o, the MLP's three widths
        if self.attn == "eager":  # the scores matrix, and its float32 softmax
            activations += 3 * r.batch * heads * r.prompt_len * r.positions
        return self.parameters + kv_cache + activations + r.batch * text.vocab_size


# ----------------------------------------------------------------------------- plan (checks only)


def plan(args: argparse.Namespace) -> Plan:
    """Check the flags against the model's config; one ``error:`` line for anything that cannot run."""
    _quiet_libraries()
    source = args.model
    if source is not None and Path(source).expanduser().exists():
        source = str(Path(source).expanduser())  # a local folder: what from_pretrained and the name read
    config = default_config() if source is None else _load_config(source)
    _check_causal_lm(config, source)
    _check_weights(source)  # before the model's classes load: a folder without weights is said at once
    parameters = _check_attention(config, args.attn, source)
    tokenizer, prompt_ids = _tokenize(args.prompt, source)
    prompt_len = len(prompt_ids) if prompt_ids is not None else args.prompt_len
    request = Request(args.batch, prompt_len, args.new_tokens)
    _check_positions(config, request, source, from_prompt=prompt_ids is not None)
    return Plan(source, config, args.attn, args.cache, request, parameters, tokenizer, prompt_ids)


def _quiet_libraries() -> None:
    """transformers and huggingface_hub log retries and advice to stderr; the lesson says it in one line."""
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    from transformers.utils import logging as hf_logging  # lazy: transformers, 1.8 s: 05_llm.py answers --help and bad flags without it

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # the lesson's spinner covers loading the weights
    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)


def _offline_hint(source: str) -> str:
    return (f"cannot load --model {source}: it is not a local folder and the Hugging Face Hub cannot be reached "
            "(offline); use the default model (leave out --model) or a local folder saved with save_pretrained")


def _hub_reachable() -> bool:
    """False when the Hub is switched off (HF_HUB_OFFLINE) or its host does not resolve (no network);
    a proxy, when set, is trusted to know better."""
    from huggingface_hub import constants  # lazy: huggingface_hub, 100 ms (httpx): only to ask whether the Hub answers

    if constants.HF_HUB_OFFLINE:
        return False
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    host = urllib.parse.urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    try:
        socket.getaddrinfo(host, 443)
    except OSError:
        return False
    return True


def _load_config(source: str):
    """The config of a local folder, or of a Hub id (from the local cache first, then the Hub)."""
    from transformers import AutoConfig  # lazy: transformers, 1.8 s: 05_llm.py answers --help and bad flags without it

    folder = Path(source)
    if folder.exists():
        if not (folder / "config.json").is_file():
            fail(f"--model {source}: not a model folder (no config.json in it); save one with save_pretrained")
        try:
            return AutoConfig.from_pretrained(folder)
        except (OSError, ValueError, KeyError) as exc:
            fail(f"--model {source}: cannot read its config.json ({_first_line(exc)})")
    if source.startswith((".", "/", "~")) or source.count("/") > 1:
        fail(f"--model {source}: no such folder (a Hub id looks like org/name)")
    try:
        return AutoConfig.from_pretrained(source, local_files_only=True)  # cached earlier: no network needed
    except (OSError, ValueError):
        pass
    if not _hub_reachable():
        fail(_offline_hint(source))
    try:
        return AutoConfig.from_pretrained(source)
    except (OSError, ValueError) as exc:
        fail(f"cannot load --model {source} from the Hugging Face Hub ({_first_line(exc)}); "
             "use the default model (leave out --model) or a local folder")


WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")  # what from_pretrained loads from a folder


def _check_weights(source: str | None) -> None:
    """A local folder holds weights (a config alone builds nothing): said now, before the run starts."""
    if source is None or not Path(source).is_dir():
        return
    if not any((Path(source) / name).is_file() for name in WEIGHT_FILES):
        fail(f"cannot load the weights of --model {source}: the folder has a config.json but no weights "
             f"({' or '.join(WEIGHT_FILES[::2])}); save the model with save_pretrained, or leave out --model")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


def _check_causal_lm(config, source: str | None) -> None:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES  # lazy: transformers, 1.8 s: 05_llm.py answers --help and bad flags without it

    if config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        fail(f"--model {source}: a {config.model_type!r} model is not a causal LM (no AutoModelForCausalLM "
             "class): this lesson generates text token by token, with a decoder such as Llama, Qwen or GPT-2")


def _check_attention(config, attn: str, source: str | None) -> int:
    """Build the model on the meta device (no memory) with the requested attention; its parameter count."""
    from transformers import AutoModelForCausalLM  # lazy: transformers, 1.8 s: 05_llm.py answers --help and bad flags without it

    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, attn_implementation=attn)
    except ImportError as exc:
        fail(f"--attn {attn} is not installed here ({_first_line(exc)}); use --attn sdpa or --attn eager")
    except ValueError as exc:
        fail(f"--attn {attn} does not work with {source or DEFAULT_MODEL} ({_first_line(exc)}); "
             "use --attn sdpa or --attn eager")
    return sum(p.numel() for p in model.parameters())


def _tokenize(prompt: str | None, source: str | None) -> tuple[Any, tuple[int, ...] | None]:
    """The checkpoint's tokenizer and the prompt's token ids; (None, None) without --prompt."""
    if prompt is None:
        return None, None
    if source is None:
        fail(f"--prompt needs --model: the default model ({DEFAULT_MODEL}) has random weights and no tokenizer; "
             "leave out --prompt to use random token ids")
    from transformers import AutoTokenizer  # lazy: transformers, 1.8 s: 05_llm.py answers --help and bad flags without it

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=not _hub_reachable())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        fail(f"--prompt needs a tokenizer, and {source} has none that loads ({_first_line(exc)}); "
             "leave out --prompt to use random token ids")
    ids = tuple(tokenizer(prompt)["input_ids"])
    if not ids:
        fail(f"--prompt {prompt!r} gives no tokens")
    return tokenizer, ids


def _check_positions(config, request: Request, source: str | None, *, from_prompt: bool) -> None:
    limit = getattr(config.get_text_config(), "max_position_embeddings", None)
    if limit and request.positions > limit:
        what = f"the prompt's {request.prompt_len} tokens" if from_prompt else f"--prompt-len {request.prompt_len}"
        fail(f"{what} plus --new-tokens {request.new_tokens} need {request.positions} positions, but "
             f"{source or DEFAULT_MODEL} has {limit} (max_position_embeddings); use fewer tokens")


# ----------------------------------------------------------------------------- the model, the prompt, the cache


def build(p: Plan, device: torch.device, dtype: torch.dtype):
    """The model in eval mode on ``device``: random weights (seeded) by default, else the checkpoint's."""
    from transformers import AutoModelForCausalLM  # lazy: transformers, 1.8 s: 05_llm.py answers --help and bad flags without it

    if p.source is None:
        torch.manual_seed(SEED)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(p.config, attn_implementation=p.attn, dtype=dtype)
    else:
        try:
            model = AutoModelForCausalLM.from_pretrained(p.source, attn_implementation=p.attn, dtype=dtype)
        except (OSError, ValueError) as exc:  # no weights in the folder, or not in the cache while offline
            fail(f"cannot load the weights of --model {p.source} ({_first_line(exc)}); use the default model "
                 "(leave out --model) or a local folder saved with save_pretrained")
        model = model.to(device)
    return model.eval()


def prompt_tokens(p: Plan, device: torch.device) -> torch.Tensor:
    """``[batch, prompt_len]`` token ids: the tokenized --prompt on every row, or seeded random ids."""
    r = p.request
    if p.prompt_ids is not None:
        return torch.tensor([p.prompt_ids] * r.batch, device=device)
    generator = torch.Generator().manual_seed(SEED)
    vocab = p.config.get_text_config().vocab_size
    return torch.randint(0, vocab, (r.batch, r.prompt_len), generator=generator).to(device)


def last_logits_only(model) -> dict:
    """``logits_to_keep=1`` where the model takes it (as generate() does): prefill computes the
    vocabulary projection for the last position only, the one the next token comes from."""
    return {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}


class CacheMaker:
    """The KV cache of each request. ``dynamic``: a new DynamicCache that grows by concatenation
    (``aten::cat`` per layer per token). ``static``: one StaticCache preallocated for the whole
    request and reset in place between requests (its tensors keep their addresses, which
    torch.compile and CUDA graphs rely on); each token is written with ``aten::index_copy_``."""

    def __init__(self, p: Plan):
        self.plan = p
        self._static = None

    def __call__(self):
        from transformers import DynamicCache, StaticCache  # lazy: transformers, 1.8 s: 05_llm.py answers --help and bad flags without it

        if self.plan.cache == "dynamic":
            return DynamicCache(config=self.plan.config)
        if self._static is None:
            self._static = StaticCache(config=self.plan.config, max_cache_len=self.plan.request.positions)
        else:
            self._static.reset()
        return self._static


def decode_pair(model, decode, prompt: torch.Tensor, new_cache: CacheMaker) -> tuple[torch.Tensor, torch.Tensor]:
    """One decode step's logits from ``decode`` (the compiled forward) and from the eager model, both
    after the same prefill: the eager one runs on a copy of the cache."""
    with torch.no_grad():
        cache = new_cache()
        out = model(input_ids=prompt, past_key_values=cache, use_cache=True, **last_logits_only(model))
        token = out.logits[:, -1:].argmax(-1)
        twin = copy.deepcopy(cache)
        torch.compiler.cudagraph_mark_step_begin()
        got = decode(input_ids=token, past_key_values=cache, use_cache=True).logits.clone()
        want = model(input_ids=token, past_key_values=twin, use_cache=True).logits
    return got, want


# ----------------------------------------------------------------------------- the console


def describe(console: Console, p: Plan) -> None:
    text = p.config.get_text_config()
    size = f"{p.parameters / 1e6:,.1f} M parameters, {text.num_hidden_layers} layers of {text.hidden_size}"
    console.print(f"model   {escape(p.name)} ({p.config.model_type}, {size})   attention {p.attn}   "
                  f"cache {p.cache}")
    if p.source is None:
        console.print("        [yellow]the weights are random[/] (no download): the timings are real, "
                      "the generated tokens are noise; --model ID_OR_FOLDER loads a real checkpoint")
    r = p.request
    prompt = "the tokenized --prompt" if p.prompt_ids is not None else "random token ids"
    console.print(f"request {r.batch} x {r.prompt_len} prompt tokens ({prompt}), then {r.new_tokens} decode "
                  "forwards of one token each: one request per profiler step")


@dataclass(frozen=True)
class PhaseSpeed:
    name: str
    calls: int
    ms_per_call: float  # mean over the profiled calls: host span, or the kernels' time if longer
    tokens_per_call: int

    @property
    def tokens_per_s(self) -> float:
        return 1e3 * self.tokens_per_call / self.ms_per_call if self.ms_per_call > 0 else float("inf")

    @property
    def ms_per_token(self) -> float:
        return self.ms_per_call / self.tokens_per_call


def read_speeds(prof: torch.profiler.profile, request: Request) -> dict[str, PhaseSpeed]:
    """prefill's and decode's mean time per call over the profiled steps, from their annotations.

    A call costs its host span (record_function's start to end) or, on a GPU, the time of the
    kernels it launched when that is longer (the GPU may still be working after the span ends)."""
    tokens = {"prefill": request.batch * request.prompt_len, "decode": request.batch}
    spans: dict[str, list[float]] = {name: [] for name in tokens}
    for e in prof.events():
        if e.name in spans and e.device_type == torch.autograd.DeviceType.CPU:  # not the GPU lane's copy
            span = e.time_range.end - e.time_range.start
            spans[e.name].append(max(span, e.device_time_total))
    return {name: PhaseSpeed(name, len(us), sum(us) / len(us) / 1e3, tokens[name])
            for name, us in spans.items() if us}


def print_speeds(console: Console, speeds: dict[str, PhaseSpeed]) -> None:
    pre, dec = speeds.get("prefill"), speeds.get("decode")
    if pre:
        console.print(f"prefill  {pre.tokens_per_s:,.0f} tokens/s   ({pre.tokens_per_call:,} tokens per call, "
                      f"{pre.ms_per_call:.2f} ms per call, {pre.calls} calls profiled)")
    if dec:
        ratio = f", {dec.ms_per_token / pre.ms_per_token:,.0f}x prefill's time per token" if pre else ""
        console.print(f"decode   {dec.tokens_per_s:,.0f} tokens/s   ({dec.ms_per_call:.2f} ms per decoded token"
                      f"{ratio}; {dec.calls} calls profiled)")


def print_generated(console: Console, p: Plan, generated: torch.Tensor) -> None:
    """The new tokens of the last request's first sequence: text with a tokenizer, else token ids."""
    ids = generated[0].tolist()
    if p.tokenizer is not None:
        text = p.tokenizer.decode(ids, skip_special_tokens=True)
        console.print(f"generated ({len(ids)} tokens, greedy): [italic]{escape(repr(text))}[/]", soft_wrap=True)
    else:
        shown = ", ".join(map(str, ids[:16])) + (", ..." if len(ids) > 16 else "")
        console.print(f"generated token ids ({len(ids)}, greedy): [{shown}]")
