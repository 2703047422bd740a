"""A comparison of two runs (:func:`common.report.compare.judge.compare`'s dict) as rich text, for people at a
terminal: the steps side by side with the medians and the verdicts, the device work and the ops that changed
(the HTML page's tables use :func:`device_work_rows` and :func:`op_rows` too)."""

from __future__ import annotations

from common.commands import display_path
from common.report.model import names as trace_names
from common.report.compare.rows import differing
from common.report.units import fmt_us


STEP_ROWS = 20  # the console's step table shows the first this many steps (--json and the page: every one)


def _step_table(c: dict, with_device: bool):
    from rich import box  # lazy: rich, about 100 ms: --json never loads it
    from rich.table import Table  # lazy: rich, about 100 ms: --json never loads it

    t = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    cols = ["step", "CPU A", "CPU B", "B/A"] + (["dev A", "dev B", "B/A"] if with_device else [])
    for col in cols:
        t.add_column(col, justify="left" if col == "step" else "right", no_wrap=True)
    fmt = lambda r: f"{r:.2f}x" if r is not None else "-"  # noqa: E731
    for i, r in enumerate(c["steps"][:STEP_ROWS]):
        row = [str(i + 1), fmt_us(r["a_cpu_us"]), fmt_us(r["b_cpu_us"]), fmt(r["cpu_ratio"])]
        if with_device:
            row += [fmt_us(r["a_device_us"]), fmt_us(r["b_device_us"]), fmt(r["device_ratio"])]
        t.add_row(*row)
    if len(c["steps"]) > STEP_ROWS:
        t.add_row(f"[dim]+{len(c['steps']) - STEP_ROWS:,}[/]", *["[dim]…[/]"] * (len(cols) - 1))
    s = c["summary"]
    cpu, dev = s["cpu"], s["device"]
    if cpu:
        def judged(side: dict) -> str:  # "?" where not judged (the verdict says why); "≥" at the nearest steps
            if not side["judged"]:
                return "?"
            bound = ("≥" if side["ratio"] > 1 else "≤") if side.get("at_least") else ""
            return bound + fmt(side["ratio"])
        row = ["[bold]median[/]", fmt_us(cpu["a_median_us"]), fmt_us(cpu["b_median_us"]), judged(cpu)]
        if with_device:
            row += [fmt_us(dev["a_median_us"]), fmt_us(dev["b_median_us"]), judged(dev)] if dev else ["-"] * 3
        t.add_row(*row)
    return t


def _step_names(c: dict, side: str) -> str:
    names = [str(r[side]).replace("ProfilerStep", "") for r in c["steps"] if r[side]]
    if not names:
        return "none"
    return f"{names[0]}..{names[-1]}" if len(names) > 2 else ", ".join(names)


def _calls(a: float, b: float) -> str:
    return f"{a:g}" if a == b else f"{a:g}→{b:g}"


def _change(a_us: float, b_us: float) -> str:
    return f"{100 * (b_us - a_us) / a_us:+.1f}%" if a_us > 0 and b_us > 0 else "gone" if a_us > 0 else "new"


def _work_line(c: dict) -> str:
    """``per step (median): A 5 kernels, 1 memcpy, 1 memset; B 5 kernels, 1 memset``."""
    rows = [r for key in ("both", "changed", "only_a", "only_b") for r in c["kernels"][key]]

    def side(x: str) -> str:
        counts = {}
        for r in rows:
            counts[r["kind"]] = counts.get(r["kind"], 0) + r[f"{x}_calls_per_step"]
        parts = [f"{n:g} {kind}{'s' if n != 1 else ''}" for kind, n in sorted(counts.items()) if n]
        return ", ".join(parts) or "no device work"
    return f"device work per step (median): A {side('a')}; B {side('b')}"


def device_work_rows(c: dict, width: int = 31) -> list[list[str]]:
    """The device work table's rows: what, name, calls per step, A and B per step, change (the changed
    GEMM's name ends with what differs: ``(bz → badd)``)."""
    k = c["kernels"]
    out = []
    for what, key, most in (("both", "both", 12), ("changed", "changed", 6), ("gone", "only_a", 8), ("new", "only_b", 8)):
        for r in k[key][:most]:
            name = r["name"]
            if key == "changed":
                differs = f" ({' '.join(differing(name, r['b_name']))} → {' '.join(differing(r['b_name'], name))})"
                name = trace_names.short_name(name, max(width - len(differs), 12)) + differs
            else:
                name = trace_names.short_name(name, width)
            out.append([what, name, _calls(r["a_calls_per_step"], r["b_calls_per_step"]),
                        fmt_us(r["a_per_step_us"]) if r["a_calls_per_step"] else "-",
                        fmt_us(r["b_per_step_us"]) if r["b_calls_per_step"] else "-",
                        _change(r["a_per_step_us"], r["b_per_step_us"])])
    return out


