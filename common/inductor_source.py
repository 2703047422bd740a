"""From a compiled kernel to its code: Inductor's compiled modules of a run, copied beside its trace.

torch.compile's Inductor writes each graph it compiles as a Python module in its cache (the TorchInductor
GPU profiling guide's "Compiled module path"): the generated kernels' code (C++ inline on the CPU, Triton
on a GPU), the calls to library kernels (``extern_kernels.mm``) and a ``__main__`` that runs the graph alone
(``python <module>.py -p``: its ops timed in a table). Inductor's cache is a temporary folder, so a lesson
run with ``--compile`` copies the modules its process loaded beside the trace, named like it
(``<trace>.graph0.py``, ``.graph1.py``, ... in the order they were loaded), with the table and the trace
(:meth:`common.lesson.Lesson.writing`: all or none). Where a Triton kernel's own file can run alone (compiled
with ``TORCHINDUCTOR_BENCHMARK_KERNEL=1``, its source then holds a benchmark ``__main__``), it is copied too:
``<trace>.graph0.kernel<N>.py`` for its module's N-th kernel.

:func:`parse_module` reads a module's text into what the report needs, per kernel: the name the profiler
records, where its code starts and where the graph calls it, and the ATen ops the module's comment says it
came from (on the CPU Inductor writes no such comment: the report reads them from the kernel's name). The
report reads the copies beside a trace with :func:`read_copies`. Nothing here imports torch at import time;
:func:`loaded_modules` asks Inductor's code cache of this process (which the lesson's run filled).
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

MAX_MODULE_BYTES = 64 << 20  # a compiled module this big is not read (an LLM's is a few MB)
_DEFINITION = re.compile(r"^(\w+) = async_compile\.(\w+)\(")
_KERNEL_PATH = re.compile(r"^# kernel path: (\S+)")
_ORIGINAL_ATEN = re.compile(r"Original ATen: \[?([^\]\n]*)\]?")
_RECORDED = re.compile(r'RAIIAtenRecordFunctionHandle \w+\("([^"]+)"')  # the C++ kernel's profiler record
_TRITON_DEF = re.compile(r"^def (\w+)\(", re.M)
_MAX_AUTOTUNE = re.compile(r"'max_autotune': (True|False)")
_PROVENANCE = re.compile(r"# \[Provenance debug handles\] ([\w.]+):(\d+)")
_EXTERN = re.compile(r"^\s+(extern_kernels\.\w+)\(")
_BENCHMARK_MAIN = re.compile(r"^if __name__ == ['\"]__main__['\"]:", re.M)


@dataclass(frozen=True)
class Kernel:
    """One kernel Inductor generated, as its compiled module holds it."""

    name: str  # the module's name for it: cpp_fused_gelu_mul_0, triton_poi_fused_gelu_mul_0
    recorded_as: str  # the name a profiler trace gives it: graph_0_cpp_fused_gelu_mul_0; a Triton kernel's own
    kind: str  # how Inductor builds it (async_compile's method): triton, cpp_pybinding, ...
    line: int  # where its definition (the code that follows) starts, 1-based
    call_lines: tuple  # the lines of the graph's call() that launch it
    ops: tuple  # the ATen ops the module's comment says it came from ("Original ATen"), without "aten."
    kernel_path: Optional[str]  # a Triton kernel's own file in Inductor's cache (the "# kernel path:" comment)
    runnable_alone: bool  # its source holds a benchmark __main__ (compiled with TORCHINDUCTOR_BENCHMARK_KERNEL=1)
    max_autotune: Optional[bool]  # the 'max_autotune' its source's inductor_meta holds (read when it runs)
    provenance: Optional[int]  # Inductor's provenance debug handle (INDUCTOR_PROVENANCE=1), where the module has one


@dataclass(frozen=True)
class ExternCall:
    """A library kernel the graph calls (``extern_kernels.addmm``): Inductor generated no code for it (the
    comment above such a call may name the ops of the kernels before it too: it is not read)."""

    name: str
    line: int


@dataclass(frozen=True)
class CompiledModule:
    path: str  # the file read (a copy beside the trace)
    kernels: tuple  # Kernel, in the module's order
    externs: tuple  # ExternCall, in the module's order
    kernel_files: tuple = ()  # (kernel name, the copy of its own file beside the trace), where one was copied


def parse_module(text: str, path: str = "") -> CompiledModule:
    """What a compiled module holds: its generated kernels and its calls to library kernels."""
    lines = text.splitlines()
    found = []  # (name, kind, line index, comment lines above, source text)
    i = 0
    while i < len(lines):
        m = _DEFINITION.match(lines[i])
        if not m:
            i += 1
            continue
        end = _end_of_source(lines, i)
        found.append((m[1], m[2], i, _comments_above(lines, i), "\n".join(lines[i:end + 1])))
        i = end + 1
    names = {name for name, *_ in found}
    calls: dict = {name: [] for name in names}
    handles: dict = {}
    externs = []
    for n, line in enumerate(lines):  # string tests first: a big graph's module has tens of thousands of lines
        if not line.startswith((" ", "\t")):
            continue
        if "Provenance debug handles" in line:
            handle = _PROVENANCE.search(line)
            if handle:
                handles.setdefault(handle[1], int(handle[2]))
            continue
        head = line.lstrip().split("(", 1)[0]
        if head.removesuffix(".run") in names:
            calls[head.removesuffix(".run")].append(n + 1)
        elif head.startswith("extern_kernels."):
            extern = _EXTERN.match(line)
            if extern:
                externs.append(ExternCall(extern[1], n + 1))
    kernels = tuple(_kernel(name, kind, at, comments, source, tuple(calls[name]), handles.get(name))
                    for name, kind, at, comments, source in found)
    return CompiledModule(str(path), kernels, tuple(externs))


def _end_of_source(lines: list, start: int) -> int:
    """The last line of a definition: its source string's closing line (``''', device_str='cuda')``)."""
    if "'''" not in lines[start]:
        return start
    for j in range(start + 1, len(lines)):
        if lines[j].startswith("'''"):
            return j
    return start


def _comments_above(lines: list, at: int) -> list:
    """The comment lines right above line index ``at`` (a blank line ends them)."""
    out = []
    j = at - 1
    while j >= 0 and lines[j].lstrip().startswith("#"):
        out.append(lines[j].strip())
        j -= 1
    return out[::-1]


def _ops(comments: list) -> tuple:
    """The ops of an ``Original ATen: [aten._unsafe_view, aten.gelu]`` comment: ``("_unsafe_view", "gelu")``."""
    for line in comments:
        m = _ORIGINAL_ATEN.search(line)
        if m:
            return tuple(dict.fromkeys(op.strip().removeprefix("aten.") for op in m[1].split(",") if op.strip()))
    return ()


def _kernel(name: str, kind: str, at: int, comments: list, source: str, calls: tuple,
            handle: Optional[int]) -> Kernel:
    recorded = _RECORDED.search(source)
    triton = _TRITON_DEF.search(source) if kind == "triton" else None
    path = next((m[1] for m in map(_KERNEL_PATH.match, comments) if m), None)
    autotune = _MAX_AUTOTUNE.search(source)
    return Kernel(name=name, recorded_as=recorded[1] if recorded else triton[1] if triton else name, kind=kind,
                  line=at + 1, call_lines=calls, ops=_ops(comments), kernel_path=path,
                  runnable_alone=bool(_BENCHMARK_MAIN.search(source)),
                  max_autotune=autotune[1] == "True" if autotune else None, provenance=handle)


# ----------------------------------------------------------------------------- the copies beside a trace


def trace_stem(trace: Path) -> str:
    """The trace's name without ``.json`` or ``.json.gz``: what its copies are named after."""
    name = Path(trace).name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def module_copy(trace: Path, index: int) -> Path:
    """Where the ``index``-th compiled module of the run that wrote ``trace`` is copied: ``<trace>.graph0.py``."""
    return Path(trace).with_name(f"{trace_stem(trace)}.graph{index}.py")


