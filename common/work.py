"""Guess, then look: what one call of the workload does, counted by PyTorch before the profiler starts.

:func:`count` runs ``step()`` once on fake tensors (torch's ``FakeTensorMode``: every op sees the shapes
and dtypes and runs no kernel, so no input changes and nothing warms up: a cold run stays cold), under a
dispatch mode that writes down each aten op that does work (views aside):

- its name as the trace spells it (``aten::mm``), its inputs' shapes and its dtype;
- its FLOPs, by torch's own formulas (``torch.utils.flop_counter``: GEMMs, convolutions, every SDPA
  backend); ops without a formula count 0;
- the bytes it must at least read (each input tensor once) and write (each output once): what a kernel
  that keeps everything else on chip moves;
- the innermost ``record_function`` it ran under (the lesson's annotation: ``mlp_fwd``, ``decode``).

The step runs in its own grad mode, so a training step's backward and optimizer step are counted too
(``forward``, ``backward``, ``optimizer_step``). Nothing real changes: each parameter's ``.grad`` and each
optimizer's state are put back as they were (a fake gradient or a fake Adam moment left on a real
parameter would break the next real step).

An ``F.scaled_dot_product_attention`` call is also one row of its own (``aten::scaled_dot_product_attention``,
as the trace names it), seen before a backend splits it into aten ops (a torch function mode): its batch,
heads, query and key lengths, head size and causal flag, and torch's count of its FLOPs. FlopCounterMode
counts attention in full (``4·B·H·S²·D``) whether or not it is causal: the row keeps torch's figure and
the flag, and the report halves a causal one (docs/report.md). The aten ops its backend ran (a fused
kernel's op, or the math backend's ``bmm``) are marked ``within`` it, so the call counts once.

Identical calls (same annotation, op, shapes, dtype) are one row with their number of calls. A
compiled workload is counted eager (``torch.compiler.set_stance("force_eager")``): the ops Inductor
then fuses are the ones counted, and the description says so. Where the workload cannot run on fake
tensors (a branch on a tensor's value, ``.item()``), the description says why and holds no ops.

torch is imported by the functions: the lessons import this module before torch.
"""

from __future__ import annotations

import contextlib
from common.amounts import fmt_bytes_decimal, fmt_flops
from typing import Any, Callable


def count(step: Callable[[], object], *, compiled: bool, stand_in: str | None = None) -> dict:
    """One call of ``step()`` counted on fake tensors: the trace's ``work`` description (plain JSON).
    ``stand_in`` says what ``step`` runs instead of the workload, where that cannot run on fake tensors
    (a Triton or Hub kernel: the same operation by plain PyTorch), for the description's ``how``."""
    from torch._subclasses.fake_tensor import FakeTensorMode  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    how = ", ".join(filter(None, ("fake tensors", "eager" if compiled else None, stand_in)))
    counter = _Counter()
    try:
        with _kept_state(counter), _eager(compiled), FakeTensorMode(allow_non_fake_inputs=True), counter:
            step()
    except Exception as exc:  # the workload needs real values: say why, count nothing
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip(": ")
        return {"how": how, "ops": [], "error": reason[:300]}
    return {"how": how, "ops": counter.rows()}


@contextlib.contextmanager
def _kept_state(counter: "_Counter"):
    """Every real parameter's ``.grad`` and every stepped optimizer's state as they were before the count.
    A fake step's backward sets a real leaf's ``.grad`` to a fake tensor, and an optimizer's first step
    fills its state with fake ones; in-place updates of real tensors only touch fake copies."""
    from torch.optim.optimizer import register_optimizer_step_pre_hook  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    optimizers: dict[int, tuple] = {}

    def remember(opt, args, kwargs):
        if id(opt) not in optimizers:
            optimizers[id(opt)] = (opt, {p: dict(state) for p, state in opt.state.items()})

    hook = register_optimizer_step_pre_hook(remember)
    try:
        yield
    finally:
        hook.remove()
        for leaf, grad in counter.leaves.values():
            leaf.grad = grad
        for opt, state in optimizers.values():
            opt.state.clear()
            opt.state.update(state)


