"""Upload a trace folder to a Hugging Face bucket with trace-util and print a Perfetto link per trace.

    uv run -m common.share [DIR] -b BUCKET        # DIR defaults to traces

This runs trace-util 0.2's command, ``trace-util -b BUCKET -f DIR --no-delete``, for you: the
``trace-util`` on PATH (a project dependency on Python 3.12+), else ``uvx`` fetches it, with a
Python 3.12 interpreter of uv's (trace-util needs 3.12+, whatever Python runs this project). It
needs a Hugging Face login and the internet; ``uv run -m common.view TRACE`` opens a trace with
neither.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
from pathlib import Path

from rich.console import Console

from common.commands import display_path, uv_run
from common.errors import CommandParser, exit_on_bad_input, fail
from common.paths import TRACE_SUFFIXES

TRACE_UTIL_SPEC = "trace-util>=0.2,<0.3"  # the CLI below is trace-util 0.2's (-b BUCKET -f FOLDER)
TRACE_UTIL_PYTHON = "3.12"  # trace-util requires Python >= 3.12; uvx fetches one when this project runs older
OFFLINE = f"or open a trace offline, with no upload: {uv_run('-m', 'common.view', 'TRACE')}"
WARNING = (
    "[yellow]before you share:[/] a trace holds your host name, process and thread ids, and, "
    "when recorded with --with_stack, your source file paths; anyone who can read the bucket "
    "can read the traces."
)


def trace_util_command() -> list[str] | None:
    """How to run trace-util here: the executable on PATH, else through uvx; None when neither."""
    if exe := shutil.which("trace-util"):
        return [exe]
    if uvx := shutil.which("uvx"):
        return [uvx, "--python", TRACE_UTIL_PYTHON, "--from", TRACE_UTIL_SPEC, "trace-util"]
    return None


def _logged_in() -> bool:
    try:
        from huggingface_hub import get_token  # lazy: huggingface_hub, 100 ms (httpx): only to ask for the login
    except ImportError:  # cannot tell: let trace-util ask for a login itself
        return True
    return get_token() is not None


def check_can_share(bucket: str) -> list[str]:
    """Everything about sharing that can be checked before a lesson runs: the bucket name, the
    login and a way to run trace-util. Returns the trace-util command; bad input -> BadInput."""
    if not bucket or bucket.startswith("-"):
        fail(f"{bucket!r} is not a bucket name")
    if not _logged_in():
        fail(f"not logged in to Hugging Face: run `hf auth login` or set HF_TOKEN; {OFFLINE}")
    command = trace_util_command()
    if command is None:
        fail(
            "cannot find trace-util or uvx: install uv (https://docs.astral.sh/uv/), or use Python "
            f"3.12+ where `uv sync` installs trace-util; {OFFLINE}"
        )
    return command


def share(directory: Path, bucket: str, console: Console | None = None, mirror: bool = False) -> int:
    """Upload ``directory`` to ``bucket`` with trace-util; returns its exit status.

    Files already in the bucket stay unless ``mirror`` (trace-util's default, which would delete
    another script's traces when one script's folder is shared).
    """
    console = console or Console(highlight=False)
    directory = Path(directory)
    if not directory.is_dir():
        fail(f"no such folder: {display_path(directory)}")
    if not any(p.name.endswith(TRACE_SUFFIXES) for p in directory.rglob("*")):
        fail(f"no traces (.json, .json.gz) under {display_path(directory)}; run a script first")
    command = check_can_share(bucket)
    console.print(WARNING)  # every run, once: each upload may carry different traces
    argv = [*command, "-b", bucket, "-f", str(directory), *([] if mirror else ["--no-delete"])]
    console.print(f"running: {shlex.join(argv)}", markup=False)
    rc = subprocess.call(argv)
    if rc != 0:
        console.print(f"[red]trace-util failed[/] (exit status {rc}); {OFFLINE}")
    return rc


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="uv run -m common.share", description=__doc__.split("\n\n")[0])
    p.add_argument("directory", nargs="?", type=Path, default=Path("traces"),
                   help="folder of traces to upload (default: traces)")
    p.add_argument("-b", "--bucket", required=True, help="Hugging Face bucket (created if missing)")
    p.add_argument("--mirror", action="store_true",
                   help="make the bucket an exact copy of DIR: delete bucket files not in DIR")
    return p


@exit_on_bad_input
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return share(args.directory, args.bucket, mirror=args.mirror)


if __name__ == "__main__":
    raise SystemExit(main())
