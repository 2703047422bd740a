"""The lessons' real H100 runs (copies of ``../shared/traces/h100/runs``; README.md beside them says how
they were made): one folder per run with the trace (``.json.gz``), the profiler table (``.txt``) and
the lesson's console (``run.log``). Tests read them with the report as a learner on a GPU would."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

H100 = Path(__file__).resolve().parent / "data" / "h100"
H100_RUNS = H100 / "runs"
RUN_NAMES = tuple(sorted(p.name for p in H100_RUNS.iterdir() if p.is_dir()))


def h100_trace(name: str) -> Path:
    """The trace of run ``name`` (``attn_naive``, ``p1_4096_compile``, ... : a folder under runs/)."""
    (path,) = sorted(H100_RUNS.joinpath(name).glob("*.json.gz"))
    return path


@lru_cache(maxsize=None)
def h100_report(name: str):
    """(tables, findings) of run ``name``, read once per test session (the report's own entry point)."""
    from common.report import analyze

    return analyze(h100_trace(name))


def finding(name: str, rule: str):
    """The finding ``rule`` of run ``name``, or None where the report gave none."""
    return next((f for f in h100_report(name)[1] if f.rule == rule), None)
