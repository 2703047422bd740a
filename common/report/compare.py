"""Two traces side by side (eager vs compile is the common case).

Per step: CPU (wall) time and device time and their ratio B/A, kernels per step; kernel names
only in A, only in B, in both (with the change in total time); ops that vanished or appeared.
The summary compares medians, not means (one slow step moves a mean of three; P1.14), shows each
run's range, and judges the ratio only when the two runs' steps are clearly apart: every step of
one run faster than every step of the other, by more than either run's own spread, and neither run
too noisy (steadiness.TwoRuns) nor called noisy by its own report (the noisy_steps rule). Otherwise
the verdict is "cannot tell" and why, with the numbers: one stalled step never makes a 200x claim.
"""

from __future__ import annotations

from common.commands import display_path
from common.report import names as trace_names
from common.report.model import STEP_RE
from common.report.tables import Tables
from common.report.units import fmt_us, json_ready
from common.report.steadiness import Spread, TwoRuns


def _per_step(t: Tables) -> dict:
    rows = t.step_rows
    return dict(
        steps=len(rows),
        cpu=Spread(tuple(r.wall_us for r in rows)),
        device=Spread(tuple(r.device_us for r in rows)) if t.has_gpu else None,
        kernels=Spread(tuple(float(r.kernels) for r in rows)),
    )


def _own_noise(t: Tables, name: str) -> str | None:
    """Why the run's own report calls its timings noise (its noisy_steps finding), or None."""
    from common.report.rules.timeline import noisy_steps

    finding = noisy_steps(t)
    return f"{name}'s own report calls its timings noise ({finding.message.split('; ')[0]})" if finding else None


def _side_by_side(what: str, a: Spread | None, b: Spread | None, noise: str | None) -> dict | None:
    """Medians, ranges, the ratio of medians, whether it can be judged and the verdict line; None
    without data. ``noise``: why a run's own report calls its timings noise."""
    if a is None or b is None or not a.values or not b.values:
        return None
    two = TwoRuns(a, b)
    why = two.why_not_apart or noise
    side = dict(a_median_us=a.median, b_median_us=b.median, a_range_us=[a.low, a.high], b_range_us=[b.low, b.high],
                ratio=two.ratio, inside_noise=why is not None, judged=why is None and two.ratio is not None)
    return dict(side, verdict=_verdict(what, side, why))


def compare(a: Tables, b: Tables) -> dict:
    sa, sb = _per_step(a), _per_step(b)
    steps = []
    for i in range(max(len(a.step_rows), len(b.step_rows))):
        ra = a.step_rows[i] if i < len(a.step_rows) else None
        rb = b.step_rows[i] if i < len(b.step_rows) else None
        steps.append(dict(
            a=ra.name if ra else None, b=rb.name if rb else None,
            a_cpu_us=ra.wall_us if ra else None, b_cpu_us=rb.wall_us if rb else None,
            cpu_ratio=(rb.wall_us / ra.wall_us) if ra and rb and ra.wall_us > 0 else None,
            a_device_us=ra.device_us if ra else None, b_device_us=rb.device_us if rb else None,
            device_ratio=(rb.device_us / ra.device_us) if ra and rb and ra.device_us > 0 else None,
            a_kernels=ra.kernels if ra else None, b_kernels=rb.kernels if rb else None,
        ))
    noise = _own_noise(a, "A") or _own_noise(b, "B")
    cpu = _side_by_side("CPU", sa["cpu"], sb["cpu"], noise)
    device = _side_by_side("device", sa["device"], sb["device"], None)  # noisy_steps reads the host's steps
    ka = {k.name: k for k in a.kernels}
    kb = {k.name: k for k in b.kernels}
    na, nb = max(sa["steps"], 1), max(sb["steps"], 1)
    both = [dict(name=n, a_total_us=ka[n].total_us, b_total_us=kb[n].total_us,
                 a_per_step_us=ka[n].total_us / na, b_per_step_us=kb[n].total_us / nb,
                 change_pct=(100 * (kb[n].total_us / nb - ka[n].total_us / na) / (ka[n].total_us / na))
                 if ka[n].total_us > 0 else None)
            for n in ka if n in kb]
    only_a = [dict(name=n, calls=ka[n].calls, total_us=ka[n].total_us) for n in ka if n not in kb]
    only_b = [dict(name=n, calls=kb[n].calls, total_us=kb[n].total_us) for n in kb if n not in ka]
    oa = {o.name: o for o in a.ops if not STEP_RE.match(o.name)}
    ob = {o.name: o for o in b.ops if not STEP_RE.match(o.name)}
    vanished = sorted(({"name": n, "calls": oa[n].calls} for n in oa if n not in ob), key=lambda r: -r["calls"])
    appeared = sorted(({"name": n, "calls": ob[n].calls} for n in ob if n not in oa), key=lambda r: -r["calls"])
    return json_ready(dict(
        a=a.model.path, b=b.model.path,
        summary=dict(
            a_steps=sa["steps"], b_steps=sb["steps"], cpu=cpu, device=device,
            a_kernels_per_step=sa["kernels"].median, b_kernels_per_step=sb["kernels"].median,
        ),
        steps=steps,
        kernels=dict(only_a=only_a, only_b=only_b, both=both),
        ops=dict(vanished=vanished, appeared=appeared),
    ))


