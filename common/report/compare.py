"""Two traces side by side (eager vs compile is the common case).

Per step: CPU (wall) time and device time and their ratio B/A, kernels per step; kernel names
only in A, only in B, in both (with the change in total time); ops that vanished or appeared.
"""

from __future__ import annotations

from common.report import names as N
from common.report.model import STEP_RE, Model
from common.report.render import _clean
from common.report.rules import us


def _per_step(m: Model) -> dict:
    rows = m.step_rows
    n = max(len(rows), 1)
    return dict(
        steps=len(rows),
        cpu_us=[r["wall_us"] for r in rows],
        device_us=[r["device_us"] for r in rows],
        kernels=[r["kernels"] for r in rows],
        mean_cpu_us=sum(r["wall_us"] for r in rows) / n,
        mean_device_us=sum(r["device_us"] for r in rows) / n,
        mean_kernels=sum(r["kernels"] for r in rows) / n,
    )


def compare(a: Model, b: Model) -> dict:
    sa, sb = _per_step(a), _per_step(b)
    steps = []
    for i in range(max(len(a.step_rows), len(b.step_rows))):
        ra = a.step_rows[i] if i < len(a.step_rows) else None
        rb = b.step_rows[i] if i < len(b.step_rows) else None
        steps.append(dict(
            a=ra["name"] if ra else None, b=rb["name"] if rb else None,
            a_cpu_us=ra["wall_us"] if ra else None, b_cpu_us=rb["wall_us"] if rb else None,
            cpu_ratio=(rb["wall_us"] / ra["wall_us"]) if ra and rb and ra["wall_us"] > 0 else None,
            a_device_us=ra["device_us"] if ra else None, b_device_us=rb["device_us"] if rb else None,
            device_ratio=(rb["device_us"] / ra["device_us"]) if ra and rb and ra["device_us"] > 0 else None,
            a_kernels=ra["kernels"] if ra else None, b_kernels=rb["kernels"] if rb else None,
        ))
    ka = {k["name"]: k for k in a.kernels}
    kb = {k["name"]: k for k in b.kernels}
    na, nb = max(sa["steps"], 1), max(sb["steps"], 1)
    both = [dict(name=n, a_total_us=ka[n]["total_us"], b_total_us=kb[n]["total_us"],
                 a_per_step_us=ka[n]["total_us"] / na, b_per_step_us=kb[n]["total_us"] / nb,
                 change_pct=(100 * (kb[n]["total_us"] / nb - ka[n]["total_us"] / na) / (ka[n]["total_us"] / na))
                 if ka[n]["total_us"] > 0 else None)
            for n in ka if n in kb]
    only_a = [dict(name=n, calls=ka[n]["calls"], total_us=ka[n]["total_us"]) for n in ka if n not in kb]
    only_b = [dict(name=n, calls=kb[n]["calls"], total_us=kb[n]["total_us"]) for n in kb if n not in ka]
    oa = {o["name"]: o for o in a.ops if not STEP_RE.match(o["name"])}
    ob = {o["name"]: o for o in b.ops if not STEP_RE.match(o["name"])}
    vanished = sorted(({"name": n, "calls": oa[n]["calls"]} for n in oa if n not in ob), key=lambda r: -r["calls"])
    appeared = sorted(({"name": n, "calls": ob[n]["calls"]} for n in ob if n not in oa), key=lambda r: -r["calls"])
    ratio = lambda x, y: (y / x) if x else None  # noqa: E731
    return _clean(dict(
        a=a.path, b=b.path,
        summary=dict(
            a_steps=sa["steps"], b_steps=sb["steps"],
            a_mean_cpu_us=sa["mean_cpu_us"], b_mean_cpu_us=sb["mean_cpu_us"],
            cpu_ratio=ratio(sa["mean_cpu_us"], sb["mean_cpu_us"]),
            a_mean_device_us=sa["mean_device_us"], b_mean_device_us=sb["mean_device_us"],
            device_ratio=ratio(sa["mean_device_us"], sb["mean_device_us"]),
            a_kernels_per_step=sa["mean_kernels"], b_kernels_per_step=sb["mean_kernels"],
        ),
        steps=steps,
        kernels=dict(only_a=only_a, only_b=only_b, both=both),
        ops=dict(vanished=vanished, appeared=appeared),
    ))


def render_compare(c: dict, console) -> None:
    from rich.markup import escape
    from rich.table import Table

    s = c["summary"]
    console.print(f"[bold]compare[/]  A = {escape(c['a'])}\n          B = {escape(c['b'])}")
    t = Table(title="per step (CPU = the step's wall time; device = kernel/memcpy/memset time launched in it)")
    for col in ("step A", "step B", "CPU A", "CPU B", "B/A", "device A", "device B", "B/A", "kernels A", "kernels B"):
        t.add_column(col, justify="left" if col.startswith("step") else "right")
    fmt = lambda r: f"{r:.2f}x" if r is not None else "-"  # noqa: E731
    for r in c["steps"]:
        t.add_row(str(r["a"]), str(r["b"]), us(r["a_cpu_us"]), us(r["b_cpu_us"]), fmt(r["cpu_ratio"]),
                  us(r["a_device_us"]), us(r["b_device_us"]), fmt(r["device_ratio"]),
                  str(r["a_kernels"]), str(r["b_kernels"]))
    t.add_row("[bold]mean[/]", "", us(s["a_mean_cpu_us"]), us(s["b_mean_cpu_us"]), fmt(s["cpu_ratio"]),
              us(s["a_mean_device_us"]), us(s["b_mean_device_us"]), fmt(s["device_ratio"]),
              f"{s['a_kernels_per_step']:.1f}", f"{s['b_kernels_per_step']:.1f}")
    console.print(t)
    k = c["kernels"]
    t = Table(title="kernels")
    for col in ("", "kernel", "A per step", "B per step", "change"):
        t.add_column(col, justify="right" if col in ("A per step", "B per step", "change") else "left")
    for r in sorted(k["both"], key=lambda r: -r["a_total_us"])[:15]:
        t.add_row("both", escape(N.short_name(r["name"], 70)), us(r["a_per_step_us"]), us(r["b_per_step_us"]),
                  f"{r['change_pct']:+.1f}%" if r["change_pct"] is not None else "-")
    for r in sorted(k["only_a"], key=lambda r: -r["total_us"])[:10]:
        t.add_row("only A", escape(N.short_name(r["name"], 70)), us(r["total_us"]), "-", "gone")
    for r in sorted(k["only_b"], key=lambda r: -r["total_us"])[:10]:
        t.add_row("only B", escape(N.short_name(r["name"], 70)), "-", us(r["total_us"]), "new")
    if k["both"] or k["only_a"] or k["only_b"]:
        console.print(t)
    else:
        console.print("kernels: none in either trace (no device lane)")
    o = c["ops"]
    van = ", ".join(f"{escape(r['name'])} ({r['calls']}x)" for r in o["vanished"][:12]) or "none"
    app = ", ".join(f"{escape(r['name'])} ({r['calls']}x)" for r in o["appeared"][:12]) or "none"
    console.print(f"ops only in A (vanished in B): {van}")
    console.print(f"ops only in B (appeared): {app}")