def op_rows(c: dict, with_device: bool, most: int = 12) -> list[list[str]]:
    """The changed ops' rows: op, calls per step (A→B), CPU per step A and B, device per step A and B."""
    out = []
    for r in c["ops"]["changed"][:most]:
        row = [r["name"], _calls(r["a_calls_per_step"], r["b_calls_per_step"]),
               fmt_us(r["a_cpu_us"]) if r["a_calls_per_step"] else "-", fmt_us(r["b_cpu_us"]) if r["b_calls_per_step"] else "-"]
        if with_device:
            row += [fmt_us(r["a_device_us"]) if r["a_device_us"] else "-", fmt_us(r["b_device_us"]) if r["b_device_us"] else "-"]
        out.append(row)
    return out


def _table(title: str, cols: list[str], rows: list[list[str]], text_cols: int):
    from rich import box  # lazy: rich, about 100 ms: --json never loads it
    from rich.markup import escape  # lazy: rich, about 100 ms: --json never loads it
    from rich.table import Table  # lazy: rich, about 100 ms: --json never loads it

    t = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
    for i, col in enumerate(cols):
        t.add_column(col, justify="left" if i < text_cols else "right", no_wrap=i != text_cols - 1, overflow="fold")
    for row in rows:
        t.add_row(*(escape(x) for x in row))
    return t


def left_out_line(s: dict) -> str:
    """``leave out the profiler's first step (A #2, B #2), which the profiler starting may widen: here A's
    took 2.10x the others' median, B's 0.98x``; empty when no step is left out."""
    runs = [x for x in ("A", "B") if s[f"{x.lower()}_left_out"]]
    if not runs:
        return ""
    named = ", ".join(f"{x} {', '.join(n.replace('ProfilerStep', '') for n in s[f'{x.lower()}_left_out'])}"
                      for x in runs)
    ratios = [(x, s[f"{x.lower()}_first_ratio"]) for x in runs if s.get(f"{x.lower()}_first_ratio") is not None]
    here = ""
    if ratios:
        (first, ratio), rest = ratios[0], ratios[1:]
        here = f": here {first}'s took {ratio:.2f}x the others' median" + "".join(f", {x}'s {r:.2f}x" for x, r in rest)
    return f"leave out the profiler's first step ({named}), which the profiler starting may widen{here}"


def render_compare(c: dict, console) -> None:
    from rich.markup import escape  # lazy: rich, about 100 ms: --json never loads it

    s = c["summary"]
    with_device = s["device"] is not None
    console.print(f"[bold]compare[/]  A = {escape(display_path(c['a']))}")
    console.print(f"          B = {escape(display_path(c['b']))}")
    if s.get("unlike"):
        console.print(f"[yellow]unlike runs:[/] {escape(s['unlike'])}")
    console.print(f"steps: A {_step_names(c, 'a')}, B {_step_names(c, 'b')}, side by side in order")
    left = left_out_line(s)
    if left:
        console.print(f"the medians, the verdicts and every per-step figure below {escape(left)}")
    console.print("per step: CPU = the step's wall time" + (
        "; dev = kernel/memcpy/memset time it launched" if with_device else " (CPU-only traces: no device columns)"))
    console.print(_step_table(c, with_device))
    if len(c["steps"]) > STEP_ROWS:
        console.print(f"[dim]the first {STEP_ROWS} of {len(c['steps']):,} steps; the median row and the verdict read "
                      "every step (--json and --html list them all)[/]")
    if with_device:
        console.print(_work_line(c))
    for side in filter(None, (s["cpu"], s["device"])):
        console.print(escape(side["verdict"]))
    rows = device_work_rows(c)
    if rows:
        console.print(_table("device work per step (median)", ["", "kernel / memcpy / memset", "calls", "A", "B",
                                                               "change"], rows, 2))
    elif not with_device:
        console.print("device work: none in either trace (no device lane)")
    rows = op_rows(c, with_device)
    cols = ["op", "calls", "CPU A", "CPU B"] + (["dev A", "dev B"] if with_device else [])
    if rows:
        console.print(_table("ops whose calls" + (" or device time" if with_device else "") + " changed, per step "
                             "(median)", cols, rows, 1))
    else:
        console.print("ops: the same ops, as many calls per step, in both runs")
