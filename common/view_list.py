"""The viewer's ``--list``: every trace under a folder, newest first, with what its name says of the run."""

from __future__ import annotations

import stat
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from common.commands import display_path, shorten, uv_run
from common.errors import fail
from common.paths import TRACE_SUFFIXES, parse_tag
from common.amounts import fmt_bytes_decimal


def find_traces(root: Path) -> list[Path]:
    """Trace files under ``root`` (recursively), newest first; hidden files and folders skipped."""
    found = [
        p for p in root.rglob("*")
        if p.name.endswith(TRACE_SUFFIXES) and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def _knobs_text(name: str) -> str:
    """What the file name says of the run: ``size 64, bf16, cold, eager; sched-0-0-20``."""
    tag = parse_tag(name)
    if tag is None:
        return "(not a name this project writes)"
    text = f"size {'x'.join(map(str, tag.shape))}, {tag.dtype}, {'warm' if tag.warm else 'cold'}, {tag.mode}"
    return text + (f"; {tag.variants_text}" if tag.variants else "")


def list_traces(root: Path, console: Console | None = None) -> int:
    """The traces under ``root``, newest first: the path to copy on its own line (relative to the
    current folder), then what the name says of the run, its size and age. Reads at 80 columns."""
    console = console or Console(highlight=False)
    try:
        info = root.stat()
    except FileNotFoundError:
        fail(f"no such folder: {shorten(display_path(root))}")
    except OSError as exc:
        fail(f"cannot read {shorten(root)}: {exc.strerror or exc}")
    if not stat.S_ISDIR(info.st_mode):
        fail(f"--list lists a folder, and {shorten(display_path(root))} is a file; to open it, drop --list")
    traces = find_traces(root)
    if not traces:
        console.print(f"no traces under {display_path(root)}")
        return 0
    table = Table(title=f"traces under {display_path(root)}, newest first", box=None, show_header=False,
                  padding=(0, 1))
    table.add_column("trace", no_wrap=True, overflow="fold")
    for p in traces:
        info = p.stat()
        modified = datetime.fromtimestamp(info.st_mtime).strftime("%Y-%m-%d %H:%M")
        table.add_row(escape(display_path(p)))
        table.add_row(f"  [dim]{escape(_knobs_text(p.name))}; {fmt_bytes_decimal(info.st_size)}, {modified}[/]")
    console.print(table)
    console.print(f"open one: [cyan]{escape(uv_run('-m', 'common.view', 'TRACE'))}[/]")
    return 0
