"""The console's word on long work: which call or step runs now, how long one took, about how long is left.

A lesson at the post's sizes can run for minutes on a CPU (Part 3's naive attention: 2.5 s a call, 3 warm-up
calls and 5 steps; Part 1 at 16384: minutes a call), and a silent console reads as a hang. So the warm-up
and the profiled steps run under one status line, updated as each call or step ends:

    warming up: call 2 of 3 done, 2.41 s a call; about 17 s left with the 5 profiled steps
    profiling: step 3 of 5 done, 2.43 s a step; about 5 s left

The first call of a warm-up has no estimate yet: it says so. The steps are counted where the lesson tells
the profiler a step ended (``prof.step()``, seen through :meth:`Progress.watch`); they get a line only when
they are long (:meth:`Progress.worth_a_line`), since its redraws would show in a short step's trace. On a
console that is not a terminal (a pipe, the tests) nothing is drawn.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator

from rich.console import Console

LONG_S = 2.0  # profiled steps expected to take this long (or more) get a status line



def fmt_seconds(seconds: float) -> str:
    """``0.25 s``, ``2.41 s``, ``95 s``, ``6.7 min``: a wait as a person reads it."""
    if seconds >= 90:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.0f} s"


class Progress:
    """One run's status line: the warm-up's calls, then the profiled steps."""

    def __init__(self, console: Console, steps: int):
        self.console = console
        self.steps = steps  # the profiled schedule's steps, wait and warm-up ones included
        self.call_s: float | None = None  # the last warm-up call's time: the first estimate of a step
        self._status = None
        self._done = 0
        self._last = 0.0

    def warm_up_text(self, done: int, calls: int, compiling: str = "") -> str:
        what = f"warming up ({compiling})" if compiling else "warming up"
        if done == 0 or self.call_s is None:
            return f"{what}: call 1 of {calls} (no estimate before the first call ends)"
        left = (calls - done + self.steps) * self.call_s
        return (f"{what}: call {done} of {calls} done, {fmt_seconds(self.call_s)} a call; about "
                f"{fmt_seconds(left)} left with the {self.steps} profiled steps")

    def profiling_text(self, compiling: bool) -> str:
        if self._done == 0:
            first = " (compiling in the first step)" if compiling else ""
            estimate = (f"; about {fmt_seconds(self.steps * self.call_s)} at the warm-up's pace"
                        if self.call_s is not None and not compiling else "")
            return f"profiling {self.steps} steps{first}{estimate}"
        left = (self.steps - self._done) * self.call_s if self.call_s is not None else 0.0
        tail = f"; about {fmt_seconds(left)} left" if self._done < self.steps else ""
        return f"profiling: step {self._done} of {self.steps} done, {fmt_seconds(self.call_s)} a step{tail}"

    @contextlib.contextmanager
    def warming(self, calls: int, compiling: str = "") -> Iterator[Callable[[], None]]:
        """A status line over the warm-up (``compiling``: what its first call compiles); call the function
        given after each call."""
        with self.console.status(self.warm_up_text(0, calls, compiling), spinner="dots") as status:
            done, last = 0, time.perf_counter()

            def called() -> None:
                nonlocal done, last
                now = time.perf_counter()
                done, self.call_s, last = done + 1, now - last, now
                status.update(self.warm_up_text(done, calls, compiling))

            yield called

    def worth_a_line(self, compiling: bool) -> bool:
        """Whether the profiled steps get a status line: when the first step compiles, or the warm-up says
        they take LONG_S or more. Its redraws run on a thread of their own, inside the steps: on a short
        step (Part 1's 64: 60 µs) one would show in the trace as time no op ran."""
        return compiling or (self.call_s is not None and self.call_s * self.steps >= LONG_S)

    @contextlib.contextmanager
    def profiling(self, compiling: bool) -> Iterator[None]:
        """A status line over the profiled steps (updated by :meth:`watch`), where :meth:`worth_a_line`."""
        self._done, self._last = 0, time.perf_counter()
        if not self.worth_a_line(compiling):
            yield
            return
        with self.console.status(self.profiling_text(compiling), spinner="dots", refresh_per_second=4) as status:
            self._status = status
            try:
                yield
            finally:
                self._status = None

    def watch(self, step: Callable[[], object]) -> Callable[[], object]:
        """``prof.step``, counting: each call ends a step, and the status line says so."""
        def stepped():
            out = step()
            now = time.perf_counter()
            self._done, self.call_s, self._last = self._done + 1, now - self._last, now
            if self._status is not None:
                self._status.update(self.profiling_text(compiling=False))
            return out

        return stepped
