"""What every numbered script needs besides its lesson: flags, device, dtype, paths, console.

A script builds its parser with :func:`parser`, adds its own shape flags, then calls
:func:`setup`, which validates everything before a byte is allocated or written and returns a
:class:`Lesson`. The profiler loop itself stays in the script.

Importing this module does not import torch (it takes seconds): a script parses its flags
(``cli.parse_args()``) before its own ``import torch``, so ``--help``, an unknown flag or a bad
value (``--size 0``, ``--dtype int8``, ``--schedule 1,1``) answer at once. torch is imported
here only by what needs it (:func:`setup`'s device checks, :class:`Lesson`'s methods).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import re
import shutil
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from rich.console import Console
from rich.markup import escape

from common import cpu, output
from common.checks import positive_float, positive_int, thread_count  # noqa: F401 - the lessons' flags use them
from common.commands import display_path, uv_run
from common.errors import BadInput, CommandParser, fail, run_command
from common.knobs import METADATA_KEY, RunKnobs, ScheduleKnobs
from common.paths import (COMPILE_MODES, DTYPES, Variant, annotated_file, html_file, make_tag, mode_label, table_file,
                          trace_file)

# Kineto prints its own stage and USDT log lines to stderr; silence them (set before torch is imported).
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

if TYPE_CHECKING:
    import torch

    from common.guess import Guess

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}  # --dtype -> the torch dtype's name
# How far a compiled (or hand-tuned) output may stray from eager, relative to the output's scale.
TOLERANCE = {"bf16": 3e-2, "fp16": 5e-3, "fp32": 1e-3}
WARMUP_CALLS = 3  # un-profiled calls before profiling with --warmup (as in the posts)
MEMORY_HEADROOM = 0.8  # refuse a run whose tensors would take more than this share of free memory


class _Parser(CommandParser):
    """A parser that accepts ``--in_dim`` and ``--in-dim`` alike (and fails in one line), and takes a
    value that starts with a minus and a digit (``--schedule -1,1,3``, ``--size -3``) as a value,
    so the flag's own check answers, not "expected one argument". Under torchrun, only local rank 0
    says anything (--help, a usage error): the other ranks exit with it, quietly."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\d[\d.,]*$")

    def parse_args(self, *args, **kwargs):
        if os.environ.get("LOCAL_RANK", "0") == "0":
            return super().parse_args(*args, **kwargs)
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return super().parse_args(*args, **kwargs)

    def add_argument(self, *names, **kwargs):
        spellings = list(names)
        for name in names:
            if name.startswith("--"):
                for other in (name.replace("_", "-"), name.replace("-", "_").replace("__", "--", 1)):
                    if other not in spellings:
                        spellings.append(other)
        return super().add_argument(*spellings, **kwargs)


def trace_folder(text: str) -> Path:
    """--trace_dir: a folder the run can create or fill, checked before torch is imported (nothing is
    created until the files are written)."""
    try:
        output.check_folder(Path(text))
    except BadInput as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return Path(text)


@dataclass(frozen=True)
class Schedule(ScheduleKnobs):
    """torch.profiler.schedule's four numbers (the posts' 1,1,3,1 by default), with what follows from them."""

    @property
    def steps(self) -> int:
        """Exactly the steps the schedule needs: (wait + warmup + active) * repeat."""
        return (self.wait + self.warmup + self.active) * self.repeat

    @property
    def recorded(self) -> range:
        """The ProfilerStep numbers the exported trace holds (the last cycle's active steps)."""
        first = self.steps - self.active
        return range(first, self.steps)

    def __str__(self) -> str:
        return f"wait={self.wait}, warmup={self.warmup}, active={self.active}, repeat={self.repeat}"

    @property
    def variant(self) -> str:
        """The file-name variant (``0-0-20``; ``1-1-3-2`` when repeating)."""
        parts = [self.wait, self.warmup, self.active] + ([self.repeat] if self.repeat != 1 else [])
        return "-".join(map(str, parts))


