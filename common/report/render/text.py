"""The report as rich text, for people at a terminal: the full report and the short form the lessons print
(the same content as JSON, for programs: :mod:`.json`)."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from common.commands import display_path, uv_run
from common.report.model import names as trace_names
from common.report.model.build import BREAKDOWN_KEYS
from common.report.facts.occupancy import occupancy_caption
from common.report.render.memory import render_memory, short_line
from common.report.facts.tables import Tables
from common.report.render.guess import guess_table
from common.report.findings import Finding
from common.report.units import fmt_us
from common.amounts import fmt_bytes_decimal
from common.report.render.timeline_links import timeline_snippet


def _version(k: str, v) -> str:
    if k in ("cuda_runtime_version", "cuda_driver_version") and isinstance(v, int) and v >= 1000:
        return f"{v // 1000}.{(v % 1000) // 10}"
    return str(v)


def header_facts(t: Tables) -> list[str]:
    """The header in plain text, after the trace's path: sizes, device, versions, job, steps."""
    h = t.header
    lines = [f"{fmt_bytes_decimal(t.model.file_bytes)} on disk, {fmt_bytes_decimal(t.model.size_bytes)} of JSON, "
             f"{t.model.n_events:,} events"]
    if h.device is not None:
        lines.append(f"device: {h.device}")
    vs = [f"{k.replace('_version', '').replace('_', ' ')} {_version(k, v)}" for k, v in h.versions.items()
          if k != "schemaVersion"]
    if vs:
        lines.append("versions: " + ", ".join(vs))
    if h.distributed:
        lines.append("distributed: " + ", ".join(f"{k} {v}" for k, v in h.distributed.items()
                                                 if not isinstance(v, (dict, list))))
    if t.model.window_source == "ProfilerStep":
        nums = [s.number for s in t.model.steps]
        span = f"#{nums[0]}..#{nums[-1]}" if len(nums) > 2 else ", ".join(f"#{n}" for n in nums)
        lines.append(f"profiled steps: {len(nums)} ({span}), window {fmt_us(t.window_us)}")
    else:
        lines.append(f"no ProfilerStep: one window of {fmt_us(t.window_us)} (all events)")
    return lines


def header_lines(t: Tables) -> list[str]:
    """The header as rich markup: the trace's path in bold, then :func:`header_facts`."""
    return [f"[bold]{escape(display_path(t.model.path))}[/]"] + [escape(x) for x in header_facts(t)]


ROUNDING_SHOWN_FROM = 0.1  # HTA's rounding to whole µs is worth a word when it moves busy time this much


def _unrounded(g) -> str:
    """Where HTA's rounding of each event to whole µs moves its busy time much (kernels of a few µs), the
    exact figure beside it."""
    exact, span = g.busy_exact_us, g.span_exact_us
    if g.hta_impossible or not exact or not span or abs(exact - g.busy_us) < ROUNDING_SHOWN_FROM * exact:
        return ""
    return (f" (HTA rounds each event inward to whole µs; unrounded: busy {fmt_us(exact)}, idle "
            f"{100 * (span - exact) / span:.2f}%)")


def _kineto_zero(t: Tables) -> str:
    """Where Kineto's occupancy reads 0 for a kernel by its 48 KB limit, a pointer to the footprint's."""
    zero = [k for k in t.kernels if k.kineto_shared_limit and not k.est_achieved_occupancy_pct]
    if not zero:
        return ""
    share = sum(k.share_pct for k in zero)
    return (f" (Kineto reads 0 for kernels over 48 KB of shared memory per block, {share:.0f}% of kernel "
            "time here: the launch estimates' footprint column has theirs)")


