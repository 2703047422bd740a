"""Artifact names and atomic writes.

A run's files are ``<trace_dir>/<size>_<dtype>_<warm>_<mode>.txt`` and ``.json`` (``.json.gz``
with ``--gzip``). The name is the whole record of the knobs that change the trace, so
:func:`parse_tag` can read them back (``common.view --list`` does).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

DTYPES = ("bf16", "fp16", "fp32")
WARMTHS = ("warm", "cold")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
TRACE_SUFFIXES = (".json", ".json.gz")


def mode_label(compile: bool, compile_mode: str = "default") -> str:
    """``eager`` | ``compile`` | ``compile-<mode>`` (the default mode is plain ``compile``)."""
    if not compile:
        return "eager"
    return "compile" if compile_mode == "default" else f"compile-{compile_mode}"


def make_tag(shape: Sequence[int], dtype: str, warm: bool, mode: str) -> str:
    """``make_tag((64, 128, 768, 3072), "bf16", True, "compile")`` -> ``64x128x768x3072_bf16_warm_compile``."""
    size = "x".join(str(int(n)) for n in shape)
    return f"{size}_{dtype}_{'warm' if warm else 'cold'}_{mode}"


@dataclass(frozen=True)
class Tag:
    shape: tuple[int, ...]
    dtype: str
    warm: bool
    mode: str  # eager | compile | compile-<torch.compile mode>

    @property
    def compiled(self) -> bool:
        return self.mode != "eager"


def parse_tag(name: str) -> Tag | None:
    """Read a tag back from a file name (suffixes ignored); None when the name is not one of ours."""
    stem = Path(name).name
    for suffix in (".json.gz", ".json", ".txt"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    parts = stem.split("_")
    if len(parts) != 4:
        return None
    size, dtype, warm, mode = parts
    try:
        shape = tuple(int(p) for p in size.split("x"))
    except ValueError:
        return None
    if not shape or any(n <= 0 for n in shape) or dtype not in DTYPES or warm not in WARMTHS:
        return None
    if mode not in ("eager", "compile") and not (
        mode.startswith("compile-") and mode[len("compile-"):] in COMPILE_MODES[1:]
    ):
        return None
    return Tag(shape, dtype, warm == "warm", mode)


def trace_file(trace_dir: Path, tag: str, gzip: bool) -> Path:
    return Path(trace_dir) / f"{tag}{'.json.gz' if gzip else '.json'}"


def table_file(trace_dir: Path, tag: str) -> Path:
    return Path(trace_dir) / f"{tag}.txt"


@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; rename it into place only if the block succeeds.

    The temporary name keeps the final suffix (``.json.gz`` makes the profiler gzip) and starts
    with a dot, so listings skip it. A file appears whole or not at all.
    """
    final = Path(final)
    tmp = final.with_name(f".tmp-{os.getpid()}-{final.name}")
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def atomic_write_text(final: Path, text: str) -> None:
    with atomic_path(final) as tmp:
        tmp.write_text(text, encoding="utf-8")
