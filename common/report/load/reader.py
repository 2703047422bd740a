"""Load: a trace file -> the columns the model reads.

What is read: a regular file (or ``-``, standard input) of at most ``max_bytes`` of JSON text,
gzip-compressed or not (gzip is recognised by its magic bytes, not the name, and decompressed no
further than the cap), holding either a JSON object with ``traceEvents`` (Kineto, Chrome's JSON
Object format) or a bare JSON array of events (Chrome's JSON Array format), with or without a
UTF-8 byte-order mark. Anything else (a device such as ``/dev/zero``, a FIFO, a folder, text that
is not JSON, JSON nested deeper than Python can follow) ends in :class:`common.errors.BadInput`
with one line that says why; nothing here waits on a writer or reads without bound.

The modules: :mod:`.file_bytes` (bytes, gzip), :mod:`.events` (the structs events decode into),
:mod:`.lenient` (the slow path and the error lines), :mod:`.slices` (a big text a slice at a time, in one
process or two), :mod:`.columns` (structs -> numpy columns). This one puts them together, reads the
trace-level metadata and the run's knobs, and drops the structs before the model is built.

Speed and memory are the loader's business and stay inside ``load/``: a plain JSON file is memory-mapped,
not copied; the garbage collector is off while millions of structs are made; JSON text over
``SPLIT_MIN`` is decoded a slice of ``SLICE_BYTES`` at a time (cut between events, :mod:`.spans`),
each slice's structs turned into columns and freed before the next, so the peak holds columns, not
every decoded event; on the command line a big plain file's slices are shared by two processes, half
each (:func:`load` with ``parallel``). A smaller file is decoded at once, and its structs can be kept
until the process leaves with ``os._exit`` instead of being freed one by one
(:func:`keep_decoded_until_exit`).
"""

from __future__ import annotations

import gc
import mmap
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import msgspec

from common.errors import fail
from common.inductor_source import read_copies
from common.knobs import METADATA_KEY, RunKnobs
from common.printable import printable_all
from common.report.load.columns import Columns, extract
from common.report.load.events import Schema, complete_events, memory_events
from common.report.load.inputs import DEFAULT_MAX_BYTES, shorten
from common.report.load.lenient import json_error, lenient_decode
from common.report.load.file_bytes import read_bytes, start_of_json
from common.report.load.heap import keep_freed_memory
from common.report.load.slices import load_sliced

SPLIT_MIN = 64 << 20  # JSON text this big is decoded a slice at a time; a plain file, by two processes
MAX_META_DEPTH = 32  # trace-level metadata nested deeper than this is dropped (no real trace nests so)


@dataclass(frozen=True, eq=False)
class Loaded:
    """What the model starts from: the columns of the complete events, the trace-level metadata and
    the run's knobs (a lesson's ``"lesson"`` metadata, parsed here once; None for other traces)."""

    path: str
    size_bytes: int  # the JSON text's size (decompressed)
    file_bytes: int  # the file's size on disk
    columns: Columns
    meta: dict
    knobs: Optional[RunKnobs]
    n_events: int  # every event of the trace, of any phase
    notes: tuple  # str
    generated: tuple = ()  # the compiled modules copied beside the trace (common.inductor_source.CompiledModule)


def load(path: str | os.PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES, parallel: bool = False) -> Loaded:
    """Read a trace file into :class:`Loaded`; bad input raises :class:`common.errors.BadInput`.

    With ``parallel`` (the command line), a big plain-JSON file is split at an event boundary near
    its middle and a forked child decodes and extracts the second half while this process does the
    first; any surprise falls back to one process, with the same result.
    """
    data, file_bytes = read_bytes(path, max_bytes)
    size = len(data)
    start = start_of_json(data, path)
    enabled = gc.isenabled()
    gc.disable()  # millions of new objects: generational GC passes would only cost time
    try:
        sliced = None
        if size >= SPLIT_MIN:
            if parallel:
                keep_freed_memory()  # a big trace on the command line: freed arrays' pages serve the next ones
            sliced = load_sliced(data, start, fork=parallel and isinstance(data, mmap.mmap) and hasattr(os, "fork")
                                 and not os.environ.get("REPORT_ONE_PROCESS"))
        if sliced is not None:
            columns, meta, n_events = sliced
        else:
            events, complete, meta = _decode_whole(data, start, path)
            if isinstance(data, mmap.mmap):
                data.close()  # unmap the text before the columns are made: they never need both
            del data
            columns, n_events = extract(complete, memory_events(events)), len(events)
            _keep_or_drop(events, complete)
            del events, complete
    finally:
        if enabled:
            gc.enable()
    meta, notes = _bounded_meta(meta)
    meta = printable_all(meta)  # names are data: a control character in a GPU's or host's name is shown escaped
    return Loaded(str(path), size, file_bytes, columns, meta, RunKnobs.from_json(meta.get(METADATA_KEY)), n_events,
                  tuple(notes), read_copies(Path(path)) if str(path) != "-" else ())


def _decode_whole(data, start: int, path) -> tuple[list, list, dict]:
    """One process: (every decoded event, the complete ones, the metadata)."""
    schema = Schema()
    view = memoryview(data)[start:]
    try:
        try:
            events, meta = schema.decode(view, data[start:start + 1] == b"[")
            has_begin = schema.saw_begin
        except msgspec.ValidationError:  # fields of unexpected types, unknown phases: the slow path
            events, meta = lenient_decode(view, path, schema)
            has_begin = True
        except UnicodeDecodeError:  # a string that is not UTF-8: read it with U+FFFD in its place
            events, meta = lenient_decode(bytes(view).decode("utf-8", "replace").encode(), path, schema)
            has_begin = True
        except msgspec.DecodeError as exc:
            fail(f"{shorten(path)}: {json_error(view, exc)}")
    except RecursionError:
        fail(f"{shorten(path)}: JSON nested too deeply to read (arrays or objects inside each other "
             f"about {sys.getrecursionlimit()} levels deep); no trace nests like that")
    finally:
        view.release()
    return events, complete_events(events, has_begin, schema.begin_type), meta


def _bounded_meta(meta: dict) -> tuple[dict, list]:
    """The trace-level metadata without values nested deeper than MAX_META_DEPTH (with a note)."""
    deep = [k for k, v in meta.items() if _deeper_than(v, MAX_META_DEPTH)]
    if not deep:
        return meta, []
    return ({k: v for k, v in meta.items() if k not in deep},
            [f"ignored the trace's {', '.join(deep)}: nested more than {MAX_META_DEPTH} levels deep"])


def _deeper_than(value, limit: int) -> bool:
    todo = [(value, 0)]
    while todo:
        value, depth = todo.pop()
        if isinstance(value, (dict, list)):
            if depth >= limit:
                return True
            todo.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return False


# ----------------------------------------------------------------------------- leaving fast

_kept_until_exit: Optional[list] = None  # switched on by keep_decoded_until_exit()


def keep_decoded_until_exit() -> None:
    """For a command line that ends with ``os._exit``: keep the decoded structs instead of freeing
    millions of small objects one by one (the process leaves without freeing anything)."""
    global _kept_until_exit
    if _kept_until_exit is None:
        _kept_until_exit = []


def _keep_or_drop(*objects) -> None:
    if _kept_until_exit is not None:
        _kept_until_exit.append(objects)
