"""The lessons by name: the one module of the report that knows them (a structure test keeps it so).

Lessons now count their own work (:mod:`common.work`, read by :mod:`.workload`), whatever the script is
called. Traces written before that count existed (the H100 runs among them) carry only the lesson's knobs:
here, and only where the trace holds no count, those knobs are translated into what the count would say
(the GEMMs and the attention of a step, the score matrix, an LLM's tokens per call), and a few lines of
the posts that belong to one lesson are kept for that lesson's own traces. Also the posts' order of the
lessons, for ``--glance``.

A lesson's arithmetic per step from its knobs (the trace's ``lesson`` metadata): the shapes the lesson
ran give each GEMM's FLOPs and ideal bytes without ``record_shapes``, as :mod:`.op_arithmetic` counts
them from recorded shapes.

Two kinds of rows, each with one FLOP convention (docs/report.md says it once):

- **the GEMMs** a step runs (what the kernels execute): ``[M,K] @ [K,N]`` does ``2·M·N·K``, ideal bytes
  the inputs read once and the output written once. The hand-written attention's two ``bmm`` compute
  the full ``[seq, seq]`` scores, the masked half included, so they count it. Timed by the kernels
  of the GEMM ops; judged at the dtype their kernels ran (SDPA's math backend runs bf16 inputs as
  fp32 GEMMs: their names say so).
- **the attention forward** (the operation, in every attention lesson): one count whatever ran it,
  ``2·B·H·S²·D`` for causal attention (the unmasked half of the two ``[seq, seq]`` GEMMs, as
  :func:`common.attention.flops` and FlashAttention's benchmarks count it); ideal bytes q, k, v read
  and the output written. Timed by all the device work of the step (one forward per step), so a
  variant's rate ranks as its time does: naive, in-place, math, efficient, flash, cuDNN, the Hub's.

Lessons not listed here (or knobs without a shape) give no rows: the roofline then keeps the
knobs' ``matmul_flops_per_step`` alone (FLOPs, no bytes). Plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from common.knobs import RunKnobs
from common.dtypes import ELEMENT_BYTES
from common.attention import flops
from common.report.facts.workload import Scores
GEMMS = "GEMMs (per step, lesson's knobs)"
ATTENTION = "attention forward (per step, lesson's knobs)"
ATTENTION_SCRIPTS = ("04_a_naive_attention", "04_b_inplace_ops_attention", "04_c_sdpa_attention",
                     "04_d_kernels_attention")


@dataclass(frozen=True)
class Gemm:
    """One GEMM a step runs: ``batch`` x ``[m, k] @ [k, n]``, and what it is in the lesson's words."""

    what: str
    batch: int
    m: int
    k: int
    n: int

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k

    @property
    def elements(self) -> int:
        """Inputs read once and the output written once."""
        return self.batch * (self.m * self.k + self.k * self.n + self.m * self.n)

    def text(self) -> str:
        lead = f"{self.batch}x" if self.batch > 1 else ""
        return f"{self.what} {lead}{self.m}x{self.k} @ {lead}{self.k}x{self.n}"


@dataclass(frozen=True)
class KnobRow:
    """A row of the roofline from the knobs: its label (:data:`GEMMS` or :data:`ATTENTION`), FLOPs and
    ideal bytes per step, its shape in words, the inputs' dtype, and whether FLOPs are causal-halved."""

    op: str
    flops: int
    bytes: Optional[int]
    shape: str
    dtype: str
    causal: Optional[bool] = None


def step_gemms(k: RunKnobs) -> tuple[Gemm, ...]:
    """The GEMMs one step of the lesson runs, from its knobs' shape; () where the lesson is not known."""
    s = k.shape
    if k.script == "01_matmul_add" and len(s) in (1, 2):
        batch, n = (s[0], s[1]) if len(s) == 2 else (1, s[0])
        return (Gemm("x@w", batch, n, n, n),)
    if k.script == "02_linear" and len(s) == 3:
        batch, d_in, d_out = s
        return (Gemm("x@w.T", 1, batch, d_in, d_out),)
    if k.script in ("03_simple_mlp", "03_kernels_mlp") and len(s) == 4:
        batch, seq, dim, hidden = s
        tokens = batch * seq
        return (Gemm("gate", 1, tokens, dim, hidden), Gemm("up", 1, tokens, dim, hidden),
                Gemm("down", 1, tokens, hidden, dim))
    if k.script in ATTENTION_SCRIPTS[:3] and len(s) == 4:  # the hand-written forward, and SDPA's math backend
        batch, heads, seq, dim = s
        return (Gemm("q@k.T", batch * heads, seq, dim, seq), Gemm("scores@v", batch * heads, seq, seq, dim))
    return ()


def gemm_row(k: RunKnobs, dtype: str) -> Optional[KnobRow]:
    """The step's GEMMs as one row, at ``dtype`` (their kernels' own where the names say it)."""
    gemms = step_gemms(k)
    size = ELEMENT_BYTES.get(dtype)
    if not gemms:
        return None
    nbytes = size * sum(g.elements for g in gemms) if size else None
    return KnobRow(GEMMS, sum(g.flops for g in gemms), nbytes, ", ".join(g.text() for g in gemms), dtype)


