"""The memory figures (:mod:`common.report.facts.memory`) for people and programs: the JSON's ``memory``, the text
report's "Memory" section, the short report's line.

Shown only when the trace holds ``[memory]`` events (``--profile-memory``); ``memory`` is null in the JSON otherwise.
"""

from __future__ import annotations

from dataclasses import asdict

from common.report.model.impossible import LEFT_OUT
from common.report.facts.tables import Tables
from common.amounts import fmt_bytes_binary

OP_ROWS = 8


def memory_json(t: Tables):
    """``memory`` of the JSON: null without memory events (keys documented in docs/report.md, "JSON schema")."""
    mem = t.memory
    if mem is None:
        return None
    return dict(devices=[{**asdict(d), "curve": [list(p) for p in d.curve]} for d in mem.devices],
                annotations=[asdict(a) for a in mem.annotations], ops=[asdict(r) for r in mem.ops])


def device_line(d) -> str:
    reconstructed = " (above the level at the profiler's start: this trace records no totals)" \
        if d.totals == "reconstructed" else ""
    reserved = f", peak reserved {fmt_bytes_binary(d.peak_reserved_bytes)}" if d.peak_reserved_bytes else ""
    live = (f"; {d.live_at_window_end:,} of the window's allocations ({fmt_bytes_binary(d.live_at_window_end_bytes)}) "
            "still live at its end") if d.live_at_window_end is not None else ""
    return (f"{d.device}: peak allocated {fmt_bytes_binary(d.peak_allocated_bytes)}{reconstructed}{reserved}; in the window "
            f"{d.allocations_in_window:,} allocations ({fmt_bytes_binary(d.allocated_bytes_in_window)}), "
            f"{d.frees_in_window:,} frees ({fmt_bytes_binary(d.freed_bytes_in_window)}){live}")


def short_line(t: Tables) -> str:
    """The short report's one line: each device's peak and the window's allocations; where the memory view was
    left out for an impossible number (:mod:`~common.report.model.impossible`), the note that says so ("" without either)."""
    if t.memory is None:
        return next((n for n in t.model.notes if n.startswith(LEFT_OUT)), "")
    return "memory: " + "; ".join(f"{d.device} peak {fmt_bytes_binary(d.peak_allocated_bytes)}"
                                  f"{' (reconstructed)' if d.totals == 'reconstructed' else ''}, "
                                  f"{d.allocations_in_window:,} allocations in the window" for d in t.memory.devices)


def render_memory(t: Tables, console) -> None:
    """The text report's Memory section: a line per device, per annotation, and the plugin's op table."""
    from rich.markup import escape  # lazy: rich, about 100 ms: --json never loads it
    from rich.table import Table  # lazy: rich, about 100 ms: --json never loads it

    mem = t.memory
    if mem is None:
        return
    console.print("[bold]Memory[/] (the trace's \\[memory] events)")
    for d in mem.devices:
        console.print(f"  {escape(device_line(d))}")
    for a in mem.annotations[:6]:
        console.print(f"  {escape(a.name)} on {a.device}: {fmt_bytes_binary(a.allocated_bytes_per_call)} allocated per call "
                      f"({a.allocations_per_call:,.1f} allocations, largest {fmt_bytes_binary(a.largest_allocation_bytes)}), "
                      f"net {fmt_bytes_binary(a.net_bytes_per_call)}")
    if mem.ops:
        several = len({r.device for r in mem.ops}) > 1
        table = Table(title="memory by op (TensorBoard's Memory view)",
                      caption="allocation counts in --json" if len(mem.ops) <= OP_ROWS else None)
        for col in ("device",) * several + ("op", "calls", "self increase", "increase", "self allocated", "allocated"):
            table.add_column(col, justify="left" if col in ("device", "op") else "right", overflow="fold")
        for r in mem.ops[:OP_ROWS]:
            table.add_row(*(r.device,) * several, escape(r.name[:40]), f"{r.calls:,}",
                          fmt_bytes_binary(r.self_size_increase_bytes), fmt_bytes_binary(r.size_increase_bytes),
                          fmt_bytes_binary(r.self_allocation_bytes), fmt_bytes_binary(r.allocation_bytes))
        if len(mem.ops) > OP_ROWS:
            table.caption = f"{len(mem.ops) - OP_ROWS} more rows and the allocation counts in --json"
        console.print(table)
