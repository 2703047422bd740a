"""From a compiled kernel to its code: the TorchInductor GPU profiling guide's workflow."""

from __future__ import annotations

import shlex
from pathlib import Path

from common.commands import display_path, uv_run
from common.report.facts.generated_code import CodeRow
from common.report.facts.tables import Tables
from common.report.findings import Finding
from common.report.units import fmt_us, rounded

TOP = 3  # the costliest generated kernels the finding names
WORTH = 1.0  # % of the steps' wall time: a kernel under it is counted with the others, not named (the guide's cut)
MOST_OPS = 8  # the ops named per kernel (an LLM's kernels list twenty)
LONG_NAME = 72  # a kernel name longer than this is shortened in the message (whole in the evidence)
AUTOTUNE_ON = "s/'max_autotune': False/'max_autotune': True/"  # the edit that asks a kernel's file for max-autotune


def generated_code(t: Tables):
    """The TorchInductor profiling guide's workflow (``docs/compiled-kernels.md``): Inductor's generated kernels,
    costliest first (those under 1% of the wall time counted together), each with its share of the steps' wall time
    (on a GPU also of the device's kernel time) and the guide's bound (a kernel at s% made 2x faster saves at most
    s/2% of a step; nothing where the host sets the pace, which it says), the ops it came from (the module's comment
    on a GPU, its name on the CPU, an op whose own kernel still runs said apart), and its code: the compiled module
    a lesson copied beside the trace (``<trace>.graph0.py``), the line where the kernel's code starts and the line
    the graph calls it at; the commands that run the module alone (``-p``) and, on a GPU, the kernel's own file
    alone and with max-autotune. Where Inductor generated no kernel (``extern_kernels.addmm`` only), says so and
    points at the module; without a copy, says how to find it.

    ``-p`` times the module's ops in a table; the bound is what speeding the kernel up can give at most."""
    rows, modules = t.generated_code.rows, t.generated_code.modules
    if not rows and not modules:
        return None
    if rows:
        message = _kernels_line(rows, bool(modules), t.generated_code.pace)
    elif t.generated_code.defined:
        defined = t.generated_code.defined
        message = (f"the compiled module{_s(modules)} beside the trace define{'' if len(modules) > 1 else 's'} "
                   f"{defined} generated kernel{'s' if defined != 1 else ''}, none of which the trace records (a C++ "
                   "kernel is recorded only with Inductor's cpp.enable_kernel_profile, which the lessons switch on)")
    else:
        calls = ", ".join(f"{c.name} at {_at(path, c.line)}" for path, c in t.generated_code.externs[:4]) or "nothing"
        message = (f"Inductor generated no kernel of its own here: the compiled graph calls library kernels only "
                   f"({calls}); the graph's code: {', '.join(map(_shown, modules))}")
    commands = _commands(rows, modules, t.generated_code.threads)
    return Finding("generated_code", message, "; ".join(text for text, _ in commands),
                   dict(kernels=[_evidence(r) for r in rows[:20]], modules=list(map(str, modules)),
                        library_calls=[dict(name=c.name, module=str(path), line=c.line)
                                       for path, c in t.generated_code.externs],
                        commands=[command for _, command in commands if command]))


def _kernels_line(rows: tuple, copies: bool, pace) -> str:
    """The kernels worth a look (WORTH or more of the steps' wall time, the costliest TOP) one by one, the others
    together: the guide's first cut, a kernel at 0.1 % can give at most 0.1 %."""
    named = [r for r in rows[:TOP] if r.wall_pct >= WORTH]
    rest = rows[len(named):]
    parts = [_row_text(r, copies) for r in named]
    if len(rest) == 1:
        (only,) = rest
        code = f" (code: {_where(only)})" if copies else ""
        parts.append(f"{'one more' if named else 'one'}, {_short(only.name)}, takes {_pct(only.wall_pct)}{code}: under "
                     f"{WORTH:g}%, at most that much to gain")
    elif rest:
        largest = rest[0]
        head = f"{len(rest)} more" if named else f"{len(rest)} generated kernels"
        code = f" (code: {_where(largest)})" if copies else ""
        parts.append(f"{head} take {_pct(sum(r.wall_pct for r in rest))} together, the largest {_short(largest.name)} "
                     f"{_pct(largest.wall_pct)}{code}: under {WORTH:g}% each, at most that much to gain from any")
    text = "; ".join(parts)
    if not copies:
        text += "; their code: no copy of the compiled module beside the trace"
    pace = ("; the host sets the pace of these steps (the GPU idles most of each): a faster kernel leaves them as "
            "long until the host dispatches less") if pace == "overhead" else ""
    return f"Inductor's generated kernels by their share of the steps' wall time (the most a step can gain): {text}{pace}"


