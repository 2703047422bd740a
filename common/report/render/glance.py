"""The glance table, for people setting a lesson's variants side by side: a few lines per trace (or JSON),
as the posts' closing tables do.

``uv run -m common.report --glance traces/04_a_naive_attention traces/04_c_sdpa_attention`` reads
every trace under the folders (and the files named; a file that is not a trace is skipped and
named, and the ``-o`` output is never read) and prints, per trace, in the posts' order (the lessons
in the order the posts run them; Part 3's backends math, efficient, flash, cuDNN; eager before
compiled):

- the variant: the lesson and its tag (``04_c_sdpa_attention backend-math``);
- per call of the lesson's annotation (its guess's, else the only one; else per step): the ops
  dispatched (every CPU op nested in a call) and the work (on the CPU the compute ops, outermost,
  :mod:`~common.report.facts.calls`; on a GPU the kernels launched);
- the time per call (per step where there is no annotation to read): on a trace with device work, the
  device time of the work a call (step) launched (by correlation id; median and range), with its CPU
  (wall) time beside it; on a CPU trace the wall time, said so. The CPU times are the calls in the steps ``--compare`` judges (the profiler's first
  left out in a run of 3 or more: one median for both, said once). A range wider than 2x its low end
  is flagged noisy;
- against the variant before it, when it ran the same workload (shape, dtype, device): the device
  work gone, new or changed, and the time per step judged as ``--compare`` judges it, with the same
  control (:mod:`common.report.compare.variants` judges it; this module shows it);
- the lesson: the first finding of the ones that teach a variant (a finding that says its point does
  not apply to this run, a note, is passed over).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from common.report.compare.rows import judged_steps
from common.report.facts import knob_work
from common.report.model.names import short_name
from common.report.facts.steadiness import Spread
from common.report.facts.tables import Tables
from common.report.units import fmt_us

# the findings that say what a variant teaches, most specific first
LESSON_RULES = ("out_of_place_copy", "fp32_upcast", "causal_mask_rebuilt", "safe_softmax", "fused_attention",
                "guess_vs_seen", "hand_written_kernels", "fused_kernels", "linear_chain", "torch_compile",
                "overhead_bound_phase", "overhead_bound", "compute_bound", "device_bound", "addmm_vs_mm_add",
                "cold_first_step")
# the posts' order: the lessons as the posts run them (knob_work.LESSON_ORDER), Part 3's SDPA backends as its table lists them
BACKEND_ORDER = ("math", "efficient", "flash", "cudnn", "auto")


@dataclass(frozen=True)
class GlanceRow:
    trace: str  # the path as given or found
    variant: str  # the lesson and its tag, or the file name
    per: str  # the annotation a row's figures are per call of, or "step"
    calls: int
    ops_per_call: Optional[float]
    work_per_call: Optional[float]
    work_unit: str  # "compute ops" | "kernels"
    median_us: float  # the headline time per call (step): device time on a trace with device work, else CPU (wall)
    low_us: float
    high_us: float
    noisy: bool
    lesson: str  # "rule: message", or ""
    time: str = "cpu"  # what median/low/high_us measure: "device" (the work a call launched) or "cpu" (wall)
    cpu_median_us: Optional[float] = None  # the calls' (steps') CPU (wall) time, median, beside a device time
    versus: Optional[dict] = None  # against the variant before it (same workload): see :func:`versus`

    def to_json(self) -> dict:
        return asdict(self)


def variant_of(t: Tables) -> str:
    """The lesson and its tag (``04_c_sdpa_attention backend-math``), else the file's name."""
    k = t.knobs
    return f"{k.script} {k.tag}" if k is not None else Path(t.model.path).name


def order_key(t: Tables, path: str) -> tuple:
    """Where a trace sits in the posts' order: its lesson, its backend, eager before compiled, its tag."""
    k = t.knobs
    if k is None:
        return (len(knob_work.LESSON_ORDER) + 1, 0, 0, path)
    lesson = knob_work.lesson_rank(k)
    backend = k.variants.get("backend", "") if isinstance(k.variants, dict) else ""
    rank = BACKEND_ORDER.index(backend) if backend in BACKEND_ORDER else len(BACKEND_ORDER)
    return (lesson, rank, int(k.compile), k.tag)


def _per_call(t: Tables):
    """The annotation the figures are per call of, with its phase row (None: per step)."""
    wanted = t.guess.guess.annotation if t.guess is not None else None
    if wanted is None and len(t.phases) == 1:
        wanted = t.phases[0].name
    return next((p for p in t.phases if p.name == wanted), None)


def _in_judged_steps(t: Tables, spans: tuple) -> tuple:
    """The calls that start in a step --compare judges (every step but the profiler's first, in a run of 3
    or more): one median definition for the glance and the compare. All of them in a trace without steps."""
    steps = [t.model.steps[i] for i in judged_steps(t).tolist() if i < len(t.model.steps)]
    if t.model.window_source != "ProfilerStep" or not steps:
        return spans
    return tuple(s for s in spans if any(st.start <= s.start_us < st.end for st in steps)) or spans


