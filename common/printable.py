"""Text from outside (a trace's names, a path) made safe to show: every character that would act
instead of showing is written as a visible escape.

A trace's names are data. An op named ``"\\x1b[2J"`` must not clear the terminal, a kernel name
holding U+202E must not reverse the line it is printed on, a newline must not start a second line.
:func:`printable` is the one function that escapes them; the report applies it once where names
enter (:mod:`common.report.load.columns`, the trace's metadata), :func:`common.commands.display_path` to
every path it shows, :func:`common.errors.one_line` to every ``error:`` line. Every renderer (text,
JSON, HTML, the annotated trace) then shows the same escaped text.

Escaped (a character is written as Python writes it in a string literal):

- C0 controls, DEL and C1 controls: ``\\n``, ``\\r``, ``\\t``, ``\\x1b``, ``\\x07``, ``\\x9b``;
- bidirectional controls (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069), invisible
  characters that hide text (U+200B..U+200D, U+2060, U+FEFF), line and paragraph separators
  (U+2028, U+2029): ``\\u202e``;
- lone surrogates (they cannot be encoded to print): ``\\udc80``, except those :func:`os.fsdecode`
  makes of a path's bytes that are not UTF-8 (U+DC80..U+DCFF), written as the byte: ``\\xff``.

Backslashes are kept as they are, so ``printable`` of a printable text is that text.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060\u2066-\u2069\ufeff\ud800-\udfff]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    ch = match.group()
    code = ord(ch)
    if ch in _SHORT:
        return _SHORT[ch]
    if code < 0x100:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's escape of a byte that is not UTF-8
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control, bidirectional, invisible or unencodable character escaped."""
    text = str(text)
    return text if _UNSAFE.search(text) is None else _UNSAFE.sub(_escape, text)


def printable_all(value, depth: int = 64):
    """``value`` (JSON-like: dicts, lists, strings, numbers) with every string in it, keys too, made
    :func:`printable`; deeper than ``depth`` it is returned as it is."""
    if isinstance(value, str):
        return printable(value)
    if depth <= 0:
        return value
    if isinstance(value, dict):
        return {printable(k) if isinstance(k, str) else k: printable_all(v, depth - 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(printable_all(v, depth - 1) for v in value)
    return value
