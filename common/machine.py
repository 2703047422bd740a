"""The machine probe: one fixed piece of CPU work, timed just before the profiler starts.

Two runs made minutes apart ran on two different machines, as far as their timings go: a laptop gets
busier, a core is shared. ``--compare`` tells a change in the code from a change in the machine by work
that did not change between the runs (:mod:`common.report.compare.control`). When two runs share no
such work (math against flash: every op differs), the probe is that work: the same loop in every lesson
run, so its time in two runs says how much of a core the second run got against the first. It is timed
several times (their spread says how steady the machine was) and written into the trace's knobs
(``probe``); it runs before the profiler, so no trace shows it. It is timed again as the profiler stops
(:func:`write_after`: the samples go into the exported trace as ``probe["after"]``), so the two
bracket the profiled steps: a machine that got busier between the first samples and the steps (a
laptop's other programs, a test runner's other workers) shows in the second.

A plain Python loop, not a torch op: a matmul here would load and warm the library before the
workload's first call, and Part 1's cold start (``--schedule 0,0,3``) would no longer be cold. A busy
machine slows any code by the share of a core it leaves; the loop measures that share.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path

PROBE_LOOP = 100_000  # additions of a square: about 5 ms on one core of a server, a few time slices
PROBE_SAMPLES = 7  # their spread is the machine's steadiness at the time
PROBE_WORK = f"Python {sys.version_info[0]}.{sys.version_info[1]} loop of {PROBE_LOOP:,} squares"


def _loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def measure() -> dict:
    """``{"work", "us"}``: what the probe ran (the same text in two runs: the same work) and each sample's µs."""
    samples = []
    for _ in range(PROBE_SAMPLES):
        start = time.perf_counter()
        _loop(PROBE_LOOP)
        samples.append(round((time.perf_counter() - start) * 1e6, 1))
    return dict(work=PROBE_WORK, us=samples)


def write_after(trace: Path, probe: dict, after: list[float]) -> bool:
    """Write ``after`` (the probe's samples once the profiler stopped) into an exported trace: its ``"lesson"``
    metadata holds ``probe`` as the lesson gave it (compact JSON, written verbatim by the profiler), which
    becomes ``probe`` with ``after``. False, and the trace as it was, where that text is not in it."""
    opener = gzip.open if trace.name.endswith(".gz") else open
    with opener(trace, "rt", encoding="utf-8") as f:
        text = f.read()
    given = '"probe":' + json.dumps(probe, separators=(",", ":"))
    if given not in text:
        return False
    text = text.replace(given, '"probe":' + json.dumps(dict(probe, after=after), separators=(",", ":")))
    with opener(trace, "wt", encoding="utf-8") as f:
        f.write(text)
    return True
