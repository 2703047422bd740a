"""The flags every lesson shares, and the profiler schedule they carry; no torch here.

A script builds its parser with :func:`parser`, adds its own shape flags, and parses once
(``args = cli.parse_args()``) before its ``import torch``: ``--help``, an unknown flag or a bad
value (``--size 0``, ``--dtype int8``, ``--schedule 1,1``) answer at once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from common import output
from common.checks import positive_int, thread_count
from common.errors import BadInput, CommandParser
from common.knobs import ScheduleKnobs
from common.paths import COMPILE_MODES, DTYPES

WARMUP_CALLS = 3  # un-profiled calls before profiling with --warmup (as in the posts); the one count


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


def parser(file: str, doc: str | None, *, warmup_default: bool) -> argparse.ArgumentParser:
    """The flags every lesson shares; the script adds its shape flags to the returned parser.

    ``file`` is the script's own ``__file__``: its name (without ``.py``) names the trace folder and the
    trace's metadata, so a copy of a lesson writes under the copy's name, never into the lesson's folder.
    Flags are matched whole (``--siz`` is not ``--size``): a typo is refused, never taken for another flag."""
    script = Path(file).stem
    p = _Parser(prog=f"uv run {script}.py", description=doc, formatter_class=argparse.RawDescriptionHelpFormatter,
                allow_abbrev=False)
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


def add_mlp_shape_flags(cli: argparse.ArgumentParser, *, batch: int = 64, per_rank: bool = False,
                        cpu: dict | None = None) -> None:
    """--batch --seq --dim --hidden of the GeGLU MLP lessons (03, 03_kernels, 06), the post's defaults;
    06 trains a batch of its own on each rank. ``cpu``: the sizes a CPU run takes instead where none is
    given ({"batch": 2, ...}; :func:`sized_for`): the post's take seconds a step there."""
    cpu = cpu or {}

    def default(name: str, post: int) -> dict:
        on_cpu = f"; on the CPU {cpu[name]}" if name in cpu else ""
        return dict(default=None if name in cpu else post, help_default=f"(default: {post}{on_cpu})")

    for name, post, what in (("batch", batch, f"sequences per batch{', on each rank' if per_rank else ''}"),
                             ("seq", 128, "tokens per sequence"), ("dim", 768, "model width"),
                             ("hidden", 3072, "MLP width")):
        d = default(name, post)
        cli.add_argument(f"--{name}", type=positive_int, default=d["default"], help=f"{what} {d['help_default']}")
    cli.set_defaults(_post_sizes=dict(batch=batch, seq=128, dim=768, hidden=3072), _cpu_sizes=cpu)


def sized_for(args: argparse.Namespace, on_cpu: bool) -> argparse.Namespace:
    """The arguments with each MLP size not given filled in: the CPU's (``add_mlp_shape_flags(cpu=...)``)
    on a CPU run, else the post's. A new namespace: ``args`` is not changed."""
    sizes = {**args._post_sizes, **(args._cpu_sizes if on_cpu else {})}
    return argparse.Namespace(**{**vars(args), **{k: v for k, v in sizes.items() if getattr(args, k) is None}})