def parse_schedule(text: str) -> Schedule:
    parts = text.split(",")
    if len(parts) not in (3, 4):
        raise argparse.ArgumentTypeError(f"{text!r} is not WAIT,WARMUP,ACTIVE[,REPEAT]")
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not WAIT,WARMUP,ACTIVE[,REPEAT] in whole numbers") from None
    schedule = Schedule(*numbers)
    if schedule.wait < 0 or schedule.warmup < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: WAIT and WARMUP must be 0 or more")
    if schedule.active < 1 or schedule.repeat < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: ACTIVE and REPEAT must be 1 or more")
    if schedule.steps > 10_000:
        raise argparse.ArgumentTypeError(f"{text!r} asks for {schedule.steps} steps; keep it under 10000")
    return schedule


def parser(script: str, doc: str | None, *, warmup_default: bool) -> argparse.ArgumentParser:
    """The flags every lesson shares; the script adds its shape flags to the returned parser."""
    p = _Parser(prog=f"uv run {script}.py", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(script=script)
    p.add_argument("--dtype", choices=list(DTYPES), default=None,
                   help="element type (default: bf16; on a CPU without bf16 matmul instructions, fp32)")
    p.add_argument("--threads", type=thread_count, default=None,
                   help="intra-op threads (default on the CPU: 1, for steady timings on a shared machine)")
    p.add_argument(
        "--warmup", action=argparse.BooleanOptionalAction, default=warmup_default,
        help=f"run {WARMUP_CALLS} un-profiled calls and synchronise before profiling "
        f"(default: {'on' if warmup_default else 'off'})",
    )
    p.add_argument("--compile", action="store_true", help="wrap the workload in torch.compile")
    p.add_argument("--compile-mode", choices=COMPILE_MODES, default="default", help="torch.compile mode")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                   help="auto: CUDA when available, else the CPU (default: auto)")
    p.add_argument("--schedule", type=parse_schedule, default=Schedule(), metavar="WAIT,WARMUP,ACTIVE[,REPEAT]",
                   help="torch.profiler.schedule (default: 1,1,3,1)")
    p.add_argument("--row-limit", type=positive_int, default=15, help="rows in the profiler table (default: 15)")
    p.add_argument("--record-shapes", action="store_true", help="record input shapes (adds CPU overhead)")
    p.add_argument("--profile-memory", action="store_true", help="record allocations (adds CPU overhead)")
    p.add_argument("--with-stack", action="store_true", help="record Python stacks (adds CPU overhead)")
    p.add_argument("--gzip", action="store_true", help="write the trace as .json.gz")
    p.add_argument("--trace_dir", type=trace_folder, default=None, help=f"output folder (default: traces/{script})")
    p.add_argument("--no-report", action="store_true", help="skip the short trace report at the end")
    p.add_argument("--html", action="store_true", help="also write the report as a page of plots: <tag>.html")
    p.add_argument("--annotate", action="store_true",
                   help="also write a copy of the trace with the findings drawn on a track: <tag>.annotated.json")
    p.add_argument("--share", metavar="BUCKET", default=None,
                   help="upload the trace folder with trace-util to this Hugging Face bucket")
    return p