def _verdict(what: str, side: dict, why: str | None) -> str:
    """One line: ``CPU per step: B's median is 0.38x A's (...), and every B step is faster ...``, or
    ``CPU per step: cannot tell which run is faster: <why> (medians ...)``."""
    medians = f"{fmt_us(side['a_median_us'])} vs {fmt_us(side['b_median_us'])}"
    if why is not None or side["ratio"] is None:
        return f"{what} per step: cannot tell which run is faster: {why or 'A has no time'} (medians A vs B: {medians})"
    faster = "B" if side["ratio"] < 1 else "A"
    return (f"{what} per step: B's median is {side['ratio']:.2f}x A's ({medians}), and every {faster} step is "
            f"faster than every step of the other, by more than either run's spread "
            f"(A {fmt_us(side['a_range_us'][0])}-{fmt_us(side['a_range_us'][1])}, "
            f"B {fmt_us(side['b_range_us'][0])}-{fmt_us(side['b_range_us'][1])})")


STEP_ROWS = 20  # the console's step table shows the first this many steps (--json and the page: every one)


def _step_table(c: dict, with_device: bool):
    from rich import box
    from rich.table import Table

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
        judged = lambda side: fmt(side["ratio"]) if side["judged"] else "?"  # noqa: E731  (the verdict says why)
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


def render_compare(c: dict, console) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    s = c["summary"]
    with_device = s["device"] is not None
    console.print(f"[bold]compare[/]  A = {escape(display_path(c['a']))}")
    console.print(f"          B = {escape(display_path(c['b']))}")
    console.print(f"steps: A {_step_names(c, 'a')}, B {_step_names(c, 'b')}, side by side in order")
    console.print("per step: CPU = the step's wall time" + (
        "; dev = kernel/memcpy/memset time it launched" if with_device else " (CPU-only traces: no device columns)"))
    console.print(_step_table(c, with_device))
    if len(c["steps"]) > STEP_ROWS:
        console.print(f"[dim]the first {STEP_ROWS} of {len(c['steps']):,} steps; the median row and the verdict read "
                      "every step (--json and --html list them all)[/]")
    if with_device:
        console.print(f"kernels per step (median): A {s['a_kernels_per_step']:g}, B {s['b_kernels_per_step']:g}")
    for side in filter(None, (s["cpu"], s["device"])):
        console.print(escape(side["verdict"]))
    k = c["kernels"]
    if k["both"] or k["only_a"] or k["only_b"]:
        t = Table(title="kernels", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False)
        for col in ("", "kernel", "A/step", "B/step", "change"):
            t.add_column(col, justify="left" if col in ("", "kernel") else "right",
                         no_wrap=col != "kernel", overflow="fold")
        for r in sorted(k["both"], key=lambda r: -r["a_total_us"])[:15]:
            t.add_row("both", escape(trace_names.short_name(r["name"], 34)), fmt_us(r["a_per_step_us"]), fmt_us(r["b_per_step_us"]),
                      f"{r['change_pct']:+.1f}%" if r["change_pct"] is not None else "-")
        for r in sorted(k["only_a"], key=lambda r: -r["total_us"])[:10]:
            t.add_row("only A", escape(trace_names.short_name(r["name"], 34)), fmt_us(r["total_us"]), "-", "gone")
        for r in sorted(k["only_b"], key=lambda r: -r["total_us"])[:10]:
            t.add_row("only B", escape(trace_names.short_name(r["name"], 34)), "-", fmt_us(r["total_us"]), "new")
        console.print(t)
    else:
        console.print("kernels: none in either trace (no device lane)")
    o = c["ops"]
    van = ", ".join(f"{escape(r['name'])} ({r['calls']}x)" for r in o["vanished"][:12]) or "none"
    app = ", ".join(f"{escape(r['name'])} ({r['calls']}x)" for r in o["appeared"][:12]) or "none"
    console.print(f"ops only in A (vanished in B): {van}")
    console.print(f"ops only in B (appeared): {app}")
