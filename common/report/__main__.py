"""Command line of the trace report: ``uv run -m common.report --help``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from common.commands import display_path
from common.errors import CommandParser, exit_on_bad_input, fail
from common.paths import atomic_path

EPILOG = """\
examples:
  uv run -m common.report traces/01_matmul_add/64_bf16_cold_eager.json
  uv run -m common.report trace.json.gz --json > report.json
  uv run -m common.report --compare traces/01_matmul_add/4096_bf16_warm_eager.json \\
                                    traces/01_matmul_add/4096_bf16_warm_compile.json

--json writes the same content as JSON: to stdout with no FILE, else to FILE. One trace gives one
object; several traces a list of objects; --compare an object with summary/steps/kernels/ops.
The keys are documented in common/report/render.py.
"""


def parse_args(argv):
    p = CommandParser(
        prog="uv run -m common.report",
        description="Read Kineto/Chrome traces (.json or .json.gz) and print the patterns the "
                    "'Profiling in PyTorch' posts teach to recognise, with the evidence.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("traces", nargs="*", metavar="TRACE", help="trace files (.json or .json.gz)")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="put two traces side by side")
    p.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                   help="write JSON instead of tables: to stdout, or to FILE")
    p.add_argument("--html", metavar="FILE", default=None,
                   help="also write the report as one self-contained HTML page of plots (one TRACE, or --compare)")
    p.add_argument("--annotate", metavar="OUT", default=None,
                   help="also write a copy of the TRACE (.json or .json.gz by OUT's name) with the findings on a "
                        "'Findings' track, for Perfetto")
    p.add_argument("--short", action="store_true", help="the compact form: header, headline numbers, findings")
    p.add_argument("--top", type=int, default=15, metavar="N", help="kernel rows to show (default: 15)")
    args = p.parse_args(argv)
    if not args.traces and not args.compare:
        p.error("give at least one TRACE, or --compare A B")
    if args.traces and args.compare:
        p.error("give either TRACEs or --compare A B, not both")
    if args.top < 1:
        p.error("--top must be 1 or more")
    if args.html is not None and len(args.traces) > 1:
        p.error("--html writes one page: give one TRACE (or --compare A B)")
    if args.annotate is not None and (args.compare or len(args.traces) != 1):
        p.error("--annotate draws on one trace: give exactly one TRACE")
    return args


def _looks_like_a_trace(path: str) -> bool:
    """True for a gzip file or a JSON file with ``traceEvents`` near its start."""
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError:
        return False
    return head[:2] == b"\x1f\x8b" or b'"traceEvents"' in head


def _check_json_dest(args) -> None:
    """``report A.json --json B.json`` (meant: two traces) must not overwrite trace B with a report."""
    dest = args.json
    if dest in (None, "-"):
        return
    if dest in (args.traces or []) + (args.compare or []) or _looks_like_a_trace(dest):
        fail(f"--json {dest}: that file is a trace; name a new file for the JSON (or --json alone for stdout)")


def _check_outputs(args) -> None:
    """--html and --annotate: never onto an input, and the folder must take a file."""
    inputs = [Path(t).resolve() for t in (args.traces or []) + (args.compare or [])]
    for flag, dest in (("--html", args.html), ("--annotate", args.annotate)):
        if dest is None:
            continue
        if Path(dest).resolve() in inputs:
            fail(f"{flag} {dest}: that file is an input; name a new file")
        if not Path(dest).resolve().parent.is_dir():
            fail(f"{flag} {dest}: no such folder {display_path(Path(dest).resolve().parent)}")
    if args.html is not None and args.html == args.annotate:
        fail("--html and --annotate name the same file")


def _write_pictures(args, model, findings, compared=None) -> None:
    """The HTML page and the annotated trace, when asked for; each says what it wrote."""
    from rich.filesize import decimal

    if args.html is not None:
        if compared is not None:
            from common.report.html import render_compare_html

            data = render_compare_html(compared).encode()
            try:
                with atomic_path(Path(args.html)) as tmp:
                    tmp.write_bytes(data)
            except OSError as exc:
                fail(f"{args.html}: cannot write the page ({exc.strerror or exc})")
            size = len(data)
        else:
            from common.report import write_html

            size = write_html(model, findings, args.html)
        print(f"wrote {display_path(args.html)} ({decimal(size)} page)", file=sys.stderr)
    if args.annotate is not None:
        from common.report.annotate import write_annotated

        slices = write_annotated(Path(args.traces[0]), model, findings, Path(args.annotate))
        print(f"wrote {display_path(args.annotate)} (the trace with {slices} finding slices on a Findings track)",
              file=sys.stderr)


def _write_json(obj, dest: str) -> None:
    import msgspec

    data = msgspec.json.format(msgspec.json.encode(obj), indent=2) + b"\n"
    if dest == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        with atomic_path(Path(dest)) as tmp:
            tmp.write_bytes(data)
    except OSError as exc:
        fail(f"{dest}: cannot write the JSON ({exc.strerror or exc})")
    from rich.filesize import decimal

    print(f"wrote {display_path(dest)} ({decimal(len(data))} of JSON)")


@exit_on_bad_input
def run(argv=None, graveyard=None) -> int:
    args = parse_args(argv)
    _check_json_dest(args)
    _check_outputs(args)
    from common.report import analyze

    if args.compare:
        from common.report.compare import compare, render_compare

        a, _ = analyze(args.compare[0], graveyard, parallel=True)
        b, _ = analyze(args.compare[1], graveyard, parallel=True)
        c = compare(a, b)
        _write_pictures(args, None, None, compared=c)
        if args.json is not None:
            _write_json(c, args.json)
        else:
            from rich.console import Console
            render_compare(c, Console())
        return 0

    from common.report.job_files import job_inputs

    job = job_inputs(args.traces)
    if job is not None:  # a folder, or several ranks' traces: one report over the job
        from common.report.render_ranks import report_job

        return report_job(job, short=args.short, json_dest=args.json, write_json=_write_json, graveyard=graveyard)

    results = []
    for path in args.traces:
        results.append(analyze(path, graveyard, parallel=True))
    _write_pictures(args, *results[0])
    if args.json is not None:
        from common.report.render import to_json

        objs = [to_json(m, f) for m, f in results]
        _write_json(objs[0] if len(objs) == 1 else objs, args.json)
        return 0
    from rich.console import Console

    from common.report.render import render, render_short

    console = Console()
    for i, (m, f) in enumerate(results):
        if i:
            console.print()
        if args.short:
            render_short(m, f, console)
        else:
            render(m, f, console, top=args.top)
    return 0


def main(argv=None) -> int:
    """Run the command; big decoded traces are not freed object by object before exit."""
    graveyard: list = []
    try:
        code = run(argv, graveyard)
    except BrokenPipeError:  # `... --json | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    if graveyard and argv is None:  # a real command-line run: skip the teardown of millions of objects
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