@dataclass
class Lesson:
    """The validated run: device, dtype, file names, console. Created by :func:`setup`."""

    args: argparse.Namespace
    device: "torch.device"
    dtype: "torch.dtype"
    tag: str
    table_path: Path
    trace_path: Path
    console: Console
    knobs: RunKnobs
    _labelled: bool = field(default=False, repr=False)

    def label(self, prof: "torch.profiler.profile") -> None:
        """Write the run's knobs into the trace's metadata (top-level ``"lesson"``), so the report
        knows what this run already did. Call it at the top of every profiled iteration: the
        profiler keeps metadata only while it records, so it is written once per recorded cycle."""
        import torch

        action = prof.current_action
        recording = action in (torch.profiler.ProfilerAction.WARMUP, torch.profiler.ProfilerAction.RECORD,
                               torch.profiler.ProfilerAction.RECORD_AND_SAVE)
        if recording and not self._labelled:
            prof.add_metadata_json(METADATA_KEY, self.knobs.to_json())
        # a new cycle starts after RECORD_AND_SAVE: label it again
        self._labelled = recording and action != torch.profiler.ProfilerAction.RECORD_AND_SAVE

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def activities(self) -> "list[torch.profiler.ProfilerActivity]":
        import torch

        acts = [torch.profiler.ProfilerActivity.CPU]
        if self.on_cuda:
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        return acts

    @property
    def sort_by(self) -> str:
        return "cuda_time_total" if self.on_cuda else "cpu_time_total"

    def sync(self) -> None:
        """Wait for the device to finish queued work (a no-op on the CPU)."""
        if self.on_cuda:
            import torch

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
        """Temporary (table, trace) paths (``prof.export_chrome_trace`` writes the trace's); both are
        renamed into place only if the block succeeds and wrote both (:func:`common.output.writing`:
        the trace folder is created here, and removed again if the write fails)."""
        with output.writing([self.table_path, self.trace_path], what="the table and the trace",
                            make_folders=True) as (table_tmp, trace_tmp):
            yield table_tmp, trace_tmp

    def check_close(self, got: "torch.Tensor", want: "torch.Tensor", what: str) -> bool:
        """Say whether ``got`` matches ``want`` within the dtype's tolerance (relative to ``want``'s scale)."""
        diff = (got.float() - want.float()).abs().max().item()
        scale = max(want.float().abs().max().item(), 1e-12)
        ok = diff <= TOLERANCE[self.args.dtype] * scale
        verdict = "[green]match[/]" if ok else "[bold red]DO NOT match[/]"
        self.console.print(
            f"{what}: the outputs {verdict}: the largest difference, {diff:.3g}, is {100 * diff / scale:.2g}% of "
            f"the largest output value ({scale:.3g}); {self.args.dtype} allows {100 * TOLERANCE[self.args.dtype]:g}%"
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
            from common.share import share

            return share(self.trace_path.parent, self.args.share, console=self.console)
        return 0

    def say_written(self, table: str) -> None:
        c = self.console
        c.print(f"[bold]wrote[/] {escape(display_path(self.table_path))}")
        c.print(f"[bold]wrote[/] {escape(display_path(self.trace_path))}  "
                f"({self.trace_path.stat().st_size / 1e6:.2f} MB)")
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
        from common.report import lesson_report  # prints one line if it cannot read the trace

        if not a.no_report:
            self.console.rule("what the trace says")
        lesson_report(self.trace_path, self.console, short=not a.no_report,
                      html=html_file(self.trace_path.parent, self.tag) if a.html else None,
                      annotated=annotated_file(self.trace_path.parent, self.tag, a.gzip) if a.annotate else None)


def _resolve_device(choice: str, console: Console) -> "torch.device":
    import torch

    if choice == "cuda" and not torch.cuda.is_available():
        fail("--device cuda, but CUDA is not available on this machine (use --device cpu or auto)")
    if choice == "auto" and not torch.cuda.is_available():
        console.print("[yellow]CUDA is not available: running on the CPU[/] (no GPU lane in the trace; "
                      "see the README, 'Without a GPU')")
        return torch.device("cpu")
    return torch.device("cuda" if choice in ("auto", "cuda") else "cpu")


def _check_dtype(name: str, device: "torch.device") -> None:
    import torch

    if device.type == "cuda" and name == "bf16" and not torch.cuda.is_bf16_supported():
        fail(f"this GPU ({torch.cuda.get_device_name(device)}) does not support bf16; use --dtype fp16 or fp32")


def free_bytes(device: "torch.device") -> int:
    """Memory the run may use now: free GPU memory, or the kernel's MemAvailable."""
    if device.type == "cuda":
        import torch

        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def _check_fits(elements: int, dtype: "torch.dtype", device: "torch.device") -> None:
    need = elements * dtype.itemsize
    have = free_bytes(device)
    if need > MEMORY_HEADROOM * have:
        fail(f"these shapes need about {_gib(need)} GiB on {device.type}, but only "
             f"{have / 2**30:.1f} GiB is free; use smaller sizes")


def _gib(size: int) -> str:
    """Bytes in GiB for a message, whatever their number (``--size 10**160`` has no float)."""
    gib = size >> 30
    return f"{size / 2**30:.1f}" if gib < 10**15 else f"10^{len(str(gib)) - 1}"


def _check_compiler() -> None:
    """Inductor on the CPU builds C++: make sure a compiler is there before compiling."""
    from torch._inductor import cpp_builder

    what = "--compile on the CPU needs a C++ compiler"
    todo = "Install g++ (e.g. apt-get install g++) or set CXX, or run without --compile"
    try:
        compiler = cpp_builder.get_cpp_compiler()
    except Exception as exc:  # Inductor raises its own error types here
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        fail(f"{what}, and none was found ({reason}). {todo}")
    if not shutil.which(compiler):
        fail(f"{what}, and {compiler!r} was not found. {todo}")



def setup(
    p: argparse.ArgumentParser,
    *,
    shape: Callable[[argparse.Namespace], Sequence[int]],
    elements: Callable[[argparse.Namespace], int],
    needs_cuda: str | None = None,
    variants: Callable[[argparse.Namespace], Sequence[Variant]] | None = None,
    matmul_flops: Callable[[argparse.Namespace], int] | None = None,
    guess: "Guess | Callable[[argparse.Namespace], Guess | None] | None" = None,
    check: "Callable[[argparse.Namespace, torch.device], None] | None" = None,
    argv: Sequence[str] | None = None,
) -> Lesson:
    """Parse and validate everything, then describe the run on the console.

    ``shape`` gives the numbers of the file name; ``elements`` estimates how many tensor elements
    the run holds at once, so absurd sizes are refused before anything is allocated.
    ``needs_cuda``, for a GPU-only lesson, says why and what to run instead when there is no CUDA.
    ``variants`` gives the lesson's own knobs that change the trace (``[("attn", "eager")]``), for
    the file name and the trace's metadata; leave out a knob at its default value.
    ``matmul_flops`` counts the workload's matrix-multiply arithmetic per step (2*m*n*k per GEMM),
    so the report can say how fast the compute ran, and notice a machine too busy to judge.
    ``guess`` is what the post expects one annotated call to run (:mod:`common.guess`; or a function
    of the flags giving it): the report prints it against what ran, mismatches first.
    ``check(args, device)`` refuses flags the device cannot run (``fail``), before anything is printed.
    """
    args = p.parse_args(argv)  # --help and bad values end here (a script parses once before importing torch)
    console = Console(highlight=False)
    if args.share:
        from common.share import check_can_share

        check_can_share(args.share)  # the login and trace-util now, not after the run
    import torch  # the device checks need it (the script has imported it already)

    if needs_cuda and (args.device == "cpu" or not torch.cuda.is_available()):
        fail(f"{args.script}.py needs CUDA ({'--device cpu was given' if args.device == 'cpu' else 'none found'}): "
             f"{needs_cuda}")
    device = _resolve_device(args.device, console)
    if check is not None:
        check(args, device)
    cpu_choice = None
    if device.type == "cpu":
        args.dtype, cpu_choice = cpu.choose(args.dtype, args.threads)
    else:
        if args.threads:
            torch.set_num_threads(args.threads)
        args.dtype = args.dtype or _gpu_dtype(device, console)
    _check_dtype(args.dtype, device)
    dtype = getattr(torch, TORCH_DTYPES[args.dtype])
    _check_fits(elements(args), dtype, device)
    if args.compile and device.type == "cpu":
        _check_compiler()
        # Name Inductor's fused C++ kernels in the trace (graph_0_cpp_fused_...), as Triton's are on GPUs.
        import torch._inductor.config as inductor_config

        inductor_config.cpp.enable_kernel_profile = True
    trace_dir = args.trace_dir if args.trace_dir is not None else Path("traces") / args.script
    output.check_folder(trace_dir)  # created when the files are written: a run that fails leaves no folder

    own = list(variants(args)) if variants else []
    mode = mode_label(args.compile, args.compile_mode)
    tag = make_tag(shape(args), args.dtype, args.warmup, mode, _profiler_variants(args, device) + own)
    knobs = RunKnobs(
        script=args.script, tag=tag, shape=tuple(shape(args)), dtype=args.dtype, device=device.type,
        warmup=args.warmup, warmup_calls=WARMUP_CALLS if args.warmup else 0, compile=args.compile,
        compile_mode=args.compile_mode,
        schedule=args.schedule,
        record_shapes=args.record_shapes, profile_memory=args.profile_memory, with_stack=args.with_stack,
        variants={k: v for k, v in own},
        matmul_flops_per_step=matmul_flops(args) if matmul_flops else None,
        guess=_guess_json(guess, args),
        cpu=cpu.to_knobs(cpu_choice) if cpu_choice else None,
    )
    lesson = Lesson(args, device, dtype, tag, table_file(trace_dir, tag), trace_file(trace_dir, tag, args.gzip),
                    console, knobs)
    output.check_targets([(None, path) for path in lesson.outputs])  # each a regular file or new, no two alike
    _quiet_what_the_lesson_explains(args)
    _describe(lesson, cpu_choice)
    return lesson


def _guess_json(guess, args: argparse.Namespace) -> dict | None:
    chosen = guess(args) if callable(guess) else guess
    return chosen.to_json() if chosen is not None else None


def _profiler_variants(args: argparse.Namespace, device: "torch.device") -> list[Variant]:
    """The common knobs that change the trace, as file-name variants (none for the posts' defaults)."""
    out: list[Variant] = []
    if args.schedule != Schedule():
        out.append(("sched", args.schedule.variant))
    out += [(knob, "") for knob, flag in (("shapes", "record_shapes"), ("mem", "profile_memory"),
                                           ("stack", "with_stack")) if getattr(args, flag)]
    import torch

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


def _gpu_dtype(device: "torch.device", console: Console) -> str:
    """The posts' bf16, or fp16 on a GPU without bf16 (said on the console)."""
    import torch

    if torch.cuda.is_bf16_supported():
        return "bf16"
    console.print(f"dtype   fp16: this GPU ({torch.cuda.get_device_name(device)}) has no bf16 (--dtype to choose)")
    return "fp16"


def _describe(lesson: Lesson, cpu_choice: "cpu.CpuChoice | None") -> None:
    import torch

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
        for line in cpu.describe(cpu_choice, a.dtype):
            c.print(escape(line))
    c.print(_first_step_line(a))
    extras = [n for n in ("record_shapes", "profile_memory", "with_stack") if getattr(a, n)]
    if extras:
        c.print(f"profiler also records: {', '.join(extras)} (more CPU overhead in the trace)")


def _first_step_line(a: argparse.Namespace) -> str:
    """What the first recorded step will hold (P1.6, P1.7 as the runs show them): the profiler makes it
    wider in every run; it holds the workload's cold start only when nothing ran the workload before it."""
    s = a.schedule
    skipped = s.wait + s.warmup
    if skipped:
        before = f"the schedule ran the workload {skipped}x unrecorded" + (" after the warm-up" if a.warmup else "")
        return (f"first recorded step #{skipped}: {before}, so it holds no cold start; the profiler makes it "
                f"wider in every run, warm-up or not (--no-warmup --schedule 0,0,{s.active} records the first call)")
    if a.warmup:
        return ("first recorded step #0: the warm-up ran the workload before the profiler, so it holds the "
                "profiler's own start-up (schedule warmup=0; torch warns about it, silenced here), no cold start")
    return ("first recorded step #0 is the workload's first call: its cold start, and the profiler's own start-up "
            "(schedule warmup=0; torch warns about it, silenced here)")


def lesson_main(main: Callable[[], int | None]) -> Callable[[], int]:
    """Run a lesson's main() with :func:`common.errors.run_command`: bad input or out-of-memory is one
    line on stderr and exit status 2, a Ctrl-C one line and 130, the files being written removed."""

    def out_of_memory(exc: BaseException) -> str | None:
        where = _out_of_memory(exc) if isinstance(exc, RuntimeError) else None  # torch.OutOfMemoryError is one
        return None if where is None else f"out of {where}memory for these shapes; use smaller sizes"

    def wrapper() -> int:
        return run_command(main, last=True, translate=out_of_memory)

    return wrapper


def _out_of_memory(exc: RuntimeError) -> str | None:
    """"device " for torch's out-of-device-memory error, "" for the CPU allocator's, None otherwise."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, torch.OutOfMemoryError):
        return "device "
    text = str(exc)
    return "" if "not enough memory" in text or "can't allocate memory" in text.lower() else None