def _eager(compiled: bool) -> contextlib.AbstractContextManager:
    """torch.compile'd code run as plain eager code, where torch can (2.6 and later)."""
    import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    stance = getattr(torch.compiler, "set_stance", None)
    return stance("force_eager") if compiled and stance is not None else contextlib.nullcontext()


def _tensors(tree: Any) -> list:
    import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it
    from torch.utils._pytree import tree_leaves  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    seen, out = set(), []
    for leaf in tree_leaves(tree):
        if isinstance(leaf, torch.Tensor) and id(leaf) not in seen:
            seen.add(id(leaf))
            out.append(leaf)
    return out


def _aliases(outputs: list, inputs: list) -> bool:
    """Every output shares an input's storage."""
    held = {t.untyped_storage()._cdata for t in inputs}
    return all(t.untyped_storage()._cdata in held for t in outputs)


def _nbytes(t) -> int:
    return int(t.numel()) * t.element_size()


_DTYPE_NAMES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64"}


def dtype_name(dtype) -> str:
    """``torch.bfloat16`` -> ``bf16`` (the lessons' spelling); other dtypes keep torch's name."""
    name = str(dtype).removeprefix("torch.")
    return _DTYPE_NAMES.get(name, name)


class _Counter:
    """Two modes, made when entered: a torch function mode that sees each SDPA call whole, and a dispatch
    mode that writes down every aten op that does work (and follows ``record_function``)."""

    def __init__(self):
        self.annotations: list[str] = []
        self.table: dict[tuple, dict] = {}
        self.within: list[str] = []  # the operation (SDPA) whose aten ops are being dispatched
        self.leaves: dict[int, tuple] = {}  # id -> (a real tensor that takes gradients, its .grad when first seen)
        self._modes: list = []

    def __enter__(self):
        import torch.nn.functional as F  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it
        from torch.overrides import TorchFunctionMode  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it
        from torch.utils._python_dispatch import TorchDispatchMode  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

        counter = self

        class Ops(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                counter.see(func, args, kwargs or {}, out)
                return out

        class Operations(TorchFunctionMode):
            """``F.scaled_dot_product_attention`` as one operation, before a backend splits it into aten ops;
            and each real parameter a function is given, to put its ``.grad`` back after the count."""

            def __torch_function__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                counter.keep_leaves(_tensors((args, kwargs)))  # above autograd: the parameters themselves
                if func is not F.scaled_dot_product_attention:
                    return func(*args, **kwargs)
                counter.within.append("aten::scaled_dot_product_attention")
                try:
                    out = func(*args, **kwargs)
                finally:
                    counter.within.pop()
                counter.attention(args, kwargs, out)
                return out

        self._modes = [Operations(), Ops()]
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc):
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
        return False

    def attention(self, args: tuple, kwargs: dict, out) -> None:
        """One SDPA call: a row of its own, its shape, causal flag and torch's full count of its FLOPs."""
        from torch.utils.flop_counter import sdpa_flop_count  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

        bound = dict(zip(("query", "key", "value", "attn_mask", "dropout_p", "is_causal"), args), **kwargs)
        q, k, v = bound["query"], bound["key"], bound["value"]
        if q.dim() != 4 or k.dim() != 4:
            return
        batch, heads, seq_q, head_dim = (int(n) for n in q.shape)  # SDPA's layout: [batch, heads, seq, head_dim]
        shape = dict(batch=batch, heads=heads, seq_q=seq_q, seq_kv=int(k.shape[2]), head_dim=head_dim,
                     causal=bool(bound.get("is_causal", False)))
        self.add("aten::scaled_dot_product_attention", [q, k, v], _tensors(out),
                 int(sdpa_flop_count(q.shape, k.shape, v.shape)), attention=shape)

    def add(self, op: str, inputs: list, outputs: list, flops: int, **extra) -> None:
        shapes = tuple(tuple(int(n) for n in t.shape) for t in inputs)
        dtype = dtype_name((outputs or inputs)[0].dtype)
        key = (self.annotations[-1] if self.annotations else None, op, shapes, dtype, tuple(self.within))
        row = self.table.get(key)
        if row is None:
            row = self.table[key] = dict(annotation=key[0], op=op, shapes=[list(s) for s in shapes], dtype=dtype,
                                         calls=0, flops=flops, read=sum(_nbytes(t) for t in inputs),
                                         written=sum(_nbytes(t) for t in outputs), **extra)
            if self.within:
                row["within"] = self.within[-1]
        row["calls"] += 1

    def see(self, func, args: tuple, kwargs: dict, out) -> None:
        namespace = func.namespace
        if namespace == "profiler":
            name = func._schema.name
            if name.endswith("_record_function_enter_new") and args and isinstance(args[0], str):
                self.annotations.append(args[0])
            elif name.endswith("_record_function_exit") and self.annotations:
                self.annotations.pop()
            return
        if namespace != "aten" or func.is_view:
            return
        inputs, outputs = _tensors((args, kwargs)), _tensors(out)
        if not outputs or (not func._schema.is_mutable and _aliases(outputs, inputs)):
            return  # a view by another name (aten::_unsafe_view): no work
        self.add(f"aten::{func._schema.name.split('::')[-1]}", inputs, outputs, _flops(func, args, kwargs, out))

    def keep_leaves(self, inputs: list) -> None:
        """Note each real parameter (a leaf that takes gradients) with its ``.grad`` before this step's backward."""
        from torch._subclasses.fake_tensor import FakeTensor  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

        for t in inputs:
            if t.requires_grad and t.is_leaf and id(t) not in self.leaves and not isinstance(t, FakeTensor):
                self.leaves[id(t)] = (t, t.grad)

    def rows(self) -> list[dict]:
        return list(self.table.values())