def kernel_copy(trace: Path, index: int, kernel: int) -> Path:
    """Where the file of the ``kernel``-th kernel of the ``index``-th module (a Triton kernel's own file, runnable
    alone) is copied: ``<trace>.graph0.kernel2.py`` (by number: a kernel's name can be longer than a file's)."""
    return Path(trace).with_name(f"{trace_stem(trace)}.graph{index}.kernel{kernel}.py")


def _copies(trace: Path) -> list:
    """(module index, kernel number or -1 for the module itself, path) of every copy beside ``trace``, in order."""
    trace = Path(trace)
    pattern = re.compile(re.escape(trace_stem(trace)) + r"\.graph(\d+)(?:\.kernel(\d+))?\.py")
    try:
        entries = list(os.scandir(trace.parent))
    except OSError:
        return []
    found = []
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m and entry.is_file():
            found.append((int(m[1]), int(m[2]) if m[2] else -1, Path(entry.path)))
    return sorted(found)


def copies_beside(trace: Path, *, kernels: bool = False) -> list:
    """The copies of compiled modules beside ``trace``, in the order of their index; with ``kernels``, the
    kernels' files copied beside them too."""
    return [path for _, number, path in _copies(trace) if kernels or number < 0]


def read_copies(trace: Path) -> tuple:
    """The compiled modules copied beside ``trace`` (:class:`CompiledModule`, with the kernel files copied beside
    each); an unreadable or oversized copy is skipped."""
    found = _copies(trace)
    out = []
    for index, number, path in found:
        if number >= 0:
            continue
        try:
            if path.stat().st_size > MAX_MODULE_BYTES:
                continue
            module = parse_module(path.read_text(errors="replace"), str(path))
        except OSError:
            continue
        files = tuple((module.kernels[n].name, str(p)) for i, n, p in found
                      if i == index and 0 <= n < len(module.kernels))
        out.append(dataclasses.replace(module, kernel_files=files))
    return tuple(out)


