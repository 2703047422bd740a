"""The lessons' H100 runs as if recorded with more of the profiler's flags: ``--profile-memory`` (the allocator's
``[memory]`` events) and ``--record-shapes`` (each op's ``Input Dims``). The runs in ``tests/data/h100/runs``
were made without them; these copies add, to the real ops of every annotated call, what those flags record
there, so a test reads the report on real kernels, launches and op trees with the extra events.

A memory plan is a list, per annotated call, of what the allocator does inside it, in order:
``("+", op, k, bytes, key)`` allocates a block inside the ``k``-th op named ``op`` of the call (by start
time, at any depth: where the real run's allocation sits, as a CPU run of the same lesson with
``--profile-memory`` shows it), ``("-", op, k, key)`` frees block ``key`` just before that op ends; ``("-",
None, 0, key)`` frees it just after the call. Blocks live before the window (the inputs, the workspace) are
one allocation of ``base`` bytes before the first step.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from h100 import h100_trace

MIB = 1 << 20


def _doc(run: str) -> dict:
    return json.loads(gzip.decompress(h100_trace(run).read_bytes()))


def _calls(doc: dict, annotation: str) -> list[dict]:
    return sorted((e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("name") == annotation
                   and e.get("cat") == "user_annotation"), key=lambda e: e["ts"])


def _ops_in(doc: dict, call: dict) -> list[dict]:
    end = call["ts"] + call["dur"]
    return sorted((e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"
                   and e.get("tid") == call["tid"] and call["ts"] <= e["ts"] < end), key=lambda e: e["ts"])


def _memory(call: dict, ts: float, nbytes: int, total: int, addr: int) -> dict:
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": call["pid"], "tid": call["tid"], "ts": ts,
            "args": {"Device Type": 1, "Device Id": 0, "Bytes": nbytes, "Total Allocated": total,
                     "Total Reserved": 2 * 1024 * MIB, "Addr": addr}}


def on_h200(doc: dict) -> dict:
    """The run as if on an H200: its deviceProperties renamed, 141 GB (the same kernels at the same times)."""
    for props in doc["deviceProperties"]:
        props["name"], props["totalGlobalMem"] = "NVIDIA H200", 150_754_820_096
    return doc


def with_memory(run: str, dest: Path, annotation: str, plan: list[tuple], base: int, h200: bool = False) -> Path:
    """A copy of H100 run ``run`` with ``[memory]`` events: ``plan`` (see the module) in every call of
    ``annotation``, on the GPU, as ``--profile-memory`` writes them (``Total Allocated``, ``Addr``);
    ``h200``: on an H200 (:func:`on_h200`)."""
    doc = on_h200(_doc(run)) if h200 else _doc(run)
    doc["lesson"]["profile_memory"] = True
    calls = _calls(doc, annotation)
    first = min(e["ts"] for e in doc["traceEvents"] if e.get("ph") == "X" and "ProfilerStep#" in e.get("name", ""))
    level, added, addr = base, [_memory(calls[0], first - 50.0, base, base, 1)], 2
    for call in calls:
        ops, live = _ops_in(doc, call), {}
        for step in plan:
            sign, name, k = step[:3]
            if name is None:
                at = call["ts"] + call["dur"] + 0.5
            else:
                op = [o for o in ops if o["name"] == name][k]
                at = op["ts"] + min(0.2, op["dur"] / 20) if sign == "+" else op["ts"] + op["dur"] - 0.05
            if sign == "+":
                nbytes, key = step[3:]
                live[key], addr = (nbytes, addr), addr + 1
                level += nbytes
                added.append(_memory(call, at, nbytes, level, live[key][1]))
            else:
                nbytes, where = live.pop(step[3])
                level -= nbytes
                added.append(_memory(call, at, -nbytes, level, where))
    doc["traceEvents"] += added
    dest.write_text(json.dumps(doc))
    return dest


# the Part 3 lessons at the post's shape (8 x 16 heads x 1024 tokens x 64), as a CPU run of each lesson with
# --profile-memory allocates and frees inside one forward (the blocks of a few bytes left out)
SCORES = 8 * 16 * 1024 * 1024 * 2  # bf16 [8, 16, 1024, 1024]: 268,435,456 B
OUT = 8 * 16 * 1024 * 64 * 2  # bf16 [8, 16, 1024, 64]
NAIVE = [("+", "aten::bmm", 0, SCORES, "scores"), ("+", "aten::mul", 0, SCORES, "scaled"), ("-", "aten::mul", 0, "scores"),
         ("+", "aten::empty", 0, SCORES, "copy"), ("-", "aten::masked_fill", 0, "scaled"),
         ("+", "aten::_softmax", 0, SCORES, "attn"), ("+", "aten::bmm", 1, OUT, "out"),
         ("-", "aten::matmul", 1, "copy"), ("-", "aten::matmul", 1, "attn"), ("-", None, 0, "out")]
INPLACE = [("+", "aten::bmm", 0, SCORES, "scores"), ("+", "aten::mul", 0, SCORES, "scaled"), ("-", "aten::mul", 0, "scores"),
           ("+", "aten::_softmax", 0, SCORES, "attn"), ("+", "aten::bmm", 1, OUT, "out"),
           ("-", "aten::matmul", 1, "scaled"), ("-", "aten::matmul", 1, "attn"), ("-", None, 0, "out")]
# SDPA's math backend: q, k, v cast up to fp32, the fp32 scores (bmm) and their softmax, the guard's bool
# matrix, the attention weights cast back to bf16 (its second output), the fp32 output and its bf16 cast
MATH = [("+", "aten::empty_strided", 0, 2 * OUT, "q"), ("+", "aten::empty_strided", 1, 2 * OUT, "k"),
        ("+", "aten::empty_strided", 2, 2 * OUT, "v"), ("+", "aten::bmm", 0, 2 * SCORES, "scores"),
        ("+", "aten::_softmax", 0, 2 * SCORES, "attn"), ("+", "aten::isneginf", 0, SCORES // 2, "guard"),
        ("-", "aten::_safe_softmax", 0, "guard"), ("-", "aten::_safe_softmax", 0, "scores"),
        ("+", "aten::empty_strided", 3, SCORES, "weights"), ("+", "aten::bmm", 1, 2 * OUT, "out32"),
        ("+", "aten::empty_strided", 4, OUT, "out"), ("-", "aten::_to_copy", 4, "out32"), ("-", "aten::_to_copy", 4, "attn"),
        ("-", "aten::_to_copy", 4, "q"), ("-", "aten::_to_copy", 4, "k"), ("-", "aten::_to_copy", 4, "v"),
        ("-", None, 0, "weights"), ("-", None, 0, "out")]
BASE = 3 * OUT + MIB + 32 * MIB  # q, k, v, the mask, cuBLAS's workspace: live before the window


def with_shapes(run: str, dest: Path, annotation: str, plan: list[tuple]) -> Path:
    """A copy of H100 run ``run`` as ``--record-shapes`` writes it: in every call of ``annotation``, the
    ``k``-th op named ``op`` gets ``Input Dims``, ``Input type`` and ``Concrete Inputs`` (``plan``: (op, k,
    dims, types, concrete), ...)."""
    doc = _doc(run)
    doc["lesson"]["record_shapes"] = True
    for call in _calls(doc, annotation):
        ops = _ops_in(doc, call)
        for name, k, dims, types, concrete in plan:
            op = [o for o in ops if o["name"] == name][k]
            op.setdefault("args", {}).update({"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete})
    dest.write_text(json.dumps(doc))
    return dest


BF16 = "c10::BFloat16"
# 03_simple_mlp at the post's shape: gate and up [8192, 768] @ [768, 3072], down [8192, 3072] @ [3072, 768]
MLP_SHAPES = [("aten::mm", 0, [[8192, 768], [768, 3072]], [BF16] * 2, ["", ""]),
              ("aten::mm", 1, [[8192, 768], [768, 3072]], [BF16] * 2, ["", ""]),
              ("aten::mm", 2, [[8192, 3072], [3072, 768]], [BF16] * 2, ["", ""])]
# 04_c's SDPA (q, k, v [8, 16, 1024, 64], causal), the efficient backend's op beneath it, and that op's kernel
# launcher, which reads q, k, v as [batch, seq, heads, dim] (custom_mask_type 1: causal)
QKV = [[8, 16, 1024, 64]] * 3
SDPA_SHAPES = [("aten::scaled_dot_product_attention", 0, QKV + [[]] * 5, [BF16] * 3 + ["", "Double", "Bool", "", "Bool"],
                ["", "", "", "", "0.", "True", "", "False"]),
               ("aten::_scaled_dot_product_efficient_attention", 0, QKV + [[]] * 5,
                [BF16] * 3 + ["", "Bool", "Double", "Bool", ""], ["", "", "", "", "False", "0.", "True", ""]),
               ("aten::_efficient_attention_forward", 0, [[8, 1024, 16, 64]] * 3 + [[]] * 11,
                [BF16] * 3 + [""] * 5 + ["Double", "Int", "Bool", "", "", ""],
                ["", "", "", "", "", "", "", "", "0.", "1", "False", "", "", ""])]
