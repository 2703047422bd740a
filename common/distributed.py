"""What a multi-process lesson needs besides its lesson: torchrun's ranks, the process group, a
console only rank 0 prints to, every rank's files written together, and the job's report.

``06_ddp.py`` runs as one process per rank under ``torchrun``, which sets ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` in each process's environment.
:func:`setup_ddp` checks the launch (and the devices: one GPU per rank), validates the flags like
:func:`common.lesson.setup`, starts the process group (gloo on the CPU, NCCL on CUDA) and returns a
:class:`DdpLesson`. Each rank profiles itself and writes ``<tag>_rank<k>.{txt,json}``; rank 0
prints the console and, at the end, the report over every rank's trace. :func:`ddp_main` wraps
the script's ``main()``: one ``error:`` line (from rank 0), exit status 2, the group torn down.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import torch
import torch.distributed as dist
from rich.markup import escape

from common import report  # the facade: each name loads its stages when first called (after the run)
from common.commands import display_path, uv_run
from common.errors import BadInput, fail
from common.knobs import JobKnobs
from common.lesson import Lesson, lesson_main, setup
from common.paths import Variant, annotated_file, html_file, trace_file
from common.amounts import fmt_bytes_decimal

DEFAULT_RANKS = 2  # the README's launch: torchrun --standalone --nproc-per-node 2


@dataclass(frozen=True)
class Ranks:
    """This process's place in the job, as torchrun set it in the environment."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    run_id: str  # torchrun's run id (the same in every rank of one launch)

    @property
    def speaks(self) -> bool:
        """Rank 0 prints the console; the others stay quiet."""
        return self.rank == 0


def how_to_launch(script: str) -> str:
    return (f"{script}.py runs one process per rank: launch it with torchrun, e.g. "
            f"`uv run torchrun --standalone --nproc-per-node {DEFAULT_RANKS} {script}.py` (flags after the script)")


def ranks_from_env() -> Ranks | None:
    """The ranks torchrun set, or None when the script was started some other way."""
    env = os.environ
    if "RANK" not in env or "WORLD_SIZE" not in env:
        return None
    try:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local = int(env.get("LOCAL_RANK", rank))
        local_world = int(env.get("LOCAL_WORLD_SIZE", world))
    except ValueError:
        return None
    return Ranks(rank, world, local, local_world, env.get("TORCHELASTIC_RUN_ID", ""))


def choose_backend(device_choice: str, ranks: Ranks) -> str:
    """gloo on the CPU; NCCL with one GPU per rank on CUDA (more ranks than GPUs is refused)."""
    cuda = device_choice == "cuda" or (device_choice == "auto" and torch.cuda.is_available())
    if not cuda or not torch.cuda.is_available():
        if not dist.is_gloo_available():
            fail("this torch build has no gloo backend, which the CPU run needs")
        return "gloo"  # --device cuda without CUDA: setup() says so
    gpus = torch.cuda.device_count()
    if ranks.local_world_size > gpus:
        fail(f"torchrun started {ranks.local_world_size} ranks on this machine but it has {gpus} GPU"
             f"{'s' if gpus != 1 else ''}; NCCL needs one GPU per rank: use --nproc-per-node {gpus} "
             f"(or --device cpu for gloo)")
    if not dist.is_nccl_available():
        fail("this torch build has no NCCL backend; run with --device cpu (gloo)")
    return "nccl"


