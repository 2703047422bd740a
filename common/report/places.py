"""Where in time a finding happened: the spans the annotated trace draws on its "Findings" track.

One small function per rule that has a place, from the finding's evidence and the model; a rule
without a place in time (a count, a name) has none here. Spans are ``(start, duration)`` in µs
relative to the model's window start (``t.model.t0``), clipped to the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from common.report.model import ANNOTATION
from common.report.tables import Tables
from common.report.rules import Finding


@dataclass(frozen=True)
class Span:
    start_us: float  # relative to the window's start
    dur_us: float


def _step_named(t: Tables, name: str) -> list[Span]:
    return [Span(s.start, s.dur) for s in t.model.steps if s.name == name]


def _cold_first_step(t: Tables, f: Finding) -> list[Span]:
    return _step_named(t, f.evidence["first_step"])


def _noisy_steps(t: Tables, f: Finding) -> list[Span]:
    judged = t.model.steps[f.evidence.get("judged_from", 0):]
    return [Span(s.start, s.dur) for s in sorted(judged, key=lambda s: -s.dur)[:1]]


def _annotation_gap(t: Tables, f: Finding) -> list[Span]:
    """From the annotation's start in the first step to its first op."""
    cpu, first = t.model.cpu, t.model.steps[0]
    if f.evidence["annotation"] not in t.model.names:
        return []
    nid = t.model.names.index(f.evidence["annotation"])
    hits = np.flatnonzero((cpu.name == nid) & (cpu.kind == ANNOTATION) & (cpu.ts >= first.start)
                          & (cpu.ts <= first.end))
    if not hits.size:
        return []
    start = float(cpu.ts[hits].min())
    return [Span(start, float(f.evidence["gaps_us"][first.name]))]


def _kernel_gap(t: Tables, f: Finding) -> list[Span]:
    return [Span(float(f.evidence["at_us"]), float(f.evidence["gap_us"]))]


def _long_final_sync(t: Tables, f: Finding) -> list[Span]:
    return [Span(float(f.evidence["start_us"]), float(f.evidence["sync_us"]))]


def _hidden_dtod_copy(t: Tables, f: Finding) -> list[Span]:
    from common.report.rules.copies import _dtod_before_gemm  # the rule's own pairing

    dev = t.model.dev
    return [Span(float(dev.ts[c]), float(dev.dur[c])) for c, _ in _dtod_before_gemm(t)]


def _activity_buffer_request(t: Tables, f: Finding) -> list[Span]:
    reqs = [(o[1], o[2]) for o in t.model.overheads if "Buffer Request" in o[0]]
    reqs += [(a[1], a[2]) for a in t.model.gpu_annotations if "Buffer Request" in a[0]]
    return [Span(float(start), float(dur)) for start, dur in sorted(reqs)]


def _recompiles(t: Tables, f: Finding) -> list[Span]:
    """The calls of a recompiled region (``Torch-Compiled Region: K/N`` with N > 0)."""
    cpu = t.model.cpu
    ids = [i for i, n in enumerate(t.model.names) if n.startswith("Torch-Compiled Region: ") and not n.endswith("/0")]
    hits = np.flatnonzero(np.isin(cpu.name, ids))
    return [Span(float(cpu.ts[i]), float(cpu.dur[i])) for i in hits.tolist()]


def _annotation_calls(t: Tables, f: Finding) -> list[Span]:
    """Every call of the phase the finding is about (``decode`` in an LLM request)."""
    cpu = t.model.cpu
    if f.evidence.get("phase") not in t.model.names:
        return []
    nid = t.model.names.index(f.evidence["phase"])
    hits = np.flatnonzero((cpu.name == nid) & (cpu.kind == ANNOTATION))
    return [Span(float(cpu.ts[i]), float(cpu.dur[i])) for i in hits.tolist()]


def _every_step(t: Tables, f: Finding) -> list[Span]:
    return [Span(s.start, s.dur) for s in t.model.steps]


PLACES: dict[str, Callable[[Tables, Finding], list[Span]]] = {
    "cold_first_step": _cold_first_step,
    "noisy_steps": _noisy_steps,
    "annotation_gap": _annotation_gap,
    "kernel_gap": _kernel_gap,
    "long_final_sync": _long_final_sync,
    "hidden_dtod_copy": _hidden_dtod_copy,
    "activity_buffer_request": _activity_buffer_request,
    "recompiles": _recompiles,
    "overhead_bound_phase": _annotation_calls,
    "overhead_bound": _every_step,
    "compute_bound": _every_step,
}


def spans_of(t: Tables, f: Finding) -> list[Span]:
    """The finding's places in time, clipped to the window; [] for a finding without one."""
    place = PLACES.get(f.rule)
    if place is None:
        return []
    w0, w1 = t.model.window
    out = []
    for s in place(t, f):
        a, b = max(s.start_us, w0), min(s.start_us + max(s.dur_us, 0.0), w1)
        if b >= a:
            out.append(Span(a, b - a))
    return out
