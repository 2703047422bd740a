"""Argument checks, written once: the positive numbers the command lines take (a lesson's shape
flags, ``--threads``, ``--bucket-cap-mb``; the report's ``--top``; the viewer's ``--timeout``).

Each is an argparse ``type=``: it returns the value or raises ``argparse.ArgumentTypeError`` with
the words the error line shows (argparse prefixes the flag). No torch here: every command parses
its arguments before importing anything heavy.
"""

from __future__ import annotations

import argparse
import math

MAX_INT = 2**63 - 1  # a whole-number flag beyond this fits no tensor dimension (int64)
MAX_THREADS = 1024  # --threads beyond this is a typo, not a machine
MAX_TIMEOUT_S = 7 * 24 * 3600  # a week: beyond it, leave --timeout out (wait until Ctrl-C)


def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def positive_int(text: str) -> int:
    value = whole_number(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{short_number(value)} must be positive")
    if value > MAX_INT:
        raise argparse.ArgumentTypeError(f"{short_number(value)} is too large (at most 2^63-1, and a size "
                                         "this large would not fit in memory anyway)")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive number")
    return value


def thread_count(text: str) -> int:
    value = positive_int(text)
    if value > MAX_THREADS:
        raise argparse.ArgumentTypeError(f"{short_number(value)} threads is more than any CPU here runs "
                                         f"(at most {MAX_THREADS})")
    return value


def row_count(text: str) -> int:
    """The report's ``--top``: how many rows, 1 or more."""
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError("--top must be 1 or more")
    return value


def seconds(text: str) -> float:
    """The viewer's ``--timeout``: positive, finite, at most a week."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:  # nan, inf and 1e400 would never time out
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive, finite number of seconds")
    if value > MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"{text} s is more than a week; leave --timeout out to wait until Ctrl-C")
    return value


def short_number(value: int) -> str:
    """A number for a message: ``12345``, or ``about 10^160`` when it has too many digits to read."""
    digits = len(str(abs(value)))
    return str(value) if digits <= 20 else f"about {'-' if value < 0 else ''}10^{digits - 1}"
