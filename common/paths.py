"""Artifact names (the files are written by :mod:`common.output`).

A run's files are ``<trace_dir>/<size>_<dtype>_<warm>_<mode>[_<variant>...].txt`` and ``.json``
(``.json.gz`` with ``--gzip``). The name is the whole record of the knobs that change the trace,
so :func:`parse_tag` can read them back (``common.view --list`` does). A default run keeps the
posts' name (``64_bf16_cold_eager``); every other knob adds a variant, in a fixed order:

- ``sched-W-U-A`` (``sched-W-U-A-R`` when REPEAT > 1): a schedule other than the posts' 1,1,3,1;
- ``shapes``, ``mem``, ``stack``: ``--record-shapes``, ``--profile-memory``, ``--with-stack``;
- ``cpu``: ``--device cpu`` on a machine that has CUDA (the default run there is on the GPU);
- a lesson's own variants, ``name-value`` (e.g. ``attn-eager``, ``cache-static``), and
  ``rank<k>`` for one process of a multi-process job.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from common.output import writing

DTYPES = ("bf16", "fp16", "fp32")
WARMTHS = ("warm", "cold")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
TRACE_SUFFIXES = (".json", ".json.gz")
LARGE_TRACE_BYTES = 500_000_000  # Perfetto and TensorBoard become slow to open a trace this big


def mode_label(compile: bool, compile_mode: str = "default") -> str:
    """``eager`` | ``compile`` | ``compile-<mode>`` (the default mode is plain ``compile``)."""
    if not compile:
        return "eager"
    return "compile" if compile_mode == "default" else f"compile-{compile_mode}"


_VARIANT = re.compile(r"^(?:rank(?P<rank>\d+)|(?P<knob>[a-z]+)(?:-(?P<value>[A-Za-z0-9.+-]+))?)$")
_SLUG_DROP = re.compile(r"[^A-Za-z0-9.+-]+")

Variant = tuple[str, str]  # (knob, value); value "" for a plain flag such as ``shapes``


def slug(text: str) -> str:
    """A variant value from free text: ``meta-llama/Llama-3.2-1B`` -> ``meta-llama-Llama-3.2-1B``."""
    return _SLUG_DROP.sub("-", text).strip("-.") or "x"


def variant_text(knob: str, value: str = "") -> str:
    if knob == "rank":
        return f"rank{value}"
    return f"{knob}-{value}" if value else knob


def make_tag(shape: Sequence[int], dtype: str, warm: bool, mode: str, variants: Sequence[Variant] = ()) -> str:
    """``make_tag((64, 128, 768, 3072), "bf16", True, "compile")`` -> ``64x128x768x3072_bf16_warm_compile``;
    ``make_tag((64,), "bf16", False, "eager", [("sched", "0-0-20")])`` -> ``64_bf16_cold_eager_sched-0-0-20``."""
    size = "x".join(str(int(n)) for n in shape)
    parts = [size, dtype, "warm" if warm else "cold", mode]
    for knob, value in variants:
        text = variant_text(knob, value)
        if not _VARIANT.match(text):
            raise ValueError(f"{text!r} is not a variant (a lower-case knob, '-' and letters, digits, '.', '+', '-')")
        parts.append(text)
    return "_".join(parts)


@dataclass(frozen=True)
class Tag:
    shape: tuple[int, ...]
    dtype: str
    warm: bool
    mode: str  # eager | compile | compile-<torch.compile mode>
    variants: tuple[Variant, ...] = ()  # every knob besides the four above, in the name's order

    def variant(self, knob: str) -> str | None:
        """The value of one variant (``""`` for a flag), None when the run did not set it."""
        return next((value for k, value in self.variants if k == knob), None)

    @property
    def variants_text(self) -> str:
        """The variants as the name writes them (``sched-0-0-20 shapes``), or ``""`` for a default run."""
        return " ".join(variant_text(k, v) for k, v in self.variants)


def parse_tag(name: str) -> Tag | None:
    """Read a tag back from a file name (suffixes ignored); None when the name is not one of ours."""
    stem = Path(name).name
    for suffix in (".annotated.json.gz", ".annotated.json", ".json.gz", ".json", ".txt", ".html"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    parts = stem.split("_")
    if len(parts) < 4:
        return None
    size, dtype, warm, mode = parts[:4]
    variants = []
    for text in parts[4:]:
        match = _VARIANT.match(text)
        if not match:
            return None
        if match["rank"] is not None:
            variants.append(("rank", match["rank"]))
        else:
            variants.append((match["knob"], match["value"] or ""))
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
    return Tag(shape, dtype, warm == "warm", mode, tuple(variants))


def trace_file(trace_dir: Path, tag: str, gzip: bool) -> Path:
    return Path(trace_dir) / f"{tag}{'.json.gz' if gzip else '.json'}"


def table_file(trace_dir: Path, tag: str) -> Path:
    return Path(trace_dir) / f"{tag}.txt"


def html_file(trace_dir: Path, tag: str) -> Path:
    """The report page a lesson writes with ``--html``."""
    return Path(trace_dir) / f"{tag}.html"


def annotated_file(trace_dir: Path, tag: str, gzip: bool) -> Path:
    """The trace with the report's Findings track, written with ``--annotate``."""
    return Path(trace_dir) / f"{tag}.annotated{'.json.gz' if gzip else '.json'}"


@contextlib.contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """A temporary path for ``final``, renamed into place only if the block succeeds: the suite's one
    writer, :func:`common.output.writing` (kept here for callers of this name)."""
    with writing([final]) as (tmp,):
        yield tmp
