"""The command line's modes, one function each, on parsed and checked arguments: one or several traces
(:func:`single`: rich text, ``--short`` or ``--json``, with ``--html`` and ``--annotate``), a job
(:func:`job`), ``--glance`` (:func:`glance`) and ``--compare`` (:func:`compare`); and the writers they
share (:func:`write_json`, :func:`write_pictures`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from dataclasses import replace

from common import output
from common.commands import display_path, uv_run
from common.errors import fail, BadInput
from common.report.cli.args import DEFAULT_TOP
from common.report.load.inputs import STDIN, shorten
from common.report.pipeline import analyze, steps_of
from common.amounts import fmt_bytes_decimal

GLANCE_SUFFIXES = (".json", ".json.gz")  # what --glance reads under a folder


def write_pictures(args: argparse.Namespace, tables, findings, compared=None) -> None:
    """The HTML page and the annotated trace, when asked for; each says what it wrote (on stderr)."""
    copy = None
    if args.annotate is not None:  # read and checked first: a trace it cannot copy leaves no page behind either
        from common.report.render.annotate import annotated_copy  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them

        copy = annotated_copy(Path(args.traces[0]), tables, findings, Path(args.annotate), flag="--annotate")
    if args.html is not None:
        if compared is not None:
            from common.report.render.html import render_compare_html  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them

            size = output.write_file(args.html, render_compare_html(compared).encode(), flag="--html",
                                     what="the page")
        else:
            from common.report.render.html import write_html  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them

            size = write_html(tables, findings, args.html, flag="--html", timeline_trace=args.annotate)
        print(f"wrote {display_path(args.html)} ({fmt_bytes_decimal(size)} page)", file=sys.stderr)
    if copy is not None:
        slices = copy.write()
        print(f"wrote {display_path(args.annotate)} (the trace with {slices} finding slices on a Findings track)",
              file=sys.stderr)
        print(f"  open it: {uv_run('-m', 'common.view', Path(args.annotate))}", file=sys.stderr)


def write_json(obj, dest: str | None) -> None:
    """The JSON to standard output (no ``dest``, or ``-``) or, whole or not at all, to the file ``dest``."""
    import msgspec  # lazy: msgspec, 60 ms: --help answers without it

    data = msgspec.json.format(msgspec.json.encode(obj), indent=2) + b"\n"
    if dest is None or dest == STDIN:
        output.write_stdout(data)
        return
    output.write_file(dest, data, flag="-o", what="the JSON")
    print(f"wrote {display_path(dest)} ({fmt_bytes_decimal(len(data))} of JSON)")


def job(args: argparse.Namespace, paths: list) -> int:
    """The job report: read the job, then write its JSON (``{"schema", "ranks"}``, to ``-o`` or
    stdout) or print it (``--short``: the lessons' compact form)."""
    from common.report.job.ranks import read_ranks  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them
    from common.report.render.job import render_job, render_job_short, to_json  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them

    ranks = read_ranks(paths, parallel=True, max_bytes=args.max_size)
    if args.json:
        write_json({"schema": "common.report/1", "ranks": to_json(ranks)}, args.output)
        return 0
    from rich.console import Console  # lazy: rich, about 130 ms: --help answers without it, --json never loads it

    (render_job_short if args.short else render_job)(ranks, Console())
    return 0


def single(args: argparse.Namespace) -> int:
    """Each TRACE's report: rich text (``--short``: the lessons' compact form) or JSON (one object, or a list
    of them), with the first trace's page (``--html``) and annotated copy (``--annotate``)."""
    results = [analyze(path, parallel=True, max_bytes=args.max_size) for path in args.traces]
    write_pictures(args, *results[0])
    if args.json:
        from common.report.render.json import to_json  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them

        objs = [to_json(tables, f) for tables, f in results]
        write_json(objs[0] if len(objs) == 1 else objs, args.output)
        return 0
    from rich.console import Console  # lazy: rich, about 130 ms: --help answers without it, --json never loads it

    from common.report.render.text import render, render_short  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them

    console = Console()
    for i, (tables, f) in enumerate(results):
        if i:
            console.print()
        if args.short:
            render_short(tables, f, console)
        else:
            render(tables, f, console, top=args.top or DEFAULT_TOP, timeline_trace=args.annotate)
    return 0


def glance(args: argparse.Namespace) -> int:
    """A few lines per trace, in the posts' order (:mod:`common.report.render.glance`); files that are not
    traces are skipped and named, and the command's own output (-o) is never read."""
    from common.report.compare.variants import digest, with_versus  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them
    from common.report.render.glance import glance_row, order_key, render_glance, skipped_line, variant_of  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them

    paths = glance_paths(args.traces, skip=args.output if args.output != STDIN else None)
    if not paths:
        fail(f"{shorten(' '.join(args.traces))}: no .json or .json.gz trace there")
    read, skipped = [], []
    for path in paths:
        try:
            tables, findings = analyze(str(path), parallel=True, max_bytes=args.max_size)
        except BadInput as exc:
            why = str(exc).strip().splitlines()[0].removeprefix("error: ")
            head, sep, rest = why.partition(": ")
            skipped.append((display_path(path), rest if sep and path.name in head else why))
            continue
        shown = display_path(path)
        read.append((order_key(tables, shown), glance_row(tables, findings, shown),
                     digest(tables, variant_of(tables))))
    if not read:
        fail(f"{shorten(' '.join(args.traces))}: no trace there ({skipped_line(skipped)})")
    read.sort(key=lambda r: r[0])
    rows = [replace(row, versus=v) for (_, row, _), v in zip(read, with_versus([d for _, _, d in read]))]
    if args.json:
        write_json([r.to_json() for r in rows], args.output)
        if skipped:
            print(skipped_line(skipped), file=sys.stderr)
        return 0
    from rich.console import Console  # lazy: rich, about 130 ms: --help answers without it, --json never loads it

    render_glance(rows, Console(), skipped)
    return 0


def glance_paths(paths: list[str], skip: str | None = None) -> list[Path]:
    """The traces: each file as named, and every .json/.json.gz under each folder (annotated copies, hidden
    names such as a writer's ``.tmp-*`` folders, and the file ``skip``, the command's own output, left out),
    sorted."""
    out: list[Path] = []
    own = _identity(skip) if skip else None
    for text in paths:
        p = Path(text)
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(GLANCE_SUFFIXES)
                              and ".annotated." not in f.name
                              and not any(part.startswith(".") for part in f.relative_to(p).parts)))
        else:
            out.append(p)
    return [p for p in out if own is None or _identity(p) != own]


def _identity(path) -> tuple | None:
    try:
        info = Path(path).stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def compare(args: argparse.Namespace) -> int:
    """Two traces side by side: each run's steps (:func:`~common.report.pipeline.steps_of`: its step rows, header
    and model), no other table and no rule: the comparison reads nothing else."""
    from common.report.compare.judge import compare as compare_runs  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them
    from common.report.render.compare import render_compare  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them

    a, b = (steps_of(path, parallel=True, max_bytes=args.max_size) for path in args.compare)
    result = compare_runs(a, b)
    write_pictures(args, None, None, compared=result)
    if args.json:
        write_json(result, args.output)
    else:
        from rich.console import Console  # lazy: rich, about 130 ms: --help answers without it, --json never loads it

        render_compare(result, Console())
    return 0