def attention_row(k: RunKnobs) -> Optional[KnobRow]:
    """The attention forward of an attention lesson, one count for every variant (causal: the lessons'
    attention is causal, so the unmasked half)."""
    if k.script not in ATTENTION_SCRIPTS or len(k.shape) != 4:
        return None

    batch, heads, seq, dim = k.shape
    shape = _Shape(batch, heads, seq, dim)
    size = ELEMENT_BYTES.get(k.dtype)
    nbytes = size * 4 * batch * heads * seq * dim if size else None  # q, k, v read, the output written
    return KnobRow(ATTENTION, flops(shape, causal_skips=True), nbytes, f"{batch}x{heads}x{seq}x{dim} causal",
                   k.dtype, causal=True)


@dataclass(frozen=True)
class _Shape:
    """The attribute names :func:`common.attention.flops` reads off a lesson's arguments."""

    batch: int
    heads: int
    seq: int
    head_dim: int


# ----------------------------------------------------------------------------- the rest a lesson's name told


# the posts' order: the lessons as the posts run them (--glance sorts its table so)
LESSON_ORDER = ("01_matmul_add", "02_linear", "03_simple_mlp", "03_kernels_mlp", "04_a_naive_attention",
                "04_b_inplace_ops_attention", "04_c_sdpa_attention", "04_d_kernels_attention", "05_llm", "06_ddp")
LLM_SCRIPTS = ("04_llm", "05_llm")  # the LLM lesson (04_llm.py before Part 3 took the number)


def lesson_rank(k: Optional[RunKnobs]) -> int:
    """Where the run's lesson sits in the posts' order; after them, anyone's script."""
    return LESSON_ORDER.index(k.script) if k is not None and k.script in LESSON_ORDER else len(LESSON_ORDER)


def part1_lesson(k: Optional[RunKnobs]) -> bool:
    """Part 1's own lesson (its traces compare with the post's sizes)."""
    return k is not None and k.script == "01_matmul_add"


def linear_lesson(k: Optional[RunKnobs]) -> bool:
    """02's trace, whose compiled addmm is an nn.Linear (Part 1's compiled matmul + add is an addmm too)."""
    return k is not None and k.script == "02_linear"


def inplace_command(k: Optional[RunKnobs]) -> Optional[str]:
    """The post's next step from the naive attention lesson: its in-place twin."""
    return "uv run 04_b_inplace_ops_attention.py" if k is not None and k.script.startswith("04_a") else None


def llm_tokens(k: Optional[RunKnobs]) -> dict:
    """Tokens per call of the LLM lesson's phases from its knobs (batch x prompt length x new tokens), for
    its traces written before the count."""
    if k is None or k.script not in LLM_SCRIPTS or len(k.shape) != 3:
        return {}
    batch, prompt_len, _ = k.shape
    return {"prefill": batch * prompt_len, "decode": batch}


def legacy_scores(k: Optional[RunKnobs]):
    """An attention lesson's ``[batch, heads, seq, seq]`` score matrix from its knobs (annotation unknown:
    its ``..._fwd``), for its traces written before the count."""
    if k is None or k.script not in ATTENTION_SCRIPTS or len(k.shape) != 4 or k.dtype not in ELEMENT_BYTES:
        return None
    batch, heads, seq, _ = k.shape
    return Scores(None, (batch, heads, seq, seq), k.dtype, batch * heads * seq * seq * ELEMENT_BYTES[k.dtype])


def legacy_memory_ops(k: Optional[RunKnobs]) -> tuple:
    """The hand-written attention's passes over its scores (naive and in-place), as the workload's count lists
    them (:mod:`common.work`'s rows: the op, bytes read and written, one call a step; annotation unknown), for
    its traces written before the count: ``mul`` (the scale), the causal mask's fill (``masked_fill`` out of
    place, ``masked_fill_`` in place; the ``[seq, seq]`` bool mask read too) and ``_softmax``, each reading the
    ``[batch, heads, seq, seq]`` scores once and writing them once. () for any other run."""
    scores = legacy_scores(k)
    if scores is None or k.script not in ATTENTION_SCRIPTS[:2]:
        return ()
    *_, seq, _ = scores.shape
    fill = "aten::masked_fill_" if k.script == ATTENTION_SCRIPTS[1] else "aten::masked_fill"
    passes = (("aten::mul", [scores.shape]), (fill, [scores.shape, (seq, seq)]), ("aten::_softmax", [scores.shape]))
    return tuple(dict(annotation=None, op=op, shapes=[list(s) for s in shapes], dtype=scores.dtype, calls=1, flops=0,
                      read=scores.bytes + (seq * seq if len(shapes) > 1 else 0), written=scores.bytes)
                 for op, shapes in passes)
