"""What every numbered script needs besides its lesson: device, dtype, paths, console, files.

A script parses its flags once (:mod:`common.flags`), builds its workload's numbers from them, and
calls :func:`setup` with plain values; setup validates everything before a byte is allocated or
written and returns a :class:`Lesson`, which never changes after. Around the profiler block, which
stays in the script with its export (``prof.key_averages().table``, ``prof.export_chrome_trace``), the
lesson does two things: :meth:`Lesson.warm_up` (before it) and :meth:`Lesson.label` (once, right after
``with torch.profiler.profile(...) as prof:``); :meth:`Lesson.writing` makes the two files appear together,
and :meth:`Lesson.finish` prints the last words.

Importing this module does not import torch (it takes seconds); torch is imported here only by what
needs it (:func:`setup`'s device checks, :class:`Lesson`'s methods).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import logging
import os
import platform
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from rich.console import Console
from rich.markup import escape

from common import cpu, inductor_source, machine, output
from common import report  # the facade: each name loads its stages when first called (after the run)
from common.checks import positive_float, positive_int  # noqa: F401 - the lessons' flags use them
from common.commands import display_path, uv_run
from common.device import TORCH_DTYPES, check_compiler, check_dtype, check_fits, gpu_dtype, resolve_device
from common.errors import fail, run_command
from common.flags import WARMUP_CALLS, Schedule, add_mlp_shape_flags, parser, sized_for  # noqa: F401 - the lessons use them
from common.knobs import METADATA_KEY, RunKnobs
from common.work import call_flops, count, describe_work
from common.progress import Progress
from common.paths import Variant, annotated_file, html_file, make_tag, mode_label, table_file, trace_file
from common.amounts import fmt_bytes_decimal

# Kineto prints its own stage and USDT log lines to stderr; silence them (set before torch is imported).
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

if TYPE_CHECKING:
    import torch

    from common.guess import Guess

# How far a compiled (or hand-tuned) output may stray from eager, relative to the output's scale.
TOLERANCE = {"bf16": 3e-2, "fp16": 5e-3, "fp32": 1e-3}


@dataclass(frozen=True)
class Lesson:
    """The validated run: flags, device, dtype, file names, console, the knobs the trace carries.
    Made by :func:`setup`; nothing in it changes while the script runs."""

    args: argparse.Namespace
    device: "torch.device"
    dtype: "torch.dtype"
    tag: str
    table_path: Path
    trace_path: Path
    console: Console
    knobs: RunKnobs
    progress: Progress  # the status line over the warm-up and the profiled steps

    def warm_up(self, step: Callable[[], object], compiling: str = "compiling") -> None:
        """With --warmup: ``step()`` :data:`~common.flags.WARMUP_CALLS` times, un-profiled, then a device
        sync, under a spinner; the first calls' one-time costs (compilation, cuBLAS heuristics) are paid
        here. The count is the knobs' ``warmup_calls``, the number the trace's metadata says."""
        if not self.args.warmup:
            return
        with self.progress.warming(self.knobs.warmup_calls, compiling if self.args.compile else "") as called:
            for _ in range(self.knobs.warmup_calls):
                step()
                self.sync()
                called()

    def counted(self, step: Callable[[], object], *, stand_in: str | None = None) -> "Lesson":
        """Guess, then look: the lesson with what one call of ``step()`` runs in its knobs (``work``: each
        aten op, its shapes, FLOPs and bytes; :mod:`common.work`), counted on fake tensors before the
        profiler starts: no kernel runs, so a cold run stays cold. The report reads the workload from it,
        whatever the script is called; the FLOPs per step are the count's, never typed in by hand. The
        machine probe is timed here too, the last thing before the profiler (``probe``; :mod:`common.machine`).
        ``stand_in``: what ``step`` runs in place of a kernel that fake tensors cannot run (said in the count)."""
        work = count(step, compiled=self.args.compile, stand_in=stand_in)
        knobs = dataclasses.replace(self.knobs, work=work, matmul_flops_per_step=call_flops(work),
                                    probe=machine.measure())
        self.console.print(escape(describe_work(work)))
        return dataclasses.replace(self, knobs=knobs)

    def label(self, prof: "torch.profiler.profile") -> None:
        """Write the run's knobs into the trace's metadata (top-level ``"lesson"``), so the report knows
        what this run already did. Call it once, right after the profiler starts: the profiler keeps
        metadata only while it records, so torch adds it at the start of every recorded cycle
        (``preset_metadata_json``), and here at once when the schedule records from its first step. It also
        has ``prof.step`` counted, for the status line :meth:`profiling` draws."""
        import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

        value = self.knobs.to_json()
        prof.step = self.progress.watch(prof.step)  # each step the lesson ends moves the status line on
        prof.preset_metadata_json(METADATA_KEY, value)
        recording = (torch.profiler.ProfilerAction.RECORD, torch.profiler.ProfilerAction.RECORD_AND_SAVE)
        if prof.current_action in recording:  # wait=0, warmup=0: this cycle started before the preset
            prof.add_metadata_json(METADATA_KEY, value)

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def activities(self) -> "list[torch.profiler.ProfilerActivity]":
        import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

        acts = [torch.profiler.ProfilerActivity.CPU]
        if self.on_cuda:
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        return acts

    @property
    def sort_by(self) -> str:
        return "cuda_time_total" if self.on_cuda else "cpu_time_total"

    def profiling(self) -> contextlib.AbstractContextManager:
        """A status line over the profiled steps: which step, how long one took, about how long is left
        (the steps counted by :meth:`label`'s watch on ``prof.step``; :mod:`common.progress`)."""
        return self.progress.profiling(compiling=self.args.compile and not self.args.warmup)

    def sync(self) -> None:
        """Wait for the device to finish queued work (a no-op on the CPU)."""
        if self.on_cuda:
            import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

            torch.cuda.synchronize(self.device)

    def busy(self, what: str, when: bool = True) -> contextlib.AbstractContextManager:
        """A spinner while something slow runs (warm-up, compilation); nothing when ``when`` is False."""
        return self.console.status(what, spinner="dots") if when else contextlib.nullcontext()

    @property
    def outputs(self) -> list[Path]:
        """Every file this run writes: the table, the trace, and with --html, --annotate the page and the copy."""
        folder, a = self.trace_path.parent, self.args
        return [self.table_path, self.trace_path, *([html_file(folder, self.tag)] if a.html else []),
                *([annotated_file(folder, self.tag, a.gzip)] if a.annotate else [])]

    @contextlib.contextmanager
    def writing(self) -> Iterator[tuple[Path, Path]]:
        """Synchronise the device, then give temporary (table, trace) paths (``prof.export_chrome_trace``
        writes the trace's); both are renamed into place only if the block succeeds and wrote both
        (:func:`common.output.writing`: the trace folder is created here, and removed again if the write fails).
        The machine probe is timed again here, the profiler stopped, and written into the trace (``probe``'s
        ``after``; :func:`common.machine.write_after`): the two bracket the profiled steps.
        A compiled run also copies Inductor's compiled modules of this process beside the trace, in the same
        set (:mod:`common.inductor_source`), and removes the copies an earlier run of the same name left."""
        self.sync()
        after = machine.measure()["us"] if self.knobs.probe else None  # the probe again: the profiler stopped
        copies = inductor_source.copy_plan(self.trace_path, inductor_source.loaded_modules()) \
            if self.args.compile else []
        what = "the table, the trace and the compiled modules" if copies else "the table and the trace"
        with output.writing([self.table_path, self.trace_path, *(dest for _, dest in copies)], what=what,
                            make_folders=True) as (table_tmp, trace_tmp, *copy_tmps):
            for (data, _), tmp in zip(copies, copy_tmps):
                tmp.write_bytes(data)
            yield table_tmp, trace_tmp
            if after is not None and trace_tmp.exists():
                machine.write_after(trace_tmp, self.knobs.probe, after)
        if self.args.compile:
            for stale in inductor_source.stale_copies(self.trace_path, {dest for _, dest in copies}):
                with contextlib.suppress(OSError):
                    stale.unlink()

    def check_close(self, got: "torch.Tensor", want: "torch.Tensor", what: str) -> bool:
        """Say whether ``got`` matches ``want`` within the dtype's tolerance (relative to ``want``'s scale)."""
        diff = (got.float() - want.float()).abs().max().item()
        scale = max(want.float().abs().max().item(), 1e-12)
        dtype = self.knobs.dtype
        ok = diff <= TOLERANCE[dtype] * scale
        verdict = "[green]match[/]" if ok else "[bold red]DO NOT match[/]"
        self.console.print(
            f"{what}: the outputs {verdict}: the largest difference, {diff:.3g}, is {100 * diff / scale:.2g}% of "
            f"the largest output value ({scale:.3g}); {dtype} allows {100 * TOLERANCE[dtype]:g}%"
        )
        return ok

    @property
    def speaks(self) -> bool:
        """Whether this process prints the lesson's last words (a multi-process lesson: rank 0 only)."""
        return True

    def finish(self, table: str) -> int:
        """What was written, the table's totals, how to open the trace, the short report, the upload."""
        if not self.speaks:
            return 0
        self.say_written(table)
        self.say_how_to_open()
        self.report()
        if self.args.share:
            from common.share import share  # lazy: 7 ms a run, only with --share

            return share(self.trace_path.parent, self.args.share, console=self.console)
        return 0

    def say_written(self, table: str) -> None:
        c = self.console
        c.print(f"[bold]wrote[/] {escape(display_path(self.table_path))}")
        c.print(f"[bold]wrote[/] {escape(display_path(self.trace_path))}  "
                f"({fmt_bytes_decimal(self.trace_path.stat().st_size)})")
        for copy in inductor_source.copies_beside(self.trace_path) if self.args.compile else ():
            c.print(f"[bold]wrote[/] {escape(display_path(copy))}  (Inductor's compiled module, from its cache: "
                    "the generated kernels' code; the report points into it)")
        self.say_totals(table)

    def say_totals(self, table: str, who: str = "") -> None:
        """The table's total lines and the steps the trace holds."""
        for line in table.splitlines():
            if line.startswith("Self ") and "time total" in line:
                self.console.print(f"  {who}{line}")
        first, last = self.args.schedule.recorded[0], self.args.schedule.recorded[-1]
        self.console.print(f"  {'each' if who else 'the'} trace holds ProfilerStep#{first}..#{last}")

    def say_how_to_open(self) -> None:
        c = self.console
        c.print("open it in Perfetto, offline (the UI is served from this machine; --online for ui.perfetto.dev):")
        c.print(f"  [cyan]{escape(uv_run('-m', 'common.view', self.trace_path))}[/]", soft_wrap=True)
        c.print("share a link (trace-util):")
        c.print(f"  [cyan]{escape(uv_run('-m', 'common.share', self.trace_path.parent, '-b', 'BUCKET'))}[/]",
                soft_wrap=True)

    def report(self) -> None:
        """The short report (unless --no-report), the HTML page (--html), the annotated trace (--annotate)."""
        a = self.args
        if a.no_report and not a.html and not a.annotate:
            return
        if not a.no_report:
            self.console.rule("what the trace says")
        report.lesson_report(self.trace_path, self.console, short=not a.no_report,  # one line if it cannot read it
                             html=html_file(self.trace_path.parent, self.tag) if a.html else None,
                             annotated=annotated_file(self.trace_path.parent, self.tag, a.gzip) if a.annotate else None)


def setup(
    args: argparse.Namespace,
    *,
    shape: Sequence[int],
    elements: int,
    needs_cuda: str | None = None,
    variants: Sequence[Variant] = (),
    guess: "Guess | None" = None,
    check: "Callable[[torch.device], None] | None" = None,
) -> Lesson:
    """Validate the parsed flags against this machine, then describe the run on the console.

    ``shape`` gives the numbers of the file name; ``elements`` estimates how many tensor elements
    the run holds at once, so absurd sizes are refused before anything is allocated.
    ``needs_cuda``, for a GPU-only lesson, says why and what to run instead when there is no CUDA.
    ``variants`` gives the lesson's own knobs that change the trace (``[("attn", "eager")]``), for
    the file name and the trace's metadata; leave out a knob at its default value.
    ``guess`` is what the post expects one annotated call to run (:mod:`common.guess`): the report
    prints it against what ran, mismatches first.
    ``check(device)`` refuses flags the device cannot run (``fail``), before anything is printed.
    ``args`` is read, never changed: the dtype chosen is the lesson's knobs' (``lesson.knobs.dtype``).
    """
    console = Console(highlight=False)
    if args.share:
        from common.share import check_can_share  # lazy: 7 ms a run, only with --share

        check_can_share(args.share)  # the login and trace-util now, not after the run
    import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it (the script has imported it by now)

    if needs_cuda and (args.device == "cpu" or not torch.cuda.is_available()):
        fail(f"{args.script}.py needs CUDA ({'--device cpu was given' if args.device == 'cpu' else 'none found'}): "
             f"{needs_cuda}")
    device = resolve_device(args.device, console)
    if check is not None:
        check(device)
    cpu_choice = None
    if device.type == "cpu":
        dtype_name, cpu_choice = cpu.choose(args.dtype, args.threads)
    else:
        if args.threads:
            torch.set_num_threads(args.threads)
        dtype_name = args.dtype or gpu_dtype(device, console)
    check_dtype(dtype_name, device)
    dtype = getattr(torch, TORCH_DTYPES[dtype_name])
    check_fits(elements, dtype, device)
    if args.compile and device.type == "cpu":
        check_compiler()
        # Name Inductor's fused C++ kernels in the trace (graph_0_cpp_fused_...), as Triton's are on GPUs.
        import torch._inductor.config as inductor_config  # lazy: torch, 3.7 s: not before --help and bad flags

        inductor_config.cpp.enable_kernel_profile = True
    trace_dir = args.trace_dir if args.trace_dir is not None else Path("traces") / args.script
    output.check_folder(trace_dir)  # created when the files are written: a run that fails leaves no folder

    own = list(variants)
    mode = mode_label(args.compile, args.compile_mode)
    tag = make_tag(shape, dtype_name, args.warmup, mode, _profiler_variants(args, device) + own)
    knobs = RunKnobs(
        script=args.script, tag=tag, shape=tuple(shape), dtype=dtype_name, device=device.type,
        warmup=args.warmup, warmup_calls=WARMUP_CALLS if args.warmup else 0, compile=args.compile,
        compile_mode=args.compile_mode,
        schedule=args.schedule,
        record_shapes=args.record_shapes, profile_memory=args.profile_memory, with_stack=args.with_stack,
        variants={k: v for k, v in own},
        guess=guess.to_json() if guess is not None else None,
        cpu=cpu.to_knobs(cpu_choice) if cpu_choice else None,
    )
    lesson = Lesson(args, device, dtype, tag, table_file(trace_dir, tag), trace_file(trace_dir, tag, args.gzip),
                    console, knobs, Progress(console, args.schedule.steps))
    output.check_targets([(None, path) for path in lesson.outputs])  # each a regular file or new, no two alike
    _quiet_what_the_lesson_explains(args)
    _describe(lesson, cpu_choice)
    return lesson


def _profiler_variants(args: argparse.Namespace, device: "torch.device") -> list[Variant]:
    """The common knobs that change the trace, as file-name variants (none for the posts' defaults)."""
    out: list[Variant] = []
    if args.schedule != Schedule():
        out.append(("sched", args.schedule.variant))
    out += [(knob, "") for knob, flag in (("shapes", "record_shapes"), ("mem", "profile_memory"),
                                           ("stack", "with_stack")) if getattr(args, flag)]
    import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    if device.type == "cpu" and torch.cuda.is_available():
        out.append(("cpu", ""))  # the default run on this machine is on the GPU: keep both
    return out


def _quiet_what_the_lesson_explains(args: argparse.Namespace) -> None:
    """Silence the warnings a lesson causes on purpose; the console explains them instead."""
    if args.schedule.warmup == 0:
        # the posts' wait=0, warmup=0 experiment: the first recorded step pays the profiler's start-up
        warnings.filterwarnings("ignore", message="Profiler won't be using warmup")
    if args.schedule.repeat == 1:
        # torch 2.11 warns that the profiler "clears events at the end of each cycle" every time it starts
        # (pytorch#180348; later torch warns only when a second cycle clears the first): one cycle clears nothing
        warnings.filterwarnings("ignore", message="Warning: Profiler clears events at the end of each cycle",
                                category=UserWarning, module=r"torch\.profiler\.profiler")
    # torch.compile on a machine with a CUDA toolkit but no GPU: the console already says "running on the CPU"
    logging.getLogger("torch.utils.cpp_extension").addFilter(
        lambda record: not record.getMessage().startswith("No CUDA runtime is found"))


def _describe(lesson: Lesson, cpu_choice: "cpu.CpuChoice | None") -> None:
    import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    a, c = lesson.args, lesson.console
    if lesson.on_cuda:
        where = f"{torch.cuda.get_device_name(lesson.device)} (CUDA {torch.version.cuda})"
    else:
        n = torch.get_num_threads()
        where = f"CPU {platform.machine()} ({n} thread{'s' if n != 1 else ''})"
    c.rule(f"[bold]{a.script}[/]")
    c.print(f"device  {where}   torch {torch.__version__}")
    c.print(f"run     {lesson.tag}   schedule {a.schedule} ({a.schedule.steps} steps)   "
            f"warm-up {'on' if a.warmup else 'off'}")
    if cpu_choice is not None:
        for line in cpu.describe(cpu_choice, lesson.knobs.dtype):
            c.print(escape(line))
    c.print(_first_step_line(a))
    extras = [n for n in ("record_shapes", "profile_memory", "with_stack") if getattr(a, n)]
    if extras:
        c.print(f"profiler also records: {', '.join(extras)} (more CPU overhead in the trace)")


def _first_step_line(a: argparse.Namespace) -> str:
    """What the first recorded step will hold (P1.6, P1.7 as the runs show them): the profiler starting
    often makes it wider (the report says whether it did); it holds the workload's cold start only when nothing ran the workload before it."""
    s = a.schedule
    skipped = s.wait + s.warmup
    if skipped:
        before = f"the schedule ran the workload {skipped}x unrecorded" + (" after the warm-up" if a.warmup else "")
        return (f"first recorded step #{skipped}: {before}, so it holds no cold start; the profiler makes it "
                f"often wider, warm-up or not (--no-warmup --schedule 0,0,{s.active} records the first call)")
    if a.warmup:
        return ("first recorded step #0: the warm-up ran the workload before the profiler, so it holds the "
                "profiler's own start-up (schedule warmup=0; torch warns about it, silenced here), no cold start")
    return ("first recorded step #0 is the workload's first call: its cold start, and the profiler's own start-up "
            "(schedule warmup=0; torch warns about it, silenced here)")


def lesson_main(main: Callable[..., int | None]) -> Callable[..., int]:
    """Run a lesson's ``main(args)`` with :func:`common.errors.run_command`: bad input or out-of-memory
    is one line on stderr and exit status 2, a Ctrl-C one line and 130, the files being written removed."""

    def out_of_memory(exc: BaseException) -> str | None:
        where = _out_of_memory(exc) if isinstance(exc, RuntimeError) else None  # torch.OutOfMemoryError is one
        return None if where is None else f"out of {where}memory for these shapes; use smaller sizes"

    def wrapper(*args, **kwargs) -> int:
        return run_command(functools.partial(main, *args, **kwargs), last=True, translate=out_of_memory)

    return wrapper


def _out_of_memory(exc: RuntimeError) -> str | None:
    """"device " for torch's out-of-device-memory error, "" for the CPU allocator's, None otherwise."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, torch.OutOfMemoryError):
        return "device "
    text = str(exc)
    return "" if "not enough memory" in text or "can't allocate memory" in text.lower() else None
