"""The run's knobs, written into the trace's own metadata by a lesson and read back by the report.

A lesson's ``Lesson.label(prof)`` hands ``knobs.to_json()`` to the profiler once, as the metadata
``"lesson"`` of every cycle it records, so the exported trace carries a top-level
``"lesson": {...}`` object beside ``deviceProperties``. The report reads it with
:func:`RunKnobs.from_json` and so knows what the run already did (warm-up, compile mode, schedule)
and never advises it. A trace from anywhere else has no such key: the
report then judges from the events alone.

No torch here: the report imports this module.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

METADATA_KEY = "lesson"


@dataclass(frozen=True)
class ScheduleKnobs:
    wait: int = 1
    warmup: int = 1
    active: int = 3
    repeat: int = 1


@dataclass(frozen=True)
class JobKnobs:
    """One process of a multi-process job (06_ddp.py under torchrun): which job, which rank."""

    id: str  # torchrun's run id, the same in every rank's trace of one launch
    rank: int
    world_size: int
    backend: str  # gloo | nccl

    @classmethod
    def from_json(cls, raw: Any) -> "JobKnobs | None":
        if not isinstance(raw, dict):
            return None
        try:
            return cls(id=str(raw["id"]), rank=int(raw["rank"]), world_size=int(raw["world_size"]),
                       backend=str(raw.get("backend", "")))
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class RunKnobs:
    script: str
    tag: str
    shape: tuple[int, ...]
    dtype: str
    device: str  # cpu | cuda
    warmup: bool  # the lesson's un-profiled warm-up calls (--warmup) ran before profiling
    warmup_calls: int
    compile: bool
    compile_mode: str
    schedule: ScheduleKnobs
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    variants: dict[str, str] = field(default_factory=dict)  # a lesson's own knobs (attention, cache, ...)
    matmul_flops_per_step: int | None = None  # the workload's matrix-multiply arithmetic in one step
    job: JobKnobs | None = None  # set by a multi-process lesson: the job and this process's rank
    guess: dict | None = None  # what the post expects one annotated call to run (common/guess.py)
    cpu: dict | None = None  # a CPU run's choices (common/cpu.py): threads, capability, dtype measured or given
    work: dict | None = None  # what one call of the workload ran, counted before profiling (common/work.py)
    probe: dict | None = None  # the machine probe (common/machine.py): work, us (before profiling), after (once it stopped)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: Any) -> "RunKnobs | None":
        """The knobs from a trace's ``"lesson"`` value (a dict, or its JSON text); None when absent or odd."""
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError:
                return None
        if not isinstance(raw, dict):
            return None
        try:
            sched = raw.get("schedule") or {}
            return cls(
                script=str(raw["script"]), tag=str(raw.get("tag", "")),
                shape=_shape(raw.get("shape", ())), dtype=str(raw.get("dtype", "")),
                device=str(raw.get("device", "")), warmup=bool(raw["warmup"]),
                warmup_calls=int(raw.get("warmup_calls", 0)), compile=bool(raw.get("compile", False)),
                compile_mode=str(raw.get("compile_mode", "default")),
                schedule=ScheduleKnobs(**{k: int(sched[k]) for k in ("wait", "warmup", "active", "repeat") if k in sched}),
                record_shapes=bool(raw.get("record_shapes", False)),
                profile_memory=bool(raw.get("profile_memory", False)),
                with_stack=bool(raw.get("with_stack", False)),
                variants=_variants(raw.get("variants")),
                matmul_flops_per_step=_flop_count(raw.get("matmul_flops_per_step")),
                job=JobKnobs.from_json(raw.get("job")),
                guess=raw["guess"] if isinstance(raw.get("guess"), dict) else None,
                cpu=raw["cpu"] if isinstance(raw.get("cpu"), dict) else None,
                work=raw["work"] if isinstance(raw.get("work"), dict) else None,
                probe=_probe(raw.get("probe")),
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            return None


MAX_COUNT = 2**63  # a lesson's counts are torch's int64: a value at or past this, or below 1, was not written by one


def _shape(raw: Any) -> tuple[int, ...]:
    """The lesson's shape numbers: each a whole number from 1 to below :data:`MAX_COUNT` (a tensor's size is
    torch's int64); anything else (``1e308``, ``-1``, ``2.5``) raises ValueError: the knobs are not a lesson's."""
    dims = tuple(raw)
    if not all(isinstance(n, (int, float)) and not isinstance(n, bool) and 1 <= n < MAX_COUNT and n == int(n)
               for n in dims):
        raise ValueError(f"not a shape: {raw!r}")
    return tuple(int(n) for n in dims)


def _flop_count(raw: Any) -> int | None:
    """matmul_flops_per_step: a positive integer below :data:`MAX_COUNT`, else None (absent or impossible:
    a negative count, or one so large that no rate divides it)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 1 <= raw < MAX_COUNT:
        return None
    return int(raw)


def _variants(raw: Any) -> dict[str, str]:
    """A lesson's own knobs: an object of names to values (text or numbers). Anything else (a list, a
    nested object) is not what a lesson writes: the variants count as absent, so no rule reads them."""
    if not isinstance(raw, dict):
        return {}
    if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in raw.values()):
        return {}
    return {str(k): str(v) for k, v in raw.items()}


def _probe(raw: Any) -> dict | None:
    """The machine probe (common/machine.py): what it ran (text), its samples before the profiler (``us``) and,
    where the lesson timed them, after it (``after``): two or more finite, positive µs each. Anything else
    counts as absent (an odd ``after``: the probe without it), so no comparison reads it."""
    if not isinstance(raw, dict) or not isinstance(raw.get("work"), str):
        return None
    us, after = _samples(raw.get("us")), _samples(raw.get("after"))
    if us is None:
        return None
    return dict(work=raw["work"], us=us, **({"after": after} if after is not None else {}))


def _samples(raw: Any) -> list[float] | None:
    if not isinstance(raw, list) or len(raw) < 2:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < 1e12 for x in raw):
        return None
    return [float(x) for x in raw]
