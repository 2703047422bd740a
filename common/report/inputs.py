"""What the report accepts as a trace, in words and numbers (no numpy, no msgspec: the command line
answers --help and bad flags without loading the pipeline)."""

from __future__ import annotations

import os

STDIN = "-"  # the name that reads a trace from standard input
DEFAULT_MAX_BYTES = 4 << 30  # JSON text (after gunzip) the report reads at most; --max-size changes it


def shorten(path: str | os.PathLike, width: int = 120) -> str:
    """A path for an error line: whole when short, else its start and end around an ellipsis."""
    text = str(path)
    return text if len(text) <= width else f"{text[:width // 2 - 1]}…{text[-(width // 2):]}"