def headline_lines(t: Tables) -> list[str]:
    """The headline numbers in plain text, one line each."""
    g, c, d = t.numbers.gpu, t.numbers.cpu, t.numbers.device
    out = []
    if t.has_gpu:
        whose = ("unrounded (HTA's rounding to whole µs counts its sub-µs events negative here)" if g.hta_impossible
                 else "HTA (last step included)")
        out.append(f"GPU busy {g.busy_pct_of_window:.1f}% of the window ({fmt_us(g.busy_in_window_us)}); "
                   f"{whose}: busy {fmt_us(g.busy_us)} of a {fmt_us(g.span_us)} GPU span, "
                   f"idle {g.idle_pct:.2f}%" + _unrounded(g))
    overlap = g.comm_comp_overlap_pct
    if overlap is not None:
        out.append(f"communication kernels {fmt_us(g.communication_us)}; {overlap:.1f}% of their time overlaps "
                   f"computation kernels (HTA's comm/comp overlap, last step left out as HTA does)")
    threads = f" on {c.threads} threads" if c.threads > 1 else ""
    if d.self_device_total_us is None:
        out.append(f"Self CPU {fmt_us(c.self_cpu_total_us)}{threads}; no device time (CPU-only trace)")
    else:
        out.append(f"Self CPU {fmt_us(c.self_cpu_total_us)}{threads} vs self device "
                   f"{fmt_us(d.self_device_total_us)}"
                   + (f" (device/CPU {d.device_to_cpu_ratio:.3f})" if d.device_to_cpu_ratio is not None else ""))
    e = t.numbers.efficiency
    if e.gpu_utilization_pct is not None:
        out.append(f"TensorBoard{_aligned_words(t)}: GPU utilization {_pct(e.gpu_utilization_pct)}, "
                   f"Est. SM efficiency {_pct(e.est_sm_efficiency_pct)}, "
                   f"Est. achieved occupancy {_pct(e.est_achieved_occupancy_pct)}" + _kineto_zero(t))
    if e.kernel_weighted_sm_efficiency_pct is not None:
        out.append(f"per kernel time: SM efficiency {_pct(e.kernel_weighted_sm_efficiency_pct)} (not "
                   f"TensorBoard's), mean blocks/SM {e.mean_blocks_per_sm:.2f}, tensor-core kernel time "
                   f"{_pct(e.tensor_core_pct)}")
    return out


def _pct(value) -> str:
    return f"{value:.2f}%" if value is not None else "n/a"


def _aligned_words(t: Tables) -> str:
    """How the steps TensorBoard's figures use were made, in a few words."""
    tb = t.numbers.tensorboard
    if tb.steps != "device-aligned":
        return ""
    dropped = tb.steps_dropped
    tail = f"; {', '.join(d.replace('ProfilerStep', '') for d in dropped)} dropped: not all captured" if dropped else ""
    return f" (steps aligned to the GPU work they launched{tail})"


def _finding_line(f: Finding, hint: bool = True) -> str:
    style = {"warn": "yellow", "note": "cyan"}.get(f.level, "green")
    hint = f" [dim]→ {escape(f.hint)}[/]" if f.hint and hint else ""
    return f"[{style}]{f.rule}[/]: {escape(f.message)}{hint}"


def _indented(lines: list[str]):
    """Lines indented by two columns, their wrapped parts too."""
    return Padding(Text.from_markup("\n".join(lines)), (0, 0, 0, 2))


