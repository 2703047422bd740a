"""How a lesson runs on the CPU, chosen so that its timings hold on a busy laptop.

Two choices, each printed on the console with its reason and written into the trace's knobs:

- **One intra-op thread** (``--threads`` to change it). With several, every parallel op waits at
  its end for the slowest of its threads; on a machine whose cores other programs share, one
  descheduled thread stalls the op, and a 64x64 matmul takes milliseconds instead of microseconds.
  With one thread an op takes its own time, slowed at most by the share of a core it gets.
- **A dtype this CPU computes at speed.** The posts' bf16 needs bf16 instructions (AVX-512 BF16,
  AMX, Arm's BF16). Without them torch emulates bf16 matmuls, tens to hundreds of times slower
  than fp32: a 64x64 matmul becomes compute-bound and a 4096x4096 one takes minutes. So unless
  ``--dtype`` is given, a CPU run measures a bf16 matmul against an fp32 one first (a few
  milliseconds) and keeps bf16 only where it is not much slower. The file name says which dtype ran.
  ``LESSONS_CPU_DTYPE=bf16`` (or ``fp32``) in the environment takes that dtype instead of the measured
  one, as ``--dtype`` does for one run: the test suite's switch to the other CPU's path.

torch is imported by the functions, not at import time (the lessons parse flags first).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Optional

from common.errors import fail
from common.paths import DTYPES

DEFAULT_THREADS = 1
EMULATED_SLOWDOWN = 4.0  # a dtype whose matmul runs this many times slower than fp32 is emulated here
PROBE_SIZE = 128  # the probe's square matmul: big enough to measure (0.1 ms in fp32), about 2 ms when emulated
PROBE_REPEATS = 5  # the fastest of these (the least disturbed by other programs) is kept
DTYPE_ENV = "LESSONS_CPU_DTYPE"  # the dtype a run without --dtype takes instead of the measured one


@dataclass(frozen=True)
class CpuChoice:
    """What the lesson chose for the CPU, and why (the knobs' ``cpu`` entry)."""

    threads: int
    threads_given: bool  # --threads was given (else DEFAULT_THREADS)
    capability: str  # torch's CPU instruction set: AVX2, AVX512, ...
    dtype_given: bool  # --dtype was given (else measured, or set by LESSONS_CPU_DTYPE)
    dtype_from_env: bool  # LESSONS_CPU_DTYPE set it (no --dtype)
    slowdown: Optional[float]  # the dtype considered's matmul time over fp32's, measured; None: not measured
    slow_dtype: Optional[str]  # which dtype ``slowdown`` is about (bf16 when choosing, else the one given)

    @property
    def emulated(self) -> bool:
        return self.slowdown is not None and self.slowdown >= EMULATED_SLOWDOWN


def pin_threads(requested: Optional[int]) -> int:
    import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    threads = requested or DEFAULT_THREADS
    torch.set_num_threads(threads)
    return threads


def matmul_slowdown(name: str) -> float:
    """How many times longer a square matmul takes in ``name`` (bf16, fp16) than in fp32, on this CPU now."""
    import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    def fastest(dtype) -> float:
        a = torch.randn(PROBE_SIZE, PROBE_SIZE).to(dtype)
        b = torch.randn(PROBE_SIZE, PROBE_SIZE).to(dtype)
        torch.mm(a, b)  # the first call pays one-time costs
        best = float("inf")
        for _ in range(PROBE_REPEATS):
            start = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - start)
        return best

    low = {"bf16": torch.bfloat16, "fp16": torch.float16}[name]
    return fastest(low) / max(fastest(torch.float32), 1e-9)


def env_dtype() -> Optional[str]:
    """The dtype ``LESSONS_CPU_DTYPE`` sets (None where it is unset or empty); one ``error:`` line for another name."""
    name = os.environ.get(DTYPE_ENV, "").strip()
    if name and name not in DTYPES:
        fail(f"{DTYPE_ENV}={name!r} is not a dtype: one of {', '.join(DTYPES)}")
    return name or None


def choose(dtype: Optional[str], threads: Optional[int]) -> tuple[str, CpuChoice]:
    """(the dtype to run, the choice): pin the threads, then keep the given dtype (--dtype, else
    LESSONS_CPU_DTYPE) or measure bf16."""
    import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    preset = env_dtype() if dtype is None else None
    used = pin_threads(threads)
    capability = torch.backends.cpu.get_cpu_capability()
    considered = dtype or preset or "bf16"
    slowdown = matmul_slowdown(considered) if considered != "fp32" else None
    choice = CpuChoice(used, threads is not None, capability, dtype is not None, preset is not None, slowdown,
                       considered if considered != "fp32" else None)
    if dtype is not None or preset is not None:
        return considered, choice
    return ("fp32" if choice.emulated else "bf16"), choice


def describe(choice: CpuChoice, dtype: str) -> list[str]:
    """The console's lines about the choice (markup-free text)."""
    lines = []
    if choice.threads_given:
        lines.append(f"threads {choice.threads} intra-op (--threads)")
    else:
        lines.append(f"threads {choice.threads} intra-op (steady timings on a shared machine: with more, one "
                     "descheduled thread stalls every parallel op; --threads N to use more cores)")
    emulation = (f"this CPU ({choice.capability}) emulates it: a {dtype} matmul ran {choice.slowdown:.0f}x slower "
                 "than fp32 here, so matmuls dominate the timings") if choice.emulated else ""
    if choice.dtype_from_env:
        lines.append(f"dtype   {dtype} ({DTYPE_ENV})" + (f", but {emulation}" if emulation else ""))
    elif choice.emulated and not choice.dtype_given:
        lines.append(f"dtype   fp32, not the posts' bf16: this CPU ({choice.capability}) has no bf16 matmul "
                     f"instructions, and a bf16 matmul ran {choice.slowdown:.0f}x slower than fp32 here; "
                     "--dtype bf16 to profile the emulation anyway")
    elif choice.emulated:
        lines.append(f"dtype   {dtype} as given, but {emulation} (--dtype fp32 for the posts' CPU story)")
    return lines


def to_knobs(choice: CpuChoice) -> dict:
    return dict(threads=choice.threads, threads_given=choice.threads_given, capability=choice.capability,
                dtype_given=choice.dtype_given, dtype_from_env=choice.dtype_from_env, slowdown=round(choice.slowdown, 2) if choice.slowdown else None,
                slow_dtype=choice.slow_dtype)
