"""What one annotated call runs: the work of each call of an annotation (``attn_fwd``), in order.

"Guess first, then look" (Part 3) compares a guess with this. The work of a call is:

- **on a GPU**: the device events (kernels, memcpys, memsets) launched from inside the call, in
  the order they ran, each named by the op that launched it (the innermost op around its runtime
  call: ``aten::copy_`` for the masked_fill's Memcpy) and by its kind (a memset is a fill the
  library issues, as cuBLAS's 4-byte one before a Hopper GEMM, not a kernel);
- **on the CPU**: the ops that did the arithmetic, outermost only: ``aten::*`` ops that are not
  views or metadata (:data:`common.report.model.names.METADATA_OPS`) and Inductor's fused kernels, except
  the :data:`ROUTERS`, ops whose work is all in the ops they call (``aten::matmul`` -> ``aten::bmm``,
  ``aten::masked_fill`` -> ``aten::clone`` + ``aten::masked_fill_``); an op nested in another compute
  op is part of that op's work (``aten::mul``'s conversion of its scalar). These are the ops that
  launch the kernels on a GPU. The choice is by name, not by time, so a call's work reads the same
  at every size and on a busy machine.

Calls of one annotation usually run the same work; the *typical* call is the most common sequence,
and :attr:`CallWork.alike` says how many calls ran exactly it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from common.report.facts.cpu_work import is_compute_name
from common.report.model.build import ANNOTATION, KERNEL, MEMCPY, MEMSET, OP, Model
from common.report.facts.phases import calls_in_window, subtree_ends
from common.report.findings import Span

# ops that only call others (a GPU launches nothing of their own): the work is in their children
ROUTERS = frozenset({
    "aten::matmul", "aten::linear", "aten::softmax", "aten::log_softmax", "aten::_safe_softmax",
    "aten::masked_fill", "aten::clone", "aten::to", "aten::_to_copy", "aten::contiguous", "aten::reshape",
    "aten::flatten", "aten::einsum", "aten::dropout", "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_attention_math", "aten::type_as", "aten::repeat_interleave",
})
VIA_DEPTH = 3  # the enclosing ops an item names (innermost last), up to the annotation
DEVICE_KINDS = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}  # WorkItem.device_kind by the lane's kind


@dataclass(frozen=True)
class WorkItem:
    op: str  # the compute op (CPU) or the op that launched the device event (GPU); "" when none
    kernel: Optional[str]  # the device event's name (GPU); None on the CPU
    via: tuple  # the ops around ``op`` inside the call, outermost first (at most VIA_DEPTH)
    device_kind: Optional[str] = None  # "kernel" | "memcpy" | "memset" (GPU); None on the CPU
    bytes: Optional[float] = None  # what a memcpy or memset wrote (GPU, where the trace says)
    # where it ran in each call alike (Span, µs from the window's start: the op, and on a GPU the device event)
    spans: tuple = field(default=(), compare=False)

    @property
    def is_memset(self) -> bool:
        """A memset: a fill the launching op's library issues (cuBLAS zeroes a few bytes before a GEMM),
        not a piece of the call's arithmetic."""
        return self.device_kind == "memset"


@dataclass(frozen=True)
class CallWork:
    annotation: str
    calls: int  # calls of the annotation in the window
    on_device: bool  # the items are device events (GPU), else CPU compute ops
    typical: tuple  # WorkItem of the typical call, in order
    alike: int  # calls whose sequence is exactly the typical one
    mean_items: float  # work items per call, over every call

    def to_json(self) -> dict:
        return dict(annotation=self.annotation, calls=self.calls, on_device=self.on_device, alike=self.alike,
                    mean_items=self.mean_items,
                    typical=[item_json(i) for i in self.typical])


def item_json(item: WorkItem) -> dict:
    out = dict(op=item.op, kernel=item.kernel, via=list(item.via))
    if item.device_kind is not None:
        out.update(device_kind=item.device_kind, bytes=item.bytes)
    return out


def call_work(m: Model, annotation: Optional[str]) -> Optional[CallWork]:
    """The work of every call of ``annotation`` in the window (None when it has no call there)."""
    cpu, dev = m.cpu, m.dev
    calls = calls_in_window(m, annotation, ANNOTATION) if annotation else np.zeros(0, dtype=np.int64)
    if not calls.size:
        return None
    ends = subtree_ends(m, calls)
    if m.has_gpu:
        launched = np.flatnonzero(dev.launch >= 0)
        order = launched[np.argsort(dev.ts[launched], kind="stable")]
        sequences = [_device_items(m, order[(dev.launch[order] > a) & (dev.launch[order] < b)], a)
                     for a, b in zip(calls.tolist(), ends.tolist())]
    else:
        working = np.fromiter((is_compute_name(n) and n not in ROUTERS for n in m.names), dtype=bool,
                              count=len(m.names))
        outer = _outermost(m, (cpu.kind == OP) & working[cpu.name])
        sequences = [_cpu_items(m, a + 1 + np.flatnonzero(outer[a + 1:b]), a)
                     for a, b in zip(calls.tolist(), ends.tolist())]
    keys = [tuple((i.op, i.kernel) for i in s) for s in sequences]
    typical_key, alike = Counter(keys).most_common(1)[0]
    same = [s for s, key in zip(sequences, keys) if key == typical_key]
    typical = [replace(item, spans=tuple(span for s in same for span in s[k].spans)) for k, item in enumerate(same[0])]
    return CallWork(annotation, int(calls.size), bool(m.has_gpu), tuple(typical), int(alike),
                    float(np.mean([len(s) for s in sequences])))


def _outermost(m: Model, compute: np.ndarray) -> np.ndarray:
    """Compute ops with no compute op among their ancestors."""
    cpu = m.cpu
    under = np.zeros(cpu.n, dtype=bool)
    for level in range(1, int(cpu.depth.max(initial=0)) + 1):  # parents before children
        rows = np.flatnonzero((cpu.depth == level) & (cpu.parent >= 0))
        up = cpu.parent[rows]
        under[rows] = under[up] | compute[up]
    return compute & ~under


def _via(m: Model, i: int, call: int) -> tuple:
    """The ops around CPU event ``i`` up to (not including) the call, outermost first."""
    cpu, out = m.cpu, []
    j = int(cpu.parent[i])
    while j > call and j >= 0:
        if cpu.kind[j] == OP:
            out.append(m.names[cpu.name[j]])
        j = int(cpu.parent[j])
    return tuple(reversed(out[:VIA_DEPTH]))


def _span(lane, i: int) -> Span:
    return Span(float(lane.ts[i]), float(lane.dur[i]))


def _cpu_items(m: Model, rows: np.ndarray, call: int) -> list:
    return [WorkItem(m.names[m.cpu.name[i]], None, _via(m, i, call), spans=(_span(m.cpu, i),)) for i in rows.tolist()]


def _device_items(m: Model, rows: np.ndarray, call: int) -> list:
    dev, out = m.dev, []
    for j in rows.tolist():
        op = int(dev.op[j])
        named = op >= 0 and m.cpu.kind[op] == OP and op > call
        written = float(dev.bytes[j])
        out.append(WorkItem(m.names[m.cpu.name[op]] if named else "", m.names[dev.name[j]],
                            _via(m, op, call) if named else (), DEVICE_KINDS.get(int(dev.kind[j]), "kernel"),
                            written if np.isfinite(written) and dev.kind[j] != KERNEL else None,
                            ((_span(m.cpu, op),) if named else ()) + (_span(dev, j),)))
    return out
