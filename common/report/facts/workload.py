"""The workload's own count (the trace's ``lesson.work``, written by :mod:`common.work` before profiling)
as the roofline's per-step rows: what one call of the workload ran, whatever the script is called.

Per annotation the count saw (``mlp_fwd``; the LLM's ``prefill`` and ``decode``), two rows at most:

- **its GEMMs** (the ops of :data:`~common.report.load.shapes.GEMM_OPS`): their FLOPs by torch's
  formulas (``2·M·N·K``, the bias added), ideal bytes each input read once and each output written
  once; timed by the trace's GEMM ops inside that annotation;
- **its attention** (``F.scaled_dot_product_attention`` calls, whatever backend ran them): torch counts
  ``4·B·H·S²·D``; a causal one is halved, the unmasked half (docs/report.md), its batch, heads, lengths
  and head size said; timed, where the annotation holds no GEMM of its own (the Part 3 lessons: the math
  backend's ``bmm`` are the attention's), by all the step's device work (on the CPU, the step's wall
  time), so every variant's rate ranks as its time does; elsewhere by the trace's attention ops inside
  that annotation.

Plain Python: the description is JSON that any run may hold; a row that is not what
:mod:`common.work` writes is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Optional

from common.report.load.shapes import ATTENTION_OPS, GEMM_OPS
from common.dtypes import ELEMENT_BYTES
from common.work import row_flops


@dataclass(frozen=True)
class Part:
    """One row of a step's counted work: an annotation's GEMMs or its attention."""

    annotation: Optional[str]
    kind: str  # "gemm" | "attention"
    ops: frozenset  # the trace's names of the ops that do it
    flops: int  # per step
    bytes: int  # per step
    shape: str  # in words
    dtype: str
    causal: Optional[bool]
    alone: bool  # the annotation holds no GEMM besides: the step's whole work is this attention


def parts(work: Optional[dict]) -> tuple:
    """The count's rows by annotation, GEMMs then attention; () where the description holds none."""
    rows = [r for r in (work or {}).get("ops") or () if valid_row(r)]
    annotations = list(dict.fromkeys(r["annotation"] for r in rows))
    out = []
    for annotation in annotations:
        mine = [r for r in rows if r["annotation"] == annotation]
        gemms = [r for r in mine if r["op"] in GEMM_OPS and int(r["flops"]) > 0]
        attention = [r for r in mine if isinstance(r.get("attention"), dict) and r["op"] in ATTENTION_OPS]
        if gemms:
            out.append(_part(annotation, "gemm", gemms, None, alone=False, named=len(annotations) > 1))
        if attention:
            causal = {bool(r["attention"].get("causal")) for r in attention}
            backend = {r["op"] for r in mine if r.get("within") and r["op"] in ATTENTION_OPS}
            out.append(_part(annotation, "attention", attention, causal.pop() if len(causal) == 1 else None,
                             alone=not [r for r in gemms if not r.get("within")], named=len(annotations) > 1,
                             also=backend))
    return tuple(out)


def valid_row(r) -> bool:
    """A row as :mod:`common.work` writes it (op, calls, FLOPs, bytes read and written, shapes, annotation)."""
    try:
        return (isinstance(r, dict) and isinstance(r["op"], str) and int(r["calls"]) > 0 and int(r["flops"]) >= 0
                and int(r["read"]) >= 0 and int(r["written"]) >= 0 and isinstance(r["shapes"], list)
                and (r.get("annotation") is None or isinstance(r["annotation"], str)))
    except (KeyError, TypeError, ValueError, OverflowError):
        return False


def _part(annotation: Optional[str], kind: str, rows: list, causal: Optional[bool], alone: bool, named: bool,
          also: frozenset = frozenset()) -> Part:
    """One row; its words start with the annotation where the step has several (``decode: mm ...``); ``also``:
    the trace's names of the ops that ran it (an SDPA call's backend op)."""
    flops = sum(row_flops(r) * int(r["calls"]) for r in rows)
    nbytes = sum((int(r["read"]) + int(r["written"])) * int(r["calls"]) for r in rows)
    dtypes = {r["dtype"] for r in rows}
    text = _attention_words(rows) if kind == "attention" else ", ".join(_words(r) for r in rows)
    if named and annotation is not None:
        text = f"{annotation}: {text}"
    return Part(annotation, kind, frozenset(r["op"] for r in rows) | frozenset(also), flops, nbytes, text,
                dtypes.pop() if len(dtypes) == 1 else "mixed", causal, alone)


