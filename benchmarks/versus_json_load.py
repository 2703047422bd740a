"""One timing both guards share: some work on a trace against a bare ``json.load`` of the same file."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Callable


def ratio_to_json_load(path: Path | str, work: Callable[[Path | str], object], rounds: int) -> tuple[float, float, float]:
    """(work / json.load, work seconds, json.load seconds): ``work(path)`` once first (imports and first-use
    costs are not its own), then per round the two back to back in this process (so that both meet the same
    load on a shared machine); the median round's ratio and the best times."""
    work(path)

    def timed(run) -> float:
        t = time.perf_counter()
        run()
        return time.perf_counter() - t

    def bare_load() -> None:
        with open(path, "rb") as f:
            json.load(f)

    pairs = [(timed(lambda: work(path)), timed(bare_load)) for _ in range(rounds)]
    return statistics.median(r / j for r, j in pairs), min(r for r, _ in pairs), min(j for _, j in pairs)
