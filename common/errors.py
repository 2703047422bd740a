"""One clear line and an exit status for what a command cannot do, never a traceback.

- Bad input (:class:`BadInput`, :func:`fail`): ``error: <message>`` on stderr, exit status 2.
  :func:`error_line` makes it one line whatever the message holds: a newline, another control
  character or a byte that is not UTF-8 in a path is written as an escape (``\\n``, ``\\x1b``).
- An interrupt: a terminal's Ctrl-C (SIGINT, to the whole process group: under ``uv run`` the child
  gets it twice, from the terminal and from uv) ends in ``interrupted``, exit status 130; SIGTERM in
  ``terminated``, 143. :func:`quit_on_interrupt` covers a script's imports (nothing is written yet:
  the process leaves at once); :func:`run_command` covers its ``main()``, where the first signal becomes
  an exception (:class:`KeyboardInterrupt`, :class:`Terminated`) so that ``finally`` blocks run and
  the files being written are removed (:func:`at_interrupt`), and a repeat of it is ignored. Inside
  one long call (a big matmul: Python cannot raise there) :mod:`common.signal_watch` removes the files
  and leaves from another thread after a second.
- Standard output that cannot be written (``> /dev/full``, a full disk, EIO): one ``error:`` line,
  exit status 2; a reader that left (``| head``): nothing more is said, exit status 1.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import os
import signal
import sys
import threading
import time
from typing import Callable, Iterator, NoReturn

from common.printable import printable
from common.signal_watch import watching

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143
REPEAT_S = 2.0  # a second signal this soon after the first is the same request again (uv forwards Ctrl-C)


class BadInput(Exception):
    """Input or environment the program cannot work with; the message is the whole story."""


class StdoutError(BadInput):
    """Standard output cannot be written (``> /dev/full``, a full disk, EIO)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C's KeyboardInterrupt so that cleanup runs the same way."""


def fail(message: str) -> NoReturn:
    raise BadInput(message)


def one_line(text: str) -> str:
    """``text`` on one line: control characters escaped (``\\n``, ``\\t``, ``\\x1b``), and a path's
    bytes that are not UTF-8 (surrogate escapes) as ``\\xNN`` (:func:`common.printable.printable`)."""
    return printable(text)


def error_line(message: str) -> str:
    return f"error: {one_line(message)}"


def print_error(message: str) -> None:
    """The one place an ``error:`` line is written."""
    _say(error_line(message))


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr closed or full: the exit status still tells
        pass


# ----------------------------------------------------------------------------- interrupts

_cleanups: dict[int, Callable[[], None]] = {}  # what to remove when a signal ends the process
_first_signal_at: float | None = None
_deferring = 0  # > 0 while files are renamed into place (interrupts_deferred)
_deferred: int | None = None  # the signal that came meanwhile


def at_interrupt(cleanup: Callable[[], None]) -> Callable[[], None]:
    """Run ``cleanup`` if a signal ends the process before the returned callable is called (which
    unregisters it). :mod:`common.output` registers the removal of each temporary file this way."""
    key = id(cleanup)
    _cleanups[key] = cleanup

    def forget() -> None:
        _cleanups.pop(key, None)

    return forget


def _run_cleanups() -> None:
    for cleanup in list(_cleanups.values()):
        try:
            cleanup()
        except Exception:  # noqa: BLE001 - a cleanup that fails must not stop the others
            pass


def _leave_now(signum: int, frame=None) -> None:
    """Say it and leave at once (nothing of this process's files is left: the cleanups ran)."""
    _run_cleanups()
    with contextlib.suppress(OSError):
        os.write(2, b"terminated\n" if signum == signal.SIGTERM else b"interrupted\n")
    os._exit(128 + signum)


def _raise_once(signum: int, frame=None) -> None:
    """The first signal raises (KeyboardInterrupt, Terminated); the same again soon after is
    ignored (uv run forwards the terminal's Ctrl-C to a child that got it already); a later one
    leaves at once."""
    global _first_signal_at, _deferred
    now = time.monotonic()
    if _first_signal_at is None:
        _first_signal_at = now
        if _deferring:
            _deferred = signum  # raised when the renames are done
            return
        _run_cleanups()  # the temporary files go now, even if something swallows the exception
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()
    if now - _first_signal_at < REPEAT_S:
        return
    _leave_now(signum)


