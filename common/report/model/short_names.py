"""Kernel names cut to a readable length, and what an ATen elementwise or reduce kernel computes: the
functor (or lambda) its template carries.

PyTorch runs most pointwise ops through a handful of kernel templates (``vectorized_elementwise_kernel``,
``elementwise_kernel``, ``unrolled_elementwise_kernel``, ``reduce_kernel``), so their names differ only
inside the template's arguments: gelu and mul are both ``vectorized_elementwise_kernel<…>``. The functor
(``GeluCUDAKernelImpl``, ``AUnaryFunctor<BFloat16, MulFunctor<float>>``, ``FillFunctor<bool>``) or the
function whose lambda it is (``masked_fill_kernel(BFloat16, bool)``) says which op ran. :func:`functor_of`
reads it off a name; :func:`short_name` leads with it. Names only, one call per name.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional

_SCOPES = re.compile(r"(?:\(anonymous namespace\)::|[A-Za-z_]\w*::)+")  # at::native::, c10::, binary_internal::...
_LAMBDA = re.compile(r"::\{lambda\(([^()]*)\)#\d+\}$")  # the innermost lambda of a path, with its parameters
_PLUMBING = re.compile(r"^(?:std::array|\w*OffsetCalculator|at::native::memory::\w+|\d+u?l*$|true$|false$|"
                       r"unsigned int$)")
_FUNCTOR = re.compile(r"Functor|functor|Impl$|\(")  # what a reader is shown: a functor, or a lambda's function


def _split(args: str) -> list:
    """Top-level comma-separated arguments of a template or call (``<``, ``(``, ``{`` nest)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(args):
        if ch in "<({":
            depth += 1
        elif ch in ">)}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(args[start:i].strip())
            start = i + 1
    out.append(args[start:].strip())
    return [a for a in out if a]


def _path(s: str) -> list:
    """The ``::``-separated parts of a qualified name, outside brackets."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(s):
        ch = s[i]
        depth += 1 if ch in "<({" else -1 if ch in ">)}" else 0
        if depth == 0 and s.startswith("::", i):
            out.append(s[start:i])
            start = i = i + 2
            continue
        i += 1
    return out + [s[start:]]


def _close(s: str, at: int) -> int:
    """Index of the bracket closing the one at ``at``."""
    depth = 0
    for i in range(at, len(s)):
        if s[i] in "<({":
            depth += 1
        elif s[i] in ">)}":
            depth -= 1
            if depth == 0:
                return i
    return len(s)


def _unscoped(s: str) -> str:
    return _SCOPES.sub("", s).replace(" const", "").replace("&", "").strip()


def _simplify(arg: str) -> Optional[str]:
    """One template argument as a reader wants it: a functor with its types, a lambda as the function it
    lives in with its parameters; None for plumbing (vector widths, offset calculators, arrays)."""
    arg = arg.replace("(anonymous namespace)::", "").strip()
    if _PLUMBING.match(arg):
        return None
    lam = _LAMBDA.search(arg)
    if lam:  # f(args)::{lambda()#1}::operator()() const::{lambda(float)#1}: f, unless f is a wrapper template
        function = next((p for p in _path(arg) if "(" in p and not p.startswith(("{", "operator"))), "")
        call, template = function.find("("), function.find("<")
        if 0 <= template < call:  # gpu_kernel_impl_nocast<F>(...)::{lambda(int)#1}: the wrapper's F
            call = function.find("(", _close(function, template))
            inner = _simplify_template(function[:call])
            if inner and _FUNCTOR.search(inner):
                return inner
        params = ", ".join(_unscoped(p) for p in _split(lam.group(1)))
        return f"{_unscoped(function[:call] if call >= 0 else function).split('<')[0]}({params})"
    return _simplify_template(arg) if "<" in arg else _unscoped(arg)


def _simplify_template(arg: str) -> Optional[str]:
    """``Name<args>``: a wrapper with one functor inside is that functor; a functor keeps its distinct args."""
    at = arg.find("<")
    name = _unscoped(arg[:at])
    args = _split(arg[at + 1:_close(arg, at)])
    parts = []
    for a in args:
        s = _simplify(a)
        if s and s not in parts:
            parts.append(s)
    functors = [p for p in parts if _FUNCTOR.search(p)]
    if "Functor" not in name and len(functors) == 1:
        return functors[0]  # gpu_kernel_impl_nocast<F>, ReduceOp<T, func_wrapper_t<T, F>>: F
    return f"{name}<{', '.join(parts)}>" if parts else name


@lru_cache(maxsize=None)
def functor_of(name: str) -> Optional[tuple]:
    """(the kernel template's name, the functor it runs) for a templated kernel that carries a functor or
    lambda; None for other names.

    ``void at::native::vectorized_elementwise_kernel<8, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16,
    c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, ...)`` ->
    (``vectorized_elementwise_kernel``, ``AUnaryFunctor<BFloat16, MulFunctor<float>>``).
    """
    s = name[5:] if name.startswith("void ") else name
    at = s.find("<")
    if at < 0:
        return None
    kernel = _unscoped(s[:at])
    if not kernel or "(" in kernel or " " in kernel:
        return None
    for arg in _split(s[at + 1:_close(s, at)]):
        simple = _simplify(arg)
        if simple and _FUNCTOR.search(simple) and not simple.startswith("("):
            return kernel, simple
    return None


def _fold_arguments(s: str) -> str:
    """``f(int, float*)`` -> ``f()``: the final argument list only (``(anonymous namespace)::`` stays)."""
    if not s.endswith(")"):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(s[i], 0)
        if depth == 0:
            return s[:i] + "()"
    return s


def short_name(name: str, width: int = 80) -> str:
    """A kernel name cut to a readable length: an ATen elementwise/reduce kernel as its functor first
    (``AUnaryFunctor<BFloat16, MulFunctor<float>> · vectorized_elementwise_kernel``: gelu and mul differ
    only there), other templates folded; then truncated."""
    s = name
    if s.startswith("void "):
        s = s[5:]
    carried = functor_of(name) if len(s) > width else None
    if carried:
        s = f"{carried[1]} · {carried[0]}"
    elif len(s) > width:
        # fold template arguments: at::native::vectorized_elementwise_kernel<4, ...>(...)
        depth, out = 0, []
        for ch in s:
            if ch == "<":
                if depth == 0:
                    out.append("<")
                depth += 1
                continue
            if ch == ">":
                depth -= 1
                if depth == 0:
                    out.append("…>")
                continue
            if depth == 0:
                out.append(ch)
        s = _fold_arguments("".join(out))
    if len(s) > width:
        s = s[: width - 1] + "…"
    return s
