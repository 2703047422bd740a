"""The guess-against-what-ran table ("guess first, then look", Part 3), for the terminal.

It reads the :class:`~common.report.facts.guess.GuessCheck` the tables hold and prints one row per
item, mismatches first; it computes nothing.
"""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from common.report.facts.guess import AS_GUESSED, MISSING
from common.report.model.names import short_name
from common.report.facts.tables import Tables
from common.amounts import fmt_bytes_decimal

MARKS = {MISSING: "[red]✗ missing[/]", AS_GUESSED: "[green]✓ as guessed[/]"}
NOT_GUESSED_MARK = "[yellow]+ not guessed[/]"
VIA_SHOWN = 1  # the innermost ops around an item the table names (the JSON has them all)
KERNEL_SHOWN = 60  # a kernel's name, shortened to this (its functor first: names.short_name)


def guess_table(t: Tables):
    """A rich Table of the lesson's guess against the typical call, or None without a guess."""
    check = t.guess
    if check is None:
        return None
    work = check.work
    unit = ("device events" if work.on_device else "compute ops") if len(work.typical) != 1 else \
        ("device event" if work.on_device else "compute op")
    alike = "every call alike" if work.alike == work.calls else f"{work.alike} of {work.calls} calls alike"
    table = Table(title=f"guess first, then look: one {escape(check.guess.annotation)} call "
                        f"({len(work.typical)} {unit}, {alike})", title_justify="left")
    for col in ("", "the script's guess", "what ran", "x", "under"):
        table.add_column(col, overflow="fold", justify="right" if col == "x" else "left")
    for row, count in check.grouped():
        seen = row.seen
        ran = "" if seen is None else _ran(seen)
        via = () if seen is None else seen.via
        under = " > ".join(via[-VIA_SHOWN:])
        table.add_row(MARKS.get(row.status, NOT_GUESSED_MARK), escape(row.expected or ""), escape(ran),
                      str(count), escape(under))
    table.caption = escape(f"the guess, as the script states it: {check.guess.source}")
    return table


def _ran(seen) -> str:
    """What ran, named as what it is: a kernel or copy with its op, a memset as a memset."""
    if seen.is_memset:
        size = f", {fmt_bytes_decimal(seen.bytes)}" if seen.bytes is not None else ""
        return f"memset{size} ({seen.kernel}, by {seen.op or 'no op'})"
    return f"{short_name(seen.kernel, KERNEL_SHOWN)} (by {seen.op or 'no op'})" if seen.kernel else seen.op