def _flops(func, args: tuple, kwargs: dict, out) -> int:
    """torch's own formula for the op (what FlopCounterMode counts), 0 where it has none."""
    from torch.utils.flop_counter import flop_registry  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    formula = flop_registry.get(func._overloadpacket)
    if formula is None:
        return 0
    try:
        return int(formula(*args, **kwargs, out_val=out))
    except Exception:  # a formula that does not take this overload's arguments: not counted
        return 0


# ----------------------------------------------------------------------------- reading a description (no torch)


def row_flops(row: dict) -> int:
    """One call's FLOPs by the report's convention: torch's count, a causal attention's halved (the
    unmasked half of its two [seq, seq] GEMMs, as FlashAttention's benchmarks count it)."""
    flops = int(row.get("flops") or 0)
    return flops // 2 if (row.get("attention") or {}).get("causal") else flops


def call_flops(work: dict | None) -> int | None:
    """Every counted FLOP of one call of the workload (GEMMs, convolutions, attention), one count per
    operation: an SDPA call counts as itself (causal: halved), not as the aten ops its backend ran
    (``within`` it); None where the description is missing or counted nothing."""
    if not isinstance(work, dict) or not isinstance(work.get("ops"), list):
        return None
    total = sum(row_flops(r) * int(r.get("calls") or 0) for r in work["ops"]
                if isinstance(r, dict) and not r.get("within"))
    return total or None


def describe_work(work: dict) -> str:
    """The console's line about the count (markup-free)."""
    if work.get("error"):
        return (f"work    not counted: one call of step() could not run on fake tensors ({work['error']}); "
                "the report reads the trace alone")
    rows = [r for r in work["ops"] if isinstance(r, dict)]
    calls = sum(int(r.get("calls") or 0) for r in rows)
    flops = call_flops(work) or 0
    moved = sum((int(r.get("read") or 0) + int(r.get("written") or 0)) * int(r.get("calls") or 0) for r in rows)
    ops = f"{calls} aten op{'' if calls == 1 else 's'}"
    return (f"work    one call of step(): {ops}, {fmt_flops(flops)}, {fmt_bytes_decimal(moved, figures=3)} "
            f"read and written at least (counted on {work['how']}, before profiling; the report reads it)")
