"""A job (:class:`~common.report.job.result.JobReport`) for people and programs: rich text at 80 columns, and
the JSON's ``ranks`` section. The numbers are :mod:`common.report.job`'s; this module only prints them.

The full form: what was read, one row per rank (medians per step), the straggler, the collectives
per step, and each step's wall and wait per rank. The short form (the lesson's last words): the
rank table and the straggler line.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from rich import box
from rich.markup import escape
from rich.table import Table

from common.commands import display_path, uv_run
from common.report.job.result import JobReport, RankSummary
from common.report.units import fmt_us, json_ready
from common.amounts import fmt_bytes_decimal

STEP_TABLE_MAX_RANKS = 4  # the per-step table's cells hold two numbers: 4 ranks fit 80 columns


def header(job: JobReport) -> str:
    where = "GPU" if job.on_gpu else "CPU"
    steps = [r.number for r in job.ranks[0].steps if r.number is not None]
    span = ("profiled steps " + (f"#{steps[0]}..#{steps[-1]}" if len(steps) > 2 else ", ".join(f"#{n}" for n in steps))
            if steps else "no ProfilerStep (one window)")
    what = f", {escape(job.tag)}" if job.tag else ""
    ranks = f"{job.world_size} rank{'s' if job.world_size != 1 else ''}"
    return f"[bold]job[/]: {ranks} ({job.backend or 'unknown backend'} on the {where}){what}; {span}"


def _unit(job: JobReport):
    """One unit for a table's times, so its columns stay narrow: (name, formatter)."""
    if job.median_step_us >= 1000:
        return "ms", lambda v: f"{v / 1000:,.1f}"
    return "µs", lambda v: f"{v:,.0f}"


def rank_table(job: JobReport) -> Table:
    unit, fmt = _unit(job)
    t = Table(title=f"per rank (median per step, {unit})", box=box.SIMPLE_HEAD, pad_edge=False)
    cols = ("rank", "step", "compute", "comm", "both", "idle", "waiting", "hidden")
    for col in cols:
        t.add_column(col, justify="left" if col == "rank" else "right", no_wrap=True)
    for r in job.ranks:
        hidden = f"{r.overlap_pct:.1f}%" if r.overlap_pct is not None else "-"
        t.add_row(str(r.rank), *(fmt(v) for v in (r.step_us, r.compute_us, r.communication_us, r.overlap_us,
                                                  r.idle_us, r.wait_us)), hidden)
    basis = ("the share of comm kernel time that overlaps compute kernels (HolisticTraceAnalysis's "
             "comm/comp overlap, without the last step)" if job.overlap_basis == "hta" else
             "the share of comm time during CPU compute")
    t.caption = (f"comm: communication; both: compute and comm at once; idle: neither; waiting: in "
                 f"collectives, for the other ranks; hidden: {basis}")
    t.caption_justify = "left"
    return t


def straggler_line(job: JobReport) -> str:
    s = job.straggler
    if len(job.ranks) < 2:
        return "one rank: no other rank to wait for"
    if job.straggler_cannot_tell is not None:
        return f"[yellow]straggler: cannot tell[/]: {escape(job.straggler_cannot_tell)}"
    if s is None:
        return (f"[green]no straggler[/]: the ranks' waits in collectives differ by {fmt_us(job.wait_spread_us)} per step "
                f"(under a tenth of a step)")
    where = escape(s.collective) + (f" issued in {escape(s.issued_in)}" if s.issued_in else "")
    share = job.straggler_share_pct
    return (f"[yellow]straggler: rank {s.rank}[/]: the other ranks wait {fmt_us(s.behind_us)} per step for it "
            + (f"({share:.0f}% of a step, beyond the {fmt_us(job.step_spread_us)} the steps vary), "
               if share is not None else "") + f"in {where}" + _own_annotation(s))


def _own_annotation(s) -> str:
    """What the straggler runs that the others do not (06_ddp.py --straggler: its straggler_delay)."""
    if s.own_annotation is None:
        return ""
    beyond = s.behind_us - s.own_annotation_us
    return (f"; rank {s.rank}'s own {escape(s.own_annotation)} takes {fmt_us(s.own_annotation_us)} per step"
            + (f" (the wait is {fmt_us(beyond)} more than that)" if beyond > 0.5 * s.own_annotation_us else ""))


def straggler_text(job: JobReport) -> str:
    """The straggler line without its markup: what each rank's HTML page shows under its steps."""
    from rich.text import Text  # lazy: rich, about 100 ms: --json never loads it

    return Text.from_markup(straggler_line(job)).plain


def _range(low, high, fmt=str) -> str:
    return fmt(low) if low == high else f"{fmt(low)}-{fmt(high)}"


def collective_lines(r: RankSummary) -> list[str]:
    """Per collective name: how many per step, and their size (a range when steps differ)."""
    out = []
    for c in r.collective_ranges:
        size = _range(c.bytes_low, c.bytes_high, fmt_bytes_decimal) if c.bytes_low is not None else ""
        out.append(f"{escape(c.name)} x {_range(c.count_low, c.count_high)} per step"
                   + (f" ({size} per step)" if size else ""))
    return out


def step_table(job: JobReport) -> Table:
    unit, fmt = _unit(job)
    t = Table(title=f"each step: wall time / waiting in collectives ({unit})", box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("step", no_wrap=True)
    for r in job.ranks:
        t.add_column(f"rank {r.rank}", justify="right", no_wrap=True)
    for i, row in enumerate(job.ranks[0].steps):
        cells = [f"{fmt(r.steps[i].wall_us)} / {fmt(r.steps[i].wait_us)}" if i < len(r.steps) else "-"
                 for r in job.ranks]
        t.add_row(f"#{row.number}" if row.number is not None else str(i), *cells)
    return t


def render_job(job: JobReport, console) -> None:
    from rich.panel import Panel  # lazy: rich, about 100 ms: --json never loads it

    paths = "\n".join(escape(display_path(p)) for p in job.paths)
    console.print(Panel(f"{header(job)}\n{paths}", title="job report", expand=False))
    console.print(rank_table(job))
    console.print("  " + straggler_line(job))
    for line in collective_lines(job.ranks[0]):
        console.print(f"  collectives (rank {job.ranks[0].rank}): {line}")
    if len(job.ranks) <= STEP_TABLE_MAX_RANKS:
        console.print(step_table(job))
    for note in job.notes:
        console.print(f"  [cyan]note[/]: {escape(note)}")


def render_job_short(job: JobReport, console) -> None:
    console.print(header(job))
    console.print(rank_table(job))
    console.print("  " + straggler_line(job))
    for line in collective_lines(job.ranks[0]):
        console.print(f"  collectives (rank {job.ranks[0].rank}): {line}")
    for note in job.notes:
        console.print(f"  [cyan]note[/]: {escape(note)}")
    console.print("  [dim]full report (each step, every rank):[/]")
    console.print(f"  [cyan]{escape(uv_run('-m', 'common.report', *map(Path, job.paths)))}[/]", soft_wrap=True)


def to_json(job: JobReport) -> dict:
    """The ``ranks`` section of the report's JSON (keys documented in the README)."""
    out = asdict(job)
    out["median_step_us"] = job.median_step_us
    return json_ready(out)