def _install(handler) -> dict:
    """Set ``handler`` for SIGINT and SIGTERM (a signal ignored by whoever started us stays ignored);
    the previous handlers, to restore. Only the main thread sets handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        old = signal.getsignal(signum)
        if old is signal.SIG_IGN:
            continue
        previous[signum] = old
        signal.signal(signum, handler)
    return previous


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """An interrupt that comes while the block runs is raised when it ends (a set of files is renamed
    into place whole: never the table without its trace). Blocking the signals would not do: another
    thread of the process (torch's) would take them."""
    global _deferring, _deferred
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if not _deferring and _deferred is not None:
            signum, _deferred = _deferred, None
            raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def quit_on_interrupt() -> None:
    """For a script's first lines, before its slow imports (torch): a Ctrl-C or SIGTERM ends the
    process at once with one line (exit 130 or 143) instead of a traceback from inside an import.
    :func:`run_command` takes over while ``main()`` runs."""
    _install(_leave_now)


@contextlib.contextmanager
def raising_on_interrupt() -> Iterator[None]:
    """While the block runs, the first SIGINT/SIGTERM raises and repeats are ignored (see :func:`_raise_once`)."""
    global _first_signal_at, _deferred
    _first_signal_at = _deferred = None
    previous = _install(_raise_once)
    try:
        with watching(_leave_now, busy=lambda: _deferring > 0):  # inside one long op: leave from another thread
            yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)


# ----------------------------------------------------------------------------- standard output


class _GuardedStream:
    """``sys.stdout`` whose write errors become one line: EPIPE stays BrokenPipeError (the reader
    left), any other (ENOSPC on /dev/full, EIO) becomes :class:`BadInput`."""

    def __init__(self, stream):
        self._stream = stream

    def __getattr__(self, name):
        return getattr(self._stream, name)

    def _guard(self, call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutError(f"cannot write to standard output ({describe_os_error(exc)})") from None

    def write(self, text):
        return self._guard(self._stream.write, text)

    def writelines(self, lines):
        return self._guard(self._stream.writelines, lines)

    def flush(self):
        return self._guard(self._stream.flush)


def describe_os_error(exc: OSError) -> str:
    """Why a write failed, in words: a full disk says so."""
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"the disk is full: {why}"
    return why


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so that what is still buffered goes nowhere quietly."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)


@contextlib.contextmanager
def _guarded_stdout() -> Iterator[None]:
    real = sys.stdout
    guarded = real is not None and not isinstance(real, _GuardedStream)
    if guarded:
        sys.stdout = _GuardedStream(real)
    try:
        yield
        if real is not None:
            sys.stdout.flush()  # what is buffered fails here, inside the guard, not at exit
    finally:
        if guarded and isinstance(sys.stdout, _GuardedStream):
            sys.stdout = real


# ----------------------------------------------------------------------------- the commands


def run_command(main: Callable[[], int | None], *, last: bool = False,
                translate: Callable[[BaseException], str | None] | None = None) -> int:
    """Run a command's ``main()`` and turn how it ends into an exit status: bad input and write errors
    on standard output are one ``error:`` line (2), an interrupt one line (130, 143), a reader that
    left nothing (1). ``translate(exc)``, for other exceptions, gives an error message or None (the
    exception is not one of ours: it propagates).

    Once interrupted, or once ``main()`` returns when it is the process's ``last`` work (a lesson),
    SIGINT and SIGTERM are ignored: the process is leaving, and Python's finalization would
    otherwise restore their default actions, so that the repeat uv sends (or a Ctrl-C in the last
    milliseconds of torch's teardown) would kill it with no word and no exit status of its own."""
    try:
        with raising_on_interrupt(), _guarded_stdout():
            return main() or 0
    except BadInput as exc:
        if isinstance(exc, StdoutError):
            _silence_stdout()  # what is still buffered must not fail again at exit
        print_error(str(exc))
        return EXIT_BAD_INPUT
    except Terminated:
        _ignore_signals()
        _say("terminated")
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        _ignore_signals()
        _say("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `... | head`: the reader left; say nothing more
        _silence_stdout()
        return 1
    except Exception as exc:
        message = translate(exc) if translate else None
        if message is None:
            raise
        print_error(message)
        return EXIT_BAD_INPUT
    finally:
        if last:
            _ignore_signals()


def _ignore_signals() -> None:
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)


def exit_on_bad_input(main: Callable[..., int | None]) -> Callable[..., int]:
    """Wrap a command's main() with :func:`run_command`."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        return run_command(lambda: main(*args, **kwargs))

    return wrapper


class CommandParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (``error: ... (see PROG --help)``) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        print_error(f"{message} (see {self.prog} --help)")
        raise SystemExit(EXIT_BAD_INPUT)
