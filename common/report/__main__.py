"""Command line of the trace report: ``uv run -m common.report --help``."""

from __future__ import annotations

from common.errors import quit_on_interrupt

if __name__ == "__main__":
    quit_on_interrupt()  # a Ctrl-C while the modules import: one line, exit 130

import argparse
import os
import re
import sys
from pathlib import Path

from common import output
from common.checks import row_count
from common.commands import display_path, uv_run
from common.errors import CommandParser, exit_on_bad_input, fail
from common.report.load.inputs import DEFAULT_MAX_BYTES, STDIN, shorten

DEFAULT_TOP = 15
EPILOG = f"""\
examples:
  uv run -m common.report traces/01_matmul_add/64_bf16_cold_eager.json
  uv run -m common.report --json trace.json.gz > report.json
  uv run -m common.report --json trace.json.gz -o report.json
  uv run -m common.report --compare traces/01_matmul_add/4096_bf16_warm_eager.json \\
                                    traces/01_matmul_add/4096_bf16_warm_compile.json
  uv run -m common.report trace.json --html report.html --annotate trace.annotated.json
  uv run -m common.report traces/06_ddp                # a job: every rank's trace in the folder
  uv run -m common.report --glance traces/04_a_naive_attention traces/04_c_sdpa_attention   # a line per trace

--json writes the same content as JSON, with every kernel and op: to stdout, or with -o FILE to
FILE (never one of the traces read: the same file under any name is refused). One trace gives one
object; several traces a list of objects; --compare an object with summary/steps/kernels/ops.
The keys are documented in docs/report.md ("JSON schema").

A TRACE is a regular file (or {STDIN} for standard input) of JSON text, gzipped or not: a Kineto
object with traceEvents, or Chrome's JSON Array format; at most --max-size bytes once decompressed.
"""
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.I)


