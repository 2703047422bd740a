"""What a rule returns: :class:`Finding` (one pattern seen, its evidence and the spans of time it
points at, :class:`Span`), and :func:`in_window`, which clips those spans to the profiled window.

Its own module so that the rules (:mod:`.rules`), which make findings, and the renderers, which
show them, share the type without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Span:
    """A stretch of time a finding points at: µs relative to the window's start."""

    start_us: float
    dur_us: float

    def __iter__(self):  # start, dur = span
        return iter((self.start_us, self.dur_us))


@dataclass(frozen=True)
class Finding:
    rule: str
    message: str  # one line: what was seen, with the numbers
    hint: str = ""  # what to try
    evidence: dict = field(default_factory=dict)
    level: str = "info"  # info | warn | note
    spans: tuple = ()  # Span: where in time it happened, inside the window (the annotated trace draws them)

    def to_json(self) -> dict:
        return dict(rule=self.rule, level=self.level, message=self.message, hint=self.hint, evidence=self.evidence)


def in_window(t, spans) -> tuple:
    """``spans`` (Span or (start, duration) pairs, µs from the window's start) clipped to the window, which
    reaches to the end of the device work its steps launched (``Model.spans_window``); those wholly outside
    it are left out."""
    w0, w1 = t.model.spans_window
    out = []
    for start, dur in spans:
        a, b = max(start, w0), min(start + max(dur, 0.0), w1)
        if b >= a:
            out.append(Span(a, b - a))
    return tuple(out)
