"""A signal that Python cannot deliver: the main thread is inside one long call.

Python runs a signal's handler in the main thread between two bytecodes. Inside one long call into
C (a 16384 x 16384 matmul on the CPU takes over a minute on one core) no bytecode runs, so Ctrl-C and
SIGTERM would wait for the call to end. Torch releases the GIL in its ops, so another thread can
still run: :func:`watching` starts one that wakes on every SIGINT/SIGTERM (``signal.set_wakeup_fd``:
CPython's own C-level handler writes the signal's number to a pipe, in whatever thread took it) and,
when the main thread has not moved for :data:`GRACE_S` (the same frame at the same instruction), calls
``leave(signum)``: the caller's "clean up, say one line, exit now".

What it cannot do: a call that holds the GIL all along (pure C code that never releases it) stops
this thread as well; the signal then waits for that call, as it would without the watcher.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from typing import Callable, Iterator

GRACE_S = 1.0  # the main thread answers a signal within milliseconds when it runs Python code
POLL_S = 0.05
WATCHED = (signal.SIGINT, signal.SIGTERM)


def main_thread_stuck(grace_s: float = GRACE_S) -> bool:
    """Whether the main thread stays on the same frame and instruction for ``grace_s``: inside one call."""
    ident = threading.main_thread().ident
    frame = sys._current_frames().get(ident)
    if frame is None:
        return False
    where = frame.f_lasti
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        now = sys._current_frames().get(ident)
        if now is not frame or now.f_lasti != where:
            return False
    return True


def _watch(read_fd: int, leave: Callable[[int], None], busy: Callable[[], bool]) -> None:
    while True:
        try:
            data = os.read(read_fd, 64)
        except OSError:
            return
        if not data:  # the pipe was closed: the watch is over
            return
        signums = [s for s in data if s in WATCHED]
        if not signums:
            continue
        while busy():  # files being renamed into place: the main thread is moving, let it finish
            time.sleep(POLL_S)
        if main_thread_stuck():
            leave(signums[-1])


@contextlib.contextmanager
def watching(leave: Callable[[int], None], busy: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """While the block runs, a SIGINT/SIGTERM that finds the main thread inside one long call calls
    ``leave(signum)`` from a helper thread. Only from the main thread (elsewhere: nothing is watched)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter
        os.close(read_fd)
        os.close(write_fd)
        yield
        return
    thread = threading.Thread(target=_watch, args=(read_fd, leave, busy), name="signal-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        os.close(write_fd)  # the watcher reads the end of the pipe and stops
        thread.join(timeout=GRACE_S + 1)
        os.close(read_fd)