def _words(r: dict) -> str:
    """``mm 8192x768 @ 768x3072 (x3)``; attention ``sdpa 8x16x1024x64 causal``."""
    name = r["op"].removeprefix("aten::")
    times = f" (x{r['calls']})" if int(r["calls"]) > 1 else ""
    dims = ["x".join(str(n) for n in s) for s in r["shapes"] if len(s) >= 2][-2:]
    return f"{name} {' @ '.join(dims)}{times}"


def _attention_words(rows: list) -> str:
    """``sdpa 8x16x1024x64 causal``; a decode's growing keys as a range: ``sdpa 1x8x1x32, keys 129-160 (x128)``."""
    shapes = [r["attention"] for r in rows]
    first, calls = shapes[0], sum(int(r["calls"]) for r in rows)
    keys = sorted({a.get("seq_kv") for a in shapes})
    text = f"sdpa {first.get('batch')}x{first.get('heads')}x{first.get('seq_q')}x{first.get('head_dim')}"
    if keys != [first.get("seq_q")]:
        text += f", keys {keys[0]}" + (f"-{keys[-1]}" if len(keys) > 1 else "")
    return text + (" causal" if first.get("causal") else "") + (f" (x{calls})" if calls > 1 else "")


@dataclass(frozen=True)
class Scores:
    """Attention's ``[.., seq, seq]`` score matrix as the workload makes it (or would, unfused): the
    annotation that holds the attention, its shape, dtype and bytes."""

    annotation: Optional[str]
    shape: tuple
    dtype: str
    bytes: int


def scores(work: Optional[dict]) -> Optional[Scores]:
    """The attention's score matrix, read from the count: an SDPA op's batch x heads x query x key lengths
    (what the math backend materialises, a fused kernel never), else the output of a batched GEMM that
    multiplies ``[n, seq, d]`` by ``[n, d, seq]`` (a hand-written ``q @ k.T``), shown in the 4-D shape the
    next op reads it as where one does; None where the workload holds neither."""
    rows = [r for r in (work or {}).get("ops") or () if valid_row(r)]
    for r in rows:
        a = r.get("attention")
        if a and r["dtype"] in ELEMENT_BYTES:
            shape = (a["batch"], a["heads"], a["seq_q"], a["seq_kv"])
            return Scores(r["annotation"], shape, r["dtype"], prod(shape) * ELEMENT_BYTES[r["dtype"]])
    for r in rows:
        if r["op"] in ("aten::bmm", "aten::baddbmm") and _qk(r["shapes"][-2:]) and r["dtype"] in ELEMENT_BYTES:
            (n, seq, _), (_, _, keys) = r["shapes"][-2:]
            shape = (n, seq, keys)
            four = next((tuple(s) for o in rows if o["annotation"] == r["annotation"] for s in o["shapes"][:1]
                         if len(s) == 4 and prod(s) == prod(shape)), shape)
            return Scores(r["annotation"], four, r["dtype"], prod(shape) * ELEMENT_BYTES[r["dtype"]])
    return None


def _qk(shapes: list) -> bool:
    """``[n, s, d] @ [n, d, s2]`` with ``d`` under ``s`` and ``s2``: scores, not a projection."""
    if len(shapes) != 2 or any(len(s) != 3 for s in shapes):
        return False
    (n, s, d), (n2, d2, s2) = shapes
    return n == n2 and d == d2 and d < s and d < s2


def tokens_per_call(work: Optional[dict]) -> dict:
    """Tokens per call of each annotation that embeds token ids (``aten::embedding``'s indices: a language
    model's ``prefill`` reads the prompt, its ``decode`` one token per sequence); {} where none does."""
    out = {}
    for r in (work or {}).get("ops") or ():
        if valid_row(r) and r["op"] == "aten::embedding" and len(r["shapes"]) >= 2 and r["annotation"]:
            out.setdefault(r["annotation"], prod(r["shapes"][1]))
    return out
