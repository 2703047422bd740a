"""A lesson's arithmetic per step from its knobs (the trace's ``lesson`` metadata): the shapes the lesson
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

DTYPE_SIZE = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8, "fp8": 1}
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
    size = DTYPE_SIZE.get(dtype)
    if not gemms:
        return None
    nbytes = size * sum(g.elements for g in gemms) if size else None
    return KnobRow(GEMMS, sum(g.flops for g in gemms), nbytes, ", ".join(g.text() for g in gemms), dtype)


def attention_row(k: RunKnobs) -> Optional[KnobRow]:
    """The attention forward of an attention lesson, one count for every variant (causal: the lessons'
    attention is causal, so the unmasked half)."""
    if k.script not in ATTENTION_SCRIPTS or len(k.shape) != 4:
        return None
    from common.attention import flops

    batch, heads, seq, dim = k.shape
    shape = _Shape(batch, heads, seq, dim)
    size = DTYPE_SIZE.get(k.dtype)
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