def _row_text(r: CodeRow, copies: bool) -> str:
    ops = "+".join(r.ops[:MOST_OPS]) + (f"+{len(r.ops) - MOST_OPS} more" if len(r.ops) > MOST_OPS else "")
    fuses = f", fuses {ops}" + (" (the module's comment)" if r.ops_from == "module" else "") if r.ops else ""
    listed = f"; {', '.join(r.listed)} listed too, run by their own kernels" if r.listed else ""
    device = f"{_pct(r.device_pct)} of the device time, " if r.device_pct is not None else ""
    per = f"{fmt_us(r.per_call_us)} per call ({'median' if r.lane == 'device' else 'mean'})"
    replayed = ", replayed by CUDA graphs" if r.replayed else ""
    code = f"; code: {_where(r)}" if copies else ""
    return (f"{_short(r.name)} ({r.what}{fuses}{listed}): {device}{_pct(r.wall_pct)} of the steps' wall time ({per}, "
            f"{r.calls}x{replayed}), so 2x faster saves at most {_pct(r.wall_pct / 2)} of a step{code}")


def _where(r: CodeRow) -> str:
    if not r.where:
        return "not in the compiled modules beside the trace"
    parts = []
    for path, line, call in r.where[:2]:
        called = f", {'launched' if r.lane == 'device' else 'called'} at line {call}" if call else ""
        parts.append(f"{_at(path, line)}{called}")
    return "; ".join(parts) + (f" (+{len(r.where) - 2} more modules)" if len(r.where) > 2 else "")


def _commands(rows: tuple, modules: tuple, threads) -> list:
    """(words, command) pairs for the hint: the module alone, and on a GPU the kernel alone and with max-autotune."""
    out = []
    top = rows[0] if rows else None
    module = top.where[0][0] if top is not None and top.where else (modules[0] if modules else None)
    if module is None:
        out.append((_no_copy_words(top), ""))
        return out
    threads = f"OMP_NUM_THREADS={threads} " if threads else ""
    command = threads + uv_run(Path(module), "-p")
    out.append((f"run the compiled graph alone, on random inputs of the trace's shapes (its ops and kernels timed "
                f"in a table, by category on a GPU; a Chrome trace in $TMPDIR/compiled_module_profile.json, /tmp by "
                f"default, which two runs at once overwrite): {command}", command))
    if top is None or top.lane != "device":
        return out
    if top.kernel_file:
        alone = uv_run(Path(top.kernel_file))
        out.append((f"{_short(top.name)} alone, its time and bandwidth: {alone}", alone))
        if top.max_autotune is False:
            edit = max_autotune_command(top.kernel_file)
            out.append(("with max-autotune (the file holds 'max_autotune': False in its inductor_meta, which torch "
                        f"reads when it runs, not TORCHINDUCTOR_MAX_AUTOTUNE): {edit}", edit))
    else:
        out.append(("the one kernel alone needs its own file compiled with TORCHINDUCTOR_BENCHMARK_KERNEL=1 (it then "
                    "holds a benchmark __main__): rerun with that set, and a lesson copies each kernel's file beside "
                    "its trace", ""))
    return out


def max_autotune_command(kernel_file: str) -> str:
    """The edit that asks a Triton kernel's own file for max-autotune, into a file beside it, then its run."""
    tuned = Path(kernel_file).with_suffix(".max_autotune.py")
    return (f'sed "{AUTOTUNE_ON}" {shlex.quote(display_path(kernel_file))} > {shlex.quote(display_path(tuned))} && '
            f"{uv_run(tuned)}")


def _no_copy_words(top) -> str:
    gpu = top is not None and top.lane == "device"
    return ("to find the code: a lesson run with --compile copies its compiled module beside its trace "
            "(<trace>.graph0.py); elsewhere TORCH_LOGS=output_code prints the module's path in Inductor's cache"
            + (", and TORCHINDUCTOR_BENCHMARK_KERNEL=1 prints it ('Compiled module path: ...') and makes each "
               "kernel's own file run alone" if gpu else "") + "; then `python <module> -p` runs the graph alone, its "
            "kernels timed in a table")


def _evidence(r: CodeRow) -> dict:
    return dict(name=r.name, lane=r.lane, calls=r.calls, time_us=rounded(r.time_us),
                per_call_us=rounded(r.per_call_us), per_step_us=rounded(r.per_step_us),
                device_pct=rounded(r.device_pct, 2), wall_pct=rounded(r.wall_pct, 2),
                twice_as_fast_saves_pct=rounded(r.wall_pct / 2, 2), ops=list(r.ops), ops_from=r.ops_from,
                listed_not_fused=list(r.listed),
                code=[dict(module=str(path), line=line, call_line=call) for path, line, call in r.where],
                kernel_file=str(r.kernel_file) if r.kernel_file else None, runnable_alone=r.runnable_alone,
                max_autotune=r.max_autotune, provenance_handle=r.provenance, replayed=r.replayed)


def _pct(x: float) -> str:
    """``18.7%``, ``0.04%``, ``<0.01%``: a small share is not said as 0.0 %."""
    return f"{x:.1f}%" if x >= 0.1 or x == 0 else f"{x:.2f}%" if x >= 0.01 else "<0.01%"


def _short(name: str) -> str:
    return name if len(name) <= LONG_NAME else f"{name[:44]}…{name[-24:]}"


def _at(path: str, line: int) -> str:
    return f"{_shown(path)} line {line}"


def _shown(path: str) -> str:
    return display_path(path)


def _s(items) -> str:
    return "s" if len(items) != 1 else ""