def _size(text: str) -> int:
    """``4G`` -> 4 GiB; bytes, or a number with K, M, G or T (powers of 1024)."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (bytes, or a number with K, M, G or T)")
    value = int(float(match[1]) * 1024 ** " kmgt".index(match[2].lower() or " "))
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: the size must be at least 1 byte")
    return value


def build_parser() -> CommandParser:
    p = CommandParser(
        prog="uv run -m common.report",
        description="Read Kineto/Chrome traces (.json or .json.gz) and print the patterns the "
                    "'Profiling in PyTorch' posts teach to recognise, with the evidence.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="*", metavar="TRACE", help=f"trace files (.json or .json.gz; {STDIN}: standard input)")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="put two traces side by side")
    p.add_argument("--json", action="store_true", help="write JSON instead of tables (every kernel and op)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help=f"with --json: write it to FILE instead of stdout ({STDIN}: stdout); never one of the traces")
    p.add_argument("--html", metavar="FILE", default=None,
                   help="also write the report as one self-contained HTML page of plots (one TRACE, or --compare)")
    p.add_argument("--annotate", metavar="OUT", default=None,
                   help="also write a copy of the TRACE (.json or .json.gz by OUT's name) with the findings on a "
                        "'Findings' track, for Perfetto")
    p.add_argument("--short", action="store_true", help="the compact form: header, headline numbers, findings")
    p.add_argument("--glance", action="store_true",
                   help="one line per trace (TRACEs, and every trace under a folder): variant, ops and work per "
                        "call, time per call, its lesson")
    p.add_argument("--top", type=row_count, default=None, metavar="N", help=f"kernel rows to show (default: {DEFAULT_TOP})")
    p.add_argument("--max-size", "--max_size", type=_size, default=DEFAULT_MAX_BYTES, metavar="SIZE",
                   help=f"read at most SIZE bytes of JSON per trace (default: {DEFAULT_MAX_BYTES >> 30}G)")
    return p


def parse_args(argv) -> argparse.Namespace:
    p = build_parser()
    args = p.parse_args(argv)
    if not args.traces and not args.compare:
        p.error("give at least one TRACE, or --compare A B")
    if args.traces and args.compare:
        p.error("give either TRACEs or --compare A B, not both")
    if args.output is not None and not args.json:
        p.error("-o/--output writes the JSON: add --json (the tables are for the terminal; redirect them with >)")
    if (args.traces or args.compare).count(STDIN) > 1:
        p.error(f"standard input ({STDIN}) can be read once: name it once")
    if args.html is not None and len(args.traces) > 1:
        p.error("--html writes one page: give one TRACE (or --compare A B)")
    if args.glance and (args.compare or args.html is not None or args.annotate is not None or args.short):
        p.error("--glance puts traces side by side in one table: not with --compare, --html, --annotate or --short")
    if args.annotate is not None and (args.compare or len(args.traces) != 1 or args.traces == [STDIN]):
        p.error("--annotate draws on one trace file: give exactly one TRACE")
    return args


def ignored_flags(args: argparse.Namespace) -> list[str]:
    """A line for each flag the chosen mode does not use."""
    mode = ("--compare" if args.compare else "--glance" if args.glance else "--json" if args.json else
            "--short" if args.short else None)
    out = []
    if args.short and mode in ("--compare", "--json"):
        out.append(f"--short has no effect with {mode}" + (" (the JSON holds everything)" if mode == "--json" else ""))
    if args.top is not None and mode is not None:
        out.append(f"--top has no effect with {mode}" + (" (the JSON lists every kernel)" if mode == "--json" else
                                                           " (it shows no kernel table)" if mode == "--short" else ""))
    return out


def _inputs(args: argparse.Namespace) -> list[str]:
    return args.compare or args.traces


def check_output(dest: str | None, inputs: list, flag: str = "-o") -> None:
    """Refuse an output that cannot be a file (a folder, a device, a FIFO: :func:`common.output.check_target`),
    and one that is one of the inputs: the same file (device and inode, links resolved), whatever
    its name and contents."""
    if dest is None or dest == STDIN:
        return
    target = output.identity(dest)
    for source in inputs:
        try:
            info = os.fstat(sys.stdin.fileno()) if str(source) == STDIN else os.stat(source)
        except (OSError, ValueError):
            continue  # an input that cannot be read is reported when it is read
        if ("inode", info.st_dev, info.st_ino) == target:
            what = "standard input" if str(source) == STDIN else f"the trace {shorten(source)}"
            fail(f"{flag} {shorten(dest)}: that is {what} (the same file); name a new file")
    output.check_target(dest, flag)  # after: a link to an input is named as that input


def _outputs(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    return [("-o", args.output), ("--html", args.html), ("--annotate", args.annotate)]


def check_pictures(args: argparse.Namespace) -> None:
    """--html and --annotate: never onto an input (the same file under any name), into a folder that
    exists; and no two outputs (-o, --html, --annotate) one file."""
    for flag, dest in (("--html", args.html), ("--annotate", args.annotate)):
        if dest is None:
            continue
        check_output(dest, _inputs(args), flag=flag)
        if not Path(dest).resolve().parent.is_dir():
            fail(f"{flag} {shorten(dest)}: no such folder {display_path(Path(dest).resolve().parent)}")
    output.check_targets(_outputs(args))


def check_job_outputs(args: argparse.Namespace, job: list[Path]) -> None:
    """A job (a folder, or several ranks' traces) has one report: --html and --annotate draw one trace,
    and -o is none of the job's traces."""
    for flag, dest in (("--html", args.html), ("--annotate", args.annotate)):
        if dest is not None:
            fail(f"{flag} draws one trace, and {shorten(' '.join(args.traces))} is a job of {len(job)} "
                 "traces; name one rank's trace (the lessons write a page and a copy per rank: 06_ddp.py "
                 f"{flag})")
    check_output(args.output, job)


def write_pictures(args: argparse.Namespace, tables, findings, compared=None) -> None:
    """The HTML page and the annotated trace, when asked for; each says what it wrote (on stderr)."""
    from rich.filesize import decimal

    if args.html is not None:
        if compared is not None:
            from common.report.render.html import render_compare_html

            size = output.write_file(args.html, render_compare_html(compared).encode(), flag="--html",
                                     what="the page")
        else:
            from common.report import write_html

            size = write_html(tables, findings, args.html, flag="--html", timeline_trace=args.annotate)
        print(f"wrote {display_path(args.html)} ({decimal(size)} page)", file=sys.stderr)
    if args.annotate is not None:
        from common.report.render.annotate import write_annotated

        slices = write_annotated(Path(args.traces[0]), tables, findings, Path(args.annotate), flag="--annotate")
        print(f"wrote {display_path(args.annotate)} (the trace with {slices} finding slices on a Findings track)",
              file=sys.stderr)
        print(f"  open it: {uv_run('-m', 'common.view', Path(args.annotate))}", file=sys.stderr)


def write_json(obj, dest: str | None) -> None:
    """The JSON to standard output (no ``dest``, or ``-``) or, whole or not at all, to the file ``dest``."""
    import msgspec

    data = msgspec.json.format(msgspec.json.encode(obj), indent=2) + b"\n"
    if dest is None or dest == STDIN:
        output.write_stdout(data)
        return
    output.write_file(dest, data, flag="-o", what="the JSON")
    from rich.filesize import decimal

    print(f"wrote {display_path(dest)} ({decimal(len(data))} of JSON)")


def _job(args, paths: list) -> int:
    """The job report: read the job, then write its JSON (``{"schema", "ranks"}``, to ``-o`` or
    stdout) or print it (``--short``: the lessons' compact form)."""
    from common.report.job.ranks import read_ranks
    from common.report.render.job import render_job, render_job_short, to_json

    job = read_ranks(paths, parallel=True, max_bytes=args.max_size)
    if args.json:
        write_json({"schema": "common.report/1", "ranks": to_json(job)}, args.output)
        return 0
    from rich.console import Console

    (render_job_short if args.short else render_job)(job, Console())
    return 0


@exit_on_bad_input
def run(argv=None, from_shell: bool = False) -> int:
    args = parse_args(argv)
    if from_shell:
        from common.report.load.reader import keep_decoded_until_exit

        keep_decoded_until_exit()  # the process leaves with os._exit: nothing decoded is freed one by one
    for line in ignored_flags(args):
        print(f"note: {line}", file=sys.stderr)
    check_output(args.output, _inputs(args))
    check_pictures(args)
    if args.compare:
        return _compare(args)
    if args.glance:
        return _glance(args)
    from common.report.job.files import job_inputs

    job = job_inputs(args.traces)
    if job is not None:  # a folder, or several ranks' traces: one report over the job
        check_job_outputs(args, job)
        return _job(args, job)
    from common.report import analyze

    results = [analyze(path, parallel=True, max_bytes=args.max_size) for path in args.traces]
    write_pictures(args, *results[0])
    if args.json:
        from common.report.render.json import to_json

        objs = [to_json(tables, f) for tables, f in results]
        write_json(objs[0] if len(objs) == 1 else objs, args.output)
        return 0
    from rich.console import Console

    from common.report.render.text import render, render_short

    console = Console()
    for i, (tables, f) in enumerate(results):
        if i:
            console.print()
        if args.short:
            render_short(tables, f, console)
        else:
            render(tables, f, console, top=args.top or DEFAULT_TOP, timeline_trace=args.annotate)
    return 0


def _glance(args: argparse.Namespace) -> int:
    """A few lines per trace, in the posts' order (:mod:`common.report.render.glance`); files that are not
    traces are skipped and named, and the command's own output (-o) is never read."""
    from dataclasses import replace

    from common.errors import BadInput
    from common.report import analyze
    from common.report.render.glance import digest, expand, glance_row, order_key, render_glance, skipped_line, with_versus

    paths = expand(args.traces, skip=args.output if args.output != STDIN else None)
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
        read.append((order_key(tables, shown), glance_row(tables, findings, shown), digest(tables, shown)))
    if not read:
        fail(f"{shorten(' '.join(args.traces))}: no trace there ({skipped_line(skipped)})")
    read.sort(key=lambda r: r[0])
    rows = [replace(row, versus=v) for (_, row, _), v in zip(read, with_versus([d for _, _, d in read]))]
    if args.json:
        write_json([r.to_json() for r in rows], args.output)
        if skipped:
            print(skipped_line(skipped), file=sys.stderr)
        return 0
    from rich.console import Console

    render_glance(rows, Console(), skipped)
    return 0


def _compare(args: argparse.Namespace) -> int:
    """Two traces' tables side by side (no rules run: the comparison reads numbers only)."""
    from common.report import tables_of
    from common.report.compare.judge import compare, render_compare

    a, b = (tables_of(path, parallel=True, max_bytes=args.max_size) for path in args.compare)
    result = compare(a, b)
    write_pictures(args, None, None, compared=result)
    if args.json:
        write_json(result, args.output)
    else:
        from rich.console import Console

        render_compare(result, Console())
    return 0


def main(argv=None) -> int:
    """Run the command. From the shell (no ``argv``), the process leaves with ``os._exit`` once its
    output is flushed: the decoded traces are not freed object by object."""
    from_shell = argv is None
    code = run(argv, from_shell)  # one line for bad input, a write error or an interrupt (common.errors)
    if from_shell:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # flushed inside run already; nothing more to say
                pass
        os._exit(code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