# ----------------------------------------------------------------------------- the lesson's side


def loaded_modules() -> list:
    """The compiled modules (graphs) this process loaded, in the order Inductor loaded them: the modules of
    Inductor's code cache (``PyCodeCache``) that run alone (``benchmark_compiled_module``), not the kernels'
    own files. Empty where Inductor is not loaded or compiled nothing."""
    codecache = sys.modules.get("torch._inductor.codecache")
    if codecache is None:
        return []
    seen, out = set(), []
    for module in list(getattr(codecache.PyCodeCache, "modules", ())):
        file = getattr(module, "__file__", None)
        if file and file not in seen and hasattr(module, "benchmark_compiled_module") and os.path.isfile(file):
            seen.add(file)
            out.append(Path(file))
    return out


def copy_plan(trace: Path, modules: list) -> list:
    """(bytes, destination) of every copy the run writes beside ``trace``: each compiled module, and each Triton
    kernel file that runs alone and is still in Inductor's cache. A file that cannot be read is left out."""
    plan = []
    for index, source in enumerate(modules):
        try:
            data = Path(source).read_bytes()
        except OSError:
            continue
        plan.append((data, module_copy(trace, index)))
        for number, kernel in enumerate(parse_module(data.decode(errors="replace")).kernels):
            if kernel.runnable_alone and kernel.kernel_path:
                try:
                    plan.append((Path(kernel.kernel_path).read_bytes(), kernel_copy(trace, index, number)))
                except OSError:
                    continue
    return plan


def stale_copies(trace: Path, written: set) -> list:
    """The copies beside ``trace`` that this run did not write (an earlier run of the same name had more
    graphs or kernel files): to remove, so that what lies beside the trace is this run's."""
    return [path for path in copies_beside(trace, kernels=True) if path not in written]