def _bullets(lines: list[str]):
    """Bullet points whose wrapped lines stay indented under their text (reads at 80 columns)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for line in lines:
        grid.add_row("  •", line)
    return grid


def _steps_table(t: Tables):
    """One row per step; device columns only when the trace has a device lane, the CPU work split
    (compute ops' share of the step) when it has none."""
    table = Table(title="steps")
    cols = ["step", "wall", "ops"] + (["kernels", "device time", "GPU busy"] if t.has_gpu else
                                      (["compute"] if t.cpu_work else []))
    gaps = any(r.annotation_gap_us is not None for r in t.step_rows)
    for col in cols + (["gap"] if gaps else []):
        table.add_column(col, justify="right" if col != "step" else "left", no_wrap=col != "gap")
    work = t.cpu_work.steps if t.cpu_work and not t.has_gpu else None
    for i, r in enumerate(t.step_rows[:40]):
        row = [r.name.replace("ProfilerStep", ""), fmt_us(r.wall_us), f"{r.ops:,}"]
        if t.has_gpu:
            row += [f"{r.kernels:,}", fmt_us(r.device_us),
                    f"{r.gpu_busy_pct:.1f}%" if r.gpu_busy_pct is not None else "-"]
        elif work:
            row.append(f"{work[i].compute_pct:.0f}%")
        if gaps:
            gap = r.annotation_gap_us
            row.append(f"{escape(str(r.annotation))} {fmt_us(gap)}" if gap is not None else "-")
        table.add_row(*row)
    notes = [f"{len(t.step_rows) - 40} more steps not shown"] if len(t.step_rows) > 40 else []
    if work:
        notes.append("compute: the compute ops' own share of the step (the rest is dispatch)")
    if gaps:
        notes.append("gap: from the annotation's start to its first aten op")
    if t.launched_outside is not None:
        notes.append(escape(t.launched_outside.said()))
    if t.lag.said():
        notes.append(escape(t.lag.said()))
    table.caption = "; ".join(notes) or None
    return table


def _breakdown_table(t: Tables):
    """TensorBoard's step breakdown; a CPU-only trace shows only the rows it can have."""
    table = Table(title="step time breakdown")
    table.add_column("category")
    table.add_column("time", justify="right")
    table.add_column("share", justify="right")
    total = t.breakdown.total
    keys = BREAKDOWN_KEYS if t.has_gpu else [k for k in BREAKDOWN_KEYS if getattr(t.breakdown, k)]
    for k in keys:
        v = getattr(t.breakdown, k)
        table.add_row(k, fmt_us(v), f"{100 * v / total:.1f}%" if total > 0 else "-")
    table.add_row("[bold]total[/]", fmt_us(total), "100%")
    return table


def breakdown_note(t: Tables) -> str:
    """What the breakdown counts, under its table."""
    if not t.has_gpu:
        return ("TensorBoard's breakdown: CPU exec is the operators' time; record_function annotations and "
                "Python between ops count as other")
    text = "TensorBoard's breakdown: each instant in the first of kernel > memcpy > memset > runtime > dataloader > " \
           "CPU exec > other"
    if t.numbers.tensorboard.steps == "device-aligned":
        text += ", over its steps: each runs until the GPU work it launched ends (the steps table: host walls)"
    dropped = t.numbers.tensorboard.steps_dropped
    return text + (f"; {', '.join(dropped)} left out: not all its GPU work was captured" if dropped else "")


def _name_width(console) -> int:
    """Room for a kernel name beside five number columns, at the console's width."""
    return max(24, min(70, console.width - 50))


def _kernels_table(t: Tables, top: int, name_width: int = 70):
    """The top kernels: calls, total, mean and median (the posts: the mean misleads), share."""
    table = Table(title=f"kernels (top {min(top, len(t.kernels))} of {len(t.kernels)} by total time)")
    for col in ("kernel", "calls", "total", "mean", "median", "share"):
        table.add_column(col, justify="left" if col == "kernel" else "right", no_wrap=col != "kernel",
                     min_width=24 if col == "kernel" else None, overflow="fold")
    for k in t.kernels[:top]:
        table.add_row(escape(trace_names.short_name(k.name, name_width)), f"{k.calls:,}", fmt_us(k.total_us), fmt_us(k.mean_us),
                  fmt_us(k.median_us), f"{k.share_pct:.1f}%")
    table.caption = "min, max and launch details per kernel: --json" + (
        f"; not counted: {t.launched_outside.what()} {t.launched_outside.where}" if t.launched_outside else "")
    return table


def _efficiency_table(t: Tables, top: int, name_width: int = 70):
    """TensorBoard's launch estimates per kernel, for the kernels whose events carry launch arguments."""
    pct = lambda v: f"{v:.0f}%" if v is not None else "-"  # noqa: E731
    table = Table(title="launch estimates (TensorBoard's, from the kernel events' arguments)")
    for col in ("kernel", "SM efficiency", "occupancy", "footprint", "blocks/SM"):
        table.add_column(col, justify="left" if col == "kernel" else "right", no_wrap=col != "kernel",
                     min_width=24 if col == "kernel" else None, overflow="fold")
    for k in t.kernels[:top]:
        bps = k.mean_blocks_per_sm
        table.add_row(escape(trace_names.short_name(k.name, name_width)), pct(k.est_sm_efficiency_pct),
                  pct(k.est_achieved_occupancy_pct), pct(k.footprint_occupancy_pct), f"{bps:.2f}" if bps is not None else "-")
    table.caption = escape(occupancy_caption(t.kernels[:top]))
    return table


def render(t: Tables, findings: list[Finding], console, top: int = 15, timeline_trace=None) -> None:
    """The full report; ``timeline_trace``: the annotated copy the findings' timeline commands open
    (default: the trace read)."""
    console.print(Panel("\n".join(header_lines(t)), title="trace report", expand=False))
    console.print(_indented([escape(x) for x in headline_lines(t)]))

    console.print(_steps_table(t))
    if t.phases:
        console.print(phases_table(t))
    console.print(_breakdown_table(t))
    console.print(_bullets([f"[dim]{escape(breakdown_note(t))}[/]"]))

    if t.has_gpu:
        table = Table(title="GPU time by category")
        for col in ("category", "events", "time", "share"):
            table.add_column(col, justify="left" if col == "category" else "right")
        for c in t.categories:
            table.add_row(c.label, f"{c.count:,}", fmt_us(c.time_us), f"{c.pct:.1f}%")
        console.print(table)

        console.print(_kernels_table(t, top, _name_width(console)))
        if any(k.est_sm_efficiency_pct is not None for k in t.kernels):
            console.print(_efficiency_table(t, top, max(24, min(70, console.width - 46))))

    ops = [o for o in t.ops if o.kind == "op"][:10]
    if ops:
        table = Table(title="ops (top 10 by CPU total)")
        cols = ("op", "calls", "CPU total", "self CPU") + (("self device",) if t.has_gpu else ())
        for col in cols:
            table.add_column(col, justify="left" if col == "op" else "right", overflow="fold")
        for o in ops:
            row = [escape(o.name[:70]), f"{o.calls:,}", fmt_us(o.cpu_total_us), fmt_us(o.self_cpu_us)]
            table.add_row(*row + ([fmt_us(o.self_device_us)] if t.has_gpu else []))
        console.print(table)
    render_memory(t, console)

    guessed = guess_table(t)
    if guessed is not None:
        console.print(guessed)

    _print_roofline(t, console)
    console.print(f"[bold]findings[/] ({len(findings)})")
    console.print(_bullets([_finding_line(f) for f in findings] + [f"[cyan]note[/]: {escape(n)}" for n in t.model.notes]))
    _print_timeline_commands(t, findings, console, timeline_trace)


def _print_timeline_commands(t: Tables, findings: list[Finding], console, trace=None) -> None:
    """Where each finding with spans points, as shell lines that open the timeline there. They copy whole:
    the commands fit the console, and a ``T=`` path too long for it is written on one line all the same
    (the terminal wraps it on screen; a folded path would break in the shell)."""
    lines = timeline_snippet(t, findings, trace, width=console.width - 2)
    if lines:
        console.print("[bold]on the timeline[/]: each command opens the trace where its finding points "
                      "(Perfetto's UI, served from this machine)")
        for line in lines:
            console.print(f"  [cyan]{escape(line)}[/]", soft_wrap=True)


def _print_roofline(t: Tables, console) -> None:
    from common.report.render.roofline import roofline_table  # lazy: 12 ms that --short does without (the full report's roofline table only)

    table = roofline_table(t.roofline, console.width)
    if table is not None:
        console.print(table)


SHORT_MOST = 5  # the short report's findings: one screen with the header and the guess
SAID_BY_THE_HEADER = ("no_device_lane",)  # the header's "device: none (no device lane ...)" says it already
# what nearly every run shows, whatever its lesson: after the findings that say what this run teaches
EVERY_RUN = frozenset({"hotspot_op", "hotspot_kernel", "children_heavy", "metadata_only_ops", "matmul_dispatch",
                       "occupancy_query", "gemm_kernels"})
# true of this run, but of the way it ran more than of what it teaches: after the lesson's own findings
INCIDENTAL = frozenset({"many_calls", "long_final_sync", "activity_buffer_request", "large_trace", "gpu_behind_host"})


def short_findings(t: Tables, findings: list[Finding]) -> list[Finding]:
    """The findings the short report shows, at most SHORT_MOST: those that say what this run teaches (the
    warnings first, then the report's order), then the incidental ones (INCIDENTAL: how it ran), then what
    nearly every run shows (EVERY_RUN); none the header already says (a CPU-only trace's missing device lane)."""
    said = set(SAID_BY_THE_HEADER) if not t.has_gpu else set()
    kept = [f for f in findings if f.rule not in said]
    return sorted(kept, key=lambda f: (f.rule in EVERY_RUN, f.rule in INCIDENTAL, f.level != "warn"))[:SHORT_MOST]


def render_short(t: Tables, findings: list[Finding], console) -> None:
    """Compact, one screen: header, headline numbers, the guess, the first findings (the warnings first)."""
    console.print(f"[bold]trace report[/] {escape(display_path(t.model.path))}")
    console.print(_indented([escape(x) for x in header_facts(t)[1:] + headline_lines(t)]))
    if t.model.window_source == "ProfilerStep" and t.step_rows:
        steps = ", ".join(f"{r.name.replace('ProfilerStep', '')} {fmt_us(r.wall_us)}" for r in t.step_rows[:8])
        console.print(f"  step wall times: {steps}")
    if t.phases:
        console.print("  " + escape(phases_line(t)))
    guessed = guess_table(t)
    if guessed is not None:
        console.print(guessed)
    if short_line(t):
        console.print("  " + escape(short_line(t)))
    shown = short_findings(t, findings)
    # the evidence, without the hints: the full report has those, and the findings left out here
    console.print(_bullets([_finding_line(f, hint=False) for f in shown]))
    rest = [f.rule for f in findings if f not in shown and f.rule not in SAID_BY_THE_HEADER]
    if rest:
        console.print(f"  [dim]{len(rest)} more in the full report: {escape(', '.join(rest))}[/]")
    if findings:
        console.print("  [dim]full report with what to try:[/]")
        console.print(f"  [cyan]{escape(uv_run('-m', 'common.report', Path(t.model.path)))}[/]", soft_wrap=True)


# ----------------------------------------------------------------------------- phases (per annotation)


def phases_table(t: Tables):
    """The per-annotation table: what one call of each phase costs and dispatches. On a GPU trace the
    first time is the device time of the work a call launched (its median call), then the CPU's wall."""
    table = Table(title="annotations (per call)",
              caption="kernels and device time: the work launched from inside a call (median call); "
                      "CPU wall: the call's host time (mean)" if t.has_gpu else "CPU wall: the call's host time (mean)")
    cols = ["annotation", "calls"] + (["device time"] if t.has_gpu else []) + ["CPU wall", "ops"] + (
        ["kernels", "GPU busy"] if t.has_gpu else [])
    for col in cols:
        table.add_column(col, justify="left" if col == "annotation" else "right", overflow="fold")
    for p in t.phases[:20]:
        device = [fmt_us(p.device_median_us) if p.device_median_us is not None else "-"] if t.has_gpu else []
        row = [escape(p.name[:60]), f"{p.calls:,}", *device, fmt_us(p.mean_us), f"{p.ops_per_call:,.0f}"]
        if t.has_gpu:
            row += [f"{p.kernels_per_call:,.0f}", f"{p.gpu_busy_pct:.1f}%" if p.gpu_busy_pct is not None else "-"]
        table.add_row(*row)
    if len(t.phases) > 20:
        table.caption = f"{len(t.phases) - 20} more annotations in --json"
    return table


def phases_line(t: Tables, most: int = 4) -> str:
    """The phases in one line: calls, the time per call (on a GPU trace the device time of the work a
    call launched, median call, with the CPU's wall time beside it, named), ops per call and GPU busy. Each
    time says what it is (median, mean): the mean counts the profiler's wide first recorded step in."""
    parts = []
    for p in t.phases[:most]:
        busy = f", GPU busy {p.gpu_busy_pct:.0f}%" if p.gpu_busy_pct is not None else ""
        time = (f"device {fmt_us(p.device_median_us)} median, CPU {fmt_us(p.mean_us)} mean"
                if p.device_median_us is not None else f"{fmt_us(p.mean_us)} mean")
        parts.append(f"{p.name} {p.calls:,}x {time} ({p.ops_per_call:,.0f} ops{busy})")
    more = f" (+{len(t.phases) - most} more)" if len(t.phases) > most else ""
    return "per call: " + "; ".join(parts) + more