@dataclass(frozen=True)
class DdpLesson(Lesson):
    """A :class:`~common.lesson.Lesson` for one rank of a job; created by :func:`setup_ddp`."""

    ranks: Ranks | None = None
    backend: str = ""
    job_tag: str = ""  # the tag without the rank: every rank's files share it

    def rank_trace(self, rank: int) -> Path:
        return trace_file(self.trace_path.parent, f"{self.job_tag}_rank{rank}", self.args.gzip)

    @property
    def job_traces(self) -> list[Path]:
        return [self.rank_trace(k) for k in range(self.ranks.world_size)]

    @contextlib.contextmanager
    def writing(self) -> Iterator[tuple[Path, Path]]:
        """Temporary (table, trace) paths; renamed into place once every rank has written its own,
        so a job's folder never holds some ranks' files of a run and not the others'."""
        with super().writing() as paths:
            yield paths
            dist.barrier()  # every rank wrote its files: now each renames them into place
        dist.barrier()  # every rank's files are in place (rank 0 reads them all next)

    @property
    def speaks(self) -> bool:
        return self.ranks.speaks  # rank 0 prints; the others stay quiet

    def say_written(self, table: str) -> None:
        c = self.console
        c.print(f"[bold]wrote[/] one table and one trace per rank ({self.ranks.world_size} ranks):")
        for path in self.job_traces:
            size = f"  ({fmt_bytes_decimal(path.stat().st_size)})" if path.exists() else ""
            c.print(f"  {escape(display_path(path))}{size}", soft_wrap=True)
        self.say_totals(table, who="rank 0: ")

    def say_how_to_open(self) -> None:
        c = self.console
        # every rank's trace as a shell pattern (left unquoted, so the shell expands it)
        suffix = self.trace_path.name[len(self.tag):]
        pattern = f"{shlex.quote(display_path(self.trace_path.parent))}/{self.job_tag}_rank*{suffix}"
        c.print("open one rank in Perfetto, offline (or drop several ranks' files on https://ui.perfetto.dev "
                "together: 'Open multiple trace files' puts them on one timeline):")
        c.print(f"  [cyan]{escape(uv_run('-m', 'common.view', self.rank_trace(0)))}[/]", soft_wrap=True)
        c.print("the report over every rank (step time, waiting in collectives, the straggler, overlap):")
        c.print(f"  [cyan]{escape(uv_run('-m', 'common.report'))} {escape(pattern)}[/]", soft_wrap=True)

    def report(self) -> None:
        """The job's short report; --html and --annotate: one page and one annotated copy per rank."""
        a = self.args
        if not a.no_report:
            self.console.rule("what the traces say")
            report.print_short_job_report(self.job_traces, console=self.console)
        if a.html or a.annotate:
            verdict = report.job_verdict(self.job_traces) if a.html else None  # the straggler, on every rank's page
            for trace in self.job_traces:
                tag = trace.name[: -len(".json.gz" if a.gzip else ".json")]
                report.lesson_report(trace, self.console, short=False,
                                     html=html_file(trace.parent, tag) if a.html else None,
                                     annotated=annotated_file(trace.parent, tag, a.gzip) if a.annotate else None,
                                     job_verdict=verdict)


def _quiet_unless(speaks: bool) -> None:
    """Ranks other than 0 print nothing on stdout (their console, torch's notices)."""
    if not speaks:
        sys.stdout = open(os.devnull, "w")


def setup_ddp(args: argparse.Namespace, *, variants: Sequence[Variant] = (),
              check: Callable[[int], None] | None = None, **setup_kwargs) -> DdpLesson:
    """:func:`common.lesson.setup` for one rank of a torchrun job: checks the launch and the devices,
    names the files ``<tag>[_world-N]_rank<k>``, starts the process group and returns the lesson.
    ``check(world_size)`` validates the lesson's own flags against the job (usage errors, said by
    local rank 0 only)."""
    ranks = ranks_from_env()
    if ranks is None:
        fail(how_to_launch(args.script))
    if check:
        with contextlib.redirect_stderr(open(os.devnull, "w")) if ranks.local_rank != 0 else contextlib.nullcontext():
            check(ranks.world_size)
    backend = choose_backend(args.device, ranks)
    if backend == "nccl":
        torch.cuda.set_device(ranks.local_rank)
    _quiet_unless(ranks.speaks)

    world = [("world", str(ranks.world_size))] if ranks.world_size != DEFAULT_RANKS else []
    lesson = setup(args, variants=[*variants, *world, ("rank", str(ranks.rank))], **setup_kwargs)
    device = torch.device("cuda", ranks.local_rank) if backend == "nccl" else torch.device("cpu")
    dist.init_process_group(backend, device_id=device if backend == "nccl" else None)
    job = JobKnobs(id=ranks.run_id, rank=ranks.rank, world_size=ranks.world_size, backend=backend)
    fields = {f.name: getattr(lesson, f.name) for f in dataclasses.fields(Lesson) if f.init}
    fields.update(device=device, knobs=dataclasses.replace(lesson.knobs, job=job))
    ddp = DdpLesson(**fields, ranks=ranks, backend=backend, job_tag=lesson.tag.rsplit("_rank", 1)[0])
    if ranks.speaks:
        where = "one GPU each" if backend == "nccl" else "on the CPU"
        ddp.console.print(f"ranks   {ranks.world_size} processes, {backend} {where}; every rank profiles itself, "
                          f"this console is rank 0's")
    return ddp


def ddp_main(main: Callable[..., int | None]) -> Callable[..., int]:
    """:func:`common.lesson.lesson_main` for one rank: bad input is said once (by local rank 0; the
    others exit 2 quietly), and the process group is torn down however ``main(args)`` ends."""

    def rank_aware(*args, **kwargs) -> int | None:
        try:
            return main(*args, **kwargs)
        except BadInput:
            ranks = ranks_from_env()
            if ranks is not None and ranks.local_rank != 0:
                raise SystemExit(2) from None  # local rank 0 says it
            raise
        finally:
            if dist.is_available() and dist.is_initialized():
                dist.destroy_process_group()

    return lesson_main(rank_aware)
