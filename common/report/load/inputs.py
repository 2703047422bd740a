"""What the report accepts as a trace, in words and numbers (no numpy, no msgspec: the command line
answers --help and bad flags without loading the pipeline)."""

from __future__ import annotations

from common.commands import shorten  # noqa: F401 - the report's modules name it here, with STDIN

STDIN = "-"  # the name that reads a trace from standard input
DEFAULT_MAX_BYTES = 4 << 30  # JSON text (after gunzip) the report reads at most; --max-size changes it

