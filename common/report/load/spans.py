"""Spans: where a big trace's ``traceEvents`` array can be cut between two events, so the loader
(:mod:`.reader`) decodes it a slice at a time (and in two processes on the command line).

Bytes only: nothing here decodes an event. A cut is a comma between ``}`` and ``{"ph"`` (how Kineto
and Chrome write one event per line); a comma that only looks like one (inside a nested value) leaves
a slice whose brackets do not balance, its decode fails, and the loader falls back to decoding the
whole text at once, so a wrong guess costs time, never a wrong answer.
"""

from __future__ import annotations

import re
from typing import Optional

import msgspec

BOUNDARY = re.compile(rb"\}\s*(,)\s+\{\s*\"ph\"")
SEARCH_WINDOW = 8 << 20  # how far past each wanted cut a boundary is looked for


def event_cuts(text, start: int, every: int) -> Optional[tuple[list, int]]:
    """(the commas that cut the events array about every ``every`` bytes, in order; the position of the
    array's closing ``]``), or None when the text has no cut or its array's end cannot be told."""
    n = len(text)
    cuts = []
    at = start + every
    while at < n:
        found = BOUNDARY.search(text, at, min(n, at + SEARCH_WINDOW))
        if not found:
            at += every
            continue
        cuts.append(found.start(1))
        at = cuts[-1] + every
    if not cuts:
        return None
    end = _array_end(text, start, cuts[-1])
    if end is None:
        return None
    return [c for c in cuts if c < end], end


def _array_end(text, start: int, after: int) -> Optional[int]:
    """The events array's ``]``: the last ``]`` after ``after`` preceded by ``}`` whose tail parses as
    the rest of the document."""
    array_form = text[start:start + 1] == b"["
    pos = len(text)
    for _ in range(8):
        pos = text.rfind(b"]", after, pos)
        if pos < 0:
            return None
        if text[max(after, pos - 64):pos].rstrip().endswith(b"}") and _tail_closes(text[pos + 1:], array_form):
            return pos
    return None


def _tail_closes(tail: bytes, array_form: bool) -> bool:
    """Whether what follows the events array ends the document (the rest of an object, or nothing)."""
    tail = tail.strip()
    if array_form:
        return not tail
    if tail == b"}":
        return True
    if not tail.startswith(b","):
        return False
    try:
        msgspec.json.decode(b"{" + tail[1:])
        return True
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return False
