"""The command line's output paths, checked before any trace is read: never one of the traces (the same
file under any name), never a folder or a device, into a folder that exists, no two outputs one file."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from common import output
from common.errors import fail
from common.printable import printable
from common.report.cli.args import inputs
from common.report.load.inputs import STDIN, shorten


def check_outputs(args: argparse.Namespace) -> None:
    """Every output the command line names (-o, --html, --annotate), before a trace is read."""
    check_output(args.output, inputs(args))
    check_pictures(args)


def check_output(dest: str | None, sources: list, flag: str = "-o") -> None:
    """Refuse an output that cannot be a file (a folder, a device, a FIFO: :func:`common.output.check_target`),
    and one that is one of the inputs: the same file (device and inode, links resolved), whatever
    its name and contents."""
    if dest is None or dest == STDIN:
        return
    target = output.identity(dest)
    for source in sources:
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
        check_output(dest, inputs(args), flag=flag)
        _check_parent(dest, flag)
    output.check_targets(_outputs(args))


def _check_parent(dest: str, flag: str) -> None:
    """The folder ``dest`` goes into exists, as the system finds it (a link then ``..`` leads where the link
    points, not back); when it does not, the error names the folder as typed, and where it leads."""
    typed = os.path.dirname(str(dest)) or os.curdir
    if os.path.isdir(typed):
        return
    fail(f"{flag} {shorten(dest)}: no such folder {printable(typed)}{_broken_link(typed)}")


def _broken_link(folder: str) -> str:
    """`` (PART is a link to TARGET, which does not exist)`` for the first such part of ``folder``, or ''."""
    parts = Path(folder).parts
    for i in range(1, len(parts) + 1):
        part = os.path.join(*parts[:i])
        if os.path.islink(part) and not os.path.exists(part):
            return f" ({printable(part)} is a link to {printable(os.readlink(part))}, which does not exist)"
    return ""


def check_job_outputs(args: argparse.Namespace, job: list[Path]) -> None:
    """A job (a folder, or several ranks' traces) has one report: --html and --annotate draw one trace,
    and -o is none of the job's traces."""
    for flag, dest in (("--html", args.html), ("--annotate", args.annotate)):
        if dest is not None:
            fail(f"{flag} draws one trace, and {shorten(' '.join(args.traces))} is a job of {len(job)} "
                 "traces; name one rank's trace (a multi-process lesson writes a page and a copy per rank "
                 f"with {flag})")
    check_output(args.output, job)