def lesson_of(findings: list) -> str:
    """The first finding that teaches the variant: a note (its point does not apply to this run) and a
    guess that matched (nothing to learn from the mismatch) are passed over."""
    by_rule = {f.rule: f for f in findings}
    for rule in LESSON_RULES:
        f = by_rule.get(rule)
        if f is None or f.level == "note" or (rule == "guess_vs_seen" and f.level != "warn"):
            continue
        return f"{rule}: {f.message}"
    return ""


def glance_row(t: Tables, findings: list, path: str, versus: Optional[dict] = None) -> GlanceRow:
    phase = _per_call(t)
    cpu_median = None
    if phase is not None:
        spans = _in_judged_steps(t, t.per_phase.spans.get(phase.name, ()))
        cpu = Spread(tuple(s.dur_us for s in spans))
        work = (phase.kernels_per_call if t.has_gpu else
                t.guess.work.mean_items if t.guess is not None and t.guess.work.annotation == phase.name else None)
        per, calls, ops = phase.name, phase.calls, phase.ops_per_call
        if phase.device_median_us is not None and phase.device_high_us > 0:
            times = Spread((phase.device_low_us, phase.device_median_us, phase.device_high_us))
            time, cpu_median = "device", cpu.median
        else:
            times, time = cpu, "cpu"
    else:
        judged = [t.step_rows[i] for i in judged_steps(t).tolist()]
        times, time = Spread(tuple(r.wall_us for r in judged)), "cpu"
        per, calls, ops, work = "step", len(t.step_rows), None, None
        if t.has_gpu and judged and max(r.device_us for r in judged) > 0:
            times, time, cpu_median = Spread(tuple(r.device_us for r in judged)), "device", times.median
    return GlanceRow(path, variant_of(t), per, calls, ops, work, "kernels" if t.has_gpu else "compute ops",
                     times.median, times.low, times.high, times.noisy, lesson_of(findings), time, cpu_median, versus)


# ----------------------------------------------------------------------------- the console


def _work(items: list, most: int = 3) -> str:
    shown = [f"{short_name(name, 44)} ({fmt_us(us)}/step)" for name, us in items[:most]]
    return ", ".join(shown) + (f" and {len(items) - most} more" if len(items) > most else "")


def versus_lines(v: dict) -> list[str]:
    """``vs 04_a_naive_attention ...: gone Memcpy DtoD ... (179 µs/step)`` and the verdict on the time."""
    parts = [f"{what} {_work(v[what])}" for what in ("gone", "new", "changed") if v[what]]
    head = f"vs {v['against']}: " + ("; ".join(parts) if parts else f"the same {'device work' if v['time'] == 'device' else 'ops'}")
    return [head, v["short"]] + ([v["cpu_short"]] if v.get("cpu_short") else [])


def render_glance(rows: list[GlanceRow], console, skipped: Optional[list] = None) -> None:
    """A few lines per trace (readable at 80 columns): the variant; its figures per call; against the
    variant before it; its lesson. Then the files skipped, and why."""
    from rich.markup import escape  # lazy: rich, about 100 ms: --json never loads it
    from rich.padding import Padding  # lazy: rich, about 100 ms: --json never loads it

    if rows:
        console.print("[dim]per call and per step: medians over the steps --compare judges (the profiler's first "
                      "step left out in a run of 3 steps or more)[/]")
    for r in rows:
        figures = [f"{r.ops_per_call:.3g} ops" if r.ops_per_call is not None else None,
                   (f"{r.work_per_call:.3g} {r.work_unit[:-1] if r.work_per_call == 1 else r.work_unit}"
                    if r.work_per_call is not None else None)]
        per = f"{escape(r.per)} x{r.calls}: " + ", ".join(f for f in figures if f) + ("; " if any(figures) else "")
        spread = f"median; {fmt_us(r.low_us)}-{fmt_us(r.high_us)}{', noisy' if r.noisy else ''}"
        unit = "step" if r.per == "step" else "call"
        if r.time == "device":
            per += (f"device {fmt_us(r.median_us)} per {unit} ({spread}; the work a {unit} launched), "
                    f"CPU {fmt_us(r.cpu_median_us)} (wall, median)")
        else:
            per += f"CPU {fmt_us(r.median_us)} per {unit} (wall, {spread})"
        console.print(f"[bold]{escape(r.variant)}[/]")
        console.print(Padding(per, (0, 0, 0, 2)))
        for line in versus_lines(r.versus) if r.versus else []:
            console.print(Padding(escape(line), (0, 0, 0, 2)))
        if r.lesson:
            console.print(Padding(f"[dim]{escape(r.lesson)}[/]", (0, 0, 0, 2)))
    if skipped:
        console.print(escape(skipped_line(skipped)))


def skipped_line(skipped: list) -> str:
    """``skipped 2 files that are not traces: a/report.json (why), ...`` (plain text)."""
    listed = "; ".join(f"{path} ({why})" for path, why in skipped[:6])
    more = f" and {len(skipped) - 6} more" if len(skipped) > 6 else ""
    return f"skipped {len(skipped)} file{'s' if len(skipped) > 1 else ''} that {'are' if len(skipped) > 1 else 'is'} not a trace: {listed}{more}"
