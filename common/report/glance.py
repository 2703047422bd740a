"""At a glance: one line per trace, to set a lesson's variants side by side.

``uv run -m common.report --glance traces/04_a_naive_attention traces/04_c_sdpa_attention`` reads
every trace under the folders (and the files named) and prints, per trace:

- the variant: the lesson and its tag (``04_c_sdpa_attention backend-math``);
- per call of the lesson's annotation (its guess's, else the only one; else per step): the ops
  dispatched (every CPU op nested in a call) and the work (on the CPU the compute ops, outermost,
  :mod:`.calls`; on a GPU the kernels launched);
- the time per call: the median and the range over the window's calls (a range wider than 2x the
  median's low end is flagged noisy);
- the lesson: the first finding of the ones that teach a variant (attention, guess, regime).

The rows are the report's own tables and findings: nothing here is computed that the full report
does not show.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from common.report.steadiness import Spread
from common.report.tables import Tables

# the findings that say what a variant teaches, most specific first
LESSON_RULES = ("out_of_place_copy", "fp32_upcast", "causal_mask_rebuilt", "fused_attention", "guess_vs_seen",
                "torch_compile", "fused_kernels", "addmm_vs_mm_add", "overhead_bound_phase", "overhead_bound",
                "compute_bound", "device_bound", "cold_first_step")
SUFFIXES = (".json", ".json.gz")


@dataclass(frozen=True)
class GlanceRow:
    trace: str  # the path as given or found
    variant: str  # the lesson and its tag, or the file name
    per: str  # the annotation a row's figures are per call of, or "step"
    calls: int
    ops_per_call: Optional[float]
    work_per_call: Optional[float]
    work_unit: str  # "compute ops" | "kernels"
    median_us: float
    low_us: float
    high_us: float
    noisy: bool
    lesson: str  # "rule: message", or ""

    def to_json(self) -> dict:
        return asdict(self)


def expand(paths: list[str]) -> list[Path]:
    """The traces: each file as named, and every .json/.json.gz under each folder (annotated copies
    left out), sorted."""
    out: list[Path] = []
    for text in paths:
        p = Path(text)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(SUFFIXES)
                           and ".annotated." not in f.name)
            out.extend(found)
        else:
            out.append(p)
    return out


def _variant(t: Tables) -> str:
    k = t.knobs
    return f"{k.script} {k.tag}" if k is not None else Path(t.model.path).name


def _per_call(t: Tables):
    """The annotation the figures are per call of, with its phase row (None: per step)."""
    wanted = t.guess.guess.annotation if t.guess is not None else None
    if wanted is None and len(t.phases) == 1:
        wanted = t.phases[0].name
    return next((p for p in t.phases if p.name == wanted), None)


def glance_row(t: Tables, findings: list, path: str) -> GlanceRow:
    phase = _per_call(t)
    if phase is not None:
        spans = t.phase_calls.get(phase.name, ())
        times = Spread(tuple(s.dur_us for s in spans))
        work = (phase.kernels_per_call if t.has_gpu else
                t.guess.work.mean_items if t.guess is not None and t.guess.work.annotation == phase.name else None)
        per, calls, ops = phase.name, phase.calls, phase.ops_per_call
    else:
        times = Spread(tuple(r.wall_us for r in t.step_rows))
        per, calls, ops, work = "step", len(t.step_rows), None, None
    by_rule = {f.rule: f for f in findings}
    lesson = next((f"{r}: {by_rule[r].message}" for r in LESSON_RULES if r in by_rule), "")
    return GlanceRow(path, _variant(t), per, calls, ops, work, "kernels" if t.has_gpu else "compute ops",
                     times.median, times.low, times.high, times.noisy, lesson)


def render_glance(rows: list[GlanceRow], console) -> None:
    """Three lines per trace (readable at 80 columns): the variant; its figures per call; its lesson."""
    from rich.markup import escape
    from rich.padding import Padding

    from common.report.units import fmt_us

    for r in rows:
        figures = [f"{r.ops_per_call:.3g} ops" if r.ops_per_call is not None else None,
                   (f"{r.work_per_call:.3g} {r.work_unit[:-1] if r.work_per_call == 1 else r.work_unit}"
                    if r.work_per_call is not None else None)]
        per = f"{escape(r.per)} x{r.calls}: " + ", ".join(f for f in figures if f)
        per += ("; " if any(figures) else "") + (f"{fmt_us(r.median_us)} per call (median; {fmt_us(r.low_us)}-"
                                                  f"{fmt_us(r.high_us)}{', noisy' if r.noisy else ''})")
        console.print(f"[bold]{escape(r.variant)}[/]")
        console.print(Padding(per, (0, 0, 0, 2)))
        if r.lesson:
            console.print(Padding(f"[dim]{escape(r.lesson)}[/]", (0, 0, 0, 2)))
