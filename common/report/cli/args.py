"""The command line's arguments: the parser (``uv run -m common.report --help``), the combinations it
refuses (one ``error:`` line, exit 2) and the flags a mode does not use (a note each)."""

from __future__ import annotations

import argparse
import re

from common.checks import row_count
from common.errors import CommandParser
from common.report.load.inputs import DEFAULT_MAX_BYTES, STDIN

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


def inputs(args: argparse.Namespace) -> list[str]:
    """The traces the command reads: ``--compare``'s two, or the TRACEs."""
    return args.compare or args.traces
