"""Decoding a big trace a slice at a time: the events array cut between events (:mod:`.spans`), each
slice decoded, its complete and ``[memory]`` events turned into columns and its structs freed before the
next, so the peak holds columns, not every decoded event; with ``fork`` (the command line, a plain
mapped file), a forked child does the second half of the slices and sends back its columns. Any
surprise (no cut, a ``B`` left open at a slice's end, a decode error) returns None: the caller decodes
the whole text at once, with the same result.
"""

from __future__ import annotations

import mmap
import os
import pickle
from contextlib import contextmanager
from typing import Optional

import msgspec

from common.report.load.columns import Columns, extract, merge
from common.report.load.events import META_KEYS, Schema, complete_events, memory_events
from common.report.load.spans import event_cuts

SLICE_BYTES = 32 << 20  # the size of a slice
PARENT_SHARE = 0.52  # of the slices, decoded by the parent (the child's tail: ~0.01 s a slice to pickle and copy)
SHARED_SHARE = 4  # the child's columns (about a tenth of its text's size, pickled) fit a quarter of the text
IN_SHARED, THROUGH_PIPE = b"S", b"P"  # where the child's pickled columns are: the first byte it writes


def load_sliced(data, start: int, fork: bool) -> Optional[tuple[Columns, dict, int]]:
    """Decode + extract the events SLICE_BYTES at a time, each slice's structs freed before the next (the
    peak holds columns, not every decoded event); with ``fork``, a child does the second half of the
    slices. None on any surprise (no cut, a ``B`` event, a decode error): the caller decodes the whole."""
    if fork:
        return _load_split(data, start)
    found = _spans(data, start, SLICE_BYTES)
    if found is None:
        return None
    spans, end = found
    decoded = _decode_spans(data, start, spans, pair_begins=False)
    if decoded is None:
        return None
    parts, meta, n_events = decoded
    return _with_tail_keys(data, start, end, (merge(*parts), meta, n_events))


def _spans(data, start: int, every: int) -> Optional[tuple[list, int]]:
    """((lo, hi) of each slice: the first holds the document's head, the others start at a comma; the
    array's ``]``), or None when the events array has no cut."""
    found = event_cuts(data, start, every)
    if found is None:
        return None
    cuts, end = found
    bounds = [start] + cuts + [end]
    return list(zip(bounds, bounds[1:])), end


def _with_tail_keys(data, start: int, end: int, loaded):
    """``loaded`` with the metadata keys that follow the events array (e.g. ``traceName``)."""
    if loaded is not None and data[start:start + 1] != b"[":
        loaded[1].update({k: v for k, v in _tail_keys(data[end + 1:]).items() if k not in loaded[1]})
    return loaded


def _load_split(mm, start: int) -> Optional[tuple[Columns, dict, int]]:
    """The first half of the slices here, the second in a forked child that sends back its columns."""
    found = _spans(mm, start, min(SLICE_BYTES, max(1, (len(mm) - start) // 2)))
    if found is None:
        return None
    spans, end = found
    # this process's share is a little the larger: the child then pickles its columns while this one decodes
    half = min(len(spans) - 1, max(1, round(len(spans) * PARENT_SHARE)))
    read_end, write_end = os.pipe()
    shared = mmap.mmap(-1, max(mmap.PAGESIZE, (len(mm) - start) // SHARED_SHARE))  # pages exist once written
    try:
        pid = os.fork()
    except OSError:  # no memory or processes left for a fork: one process
        os.close(read_end)
        os.close(write_end)
        shared.close()
        return None
    if pid == 0:
        os.close(read_end)
        os._exit(_second_half_in_child(mm, start, spans[half:], write_end, shared))
    os.close(write_end)
    try:
        first = _decode_spans(mm, start, spans[:half], pair_begins=False)
        with os.fdopen(read_end, "rb") as f:
            payload = f.read()
        _, status = os.waitpid(pid, 0)
        if first is None or status != 0 or not payload:
            return None
        parts_a, meta, n_a = first
        parts_b, n_b = _received(payload, shared)
    except BaseException:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except OSError:
            pass
        raise
    finally:
        shared.close()
    return _with_tail_keys(mm, start, end, (merge(*parts_a, *parts_b), meta, n_a + n_b))  # each column joined once


def _second_half_in_child(mm, start: int, spans: list, write_end: int, shared: mmap.mmap) -> int:
    """The child: decode + extract ``spans``, send the columns; its exit code. B/E pairs that lie wholly
    in one slice pair up; a ``B`` left open at a slice's end fails it (the parent falls back). The columns
    go into ``shared`` (memory mapped by both processes) and only their size through the pipe, so the child
    is done without waiting for the parent to read them; columns too big for it go through the pipe."""
    try:
        decoded = _decode_spans(mm, start, spans, pair_begins=True)
        if decoded is None:
            return 1
        parts, _, n_events = decoded
        payload = pickle.dumps((parts, n_events), protocol=pickle.HIGHEST_PROTOCOL)
        if len(payload) <= len(shared):
            shared[:len(payload)] = payload
            payload = IN_SHARED + len(payload).to_bytes(8, "little")
        else:
            payload = THROUGH_PIPE + payload
        with os.fdopen(write_end, "wb") as f:
            f.write(payload)
        return 0
    except BaseException:
        return 1


def _received(payload: bytes, shared: mmap.mmap):
    """The child's (columns, events) from what it wrote to the pipe (see :func:`_second_half_in_child`)."""
    if payload[:1] == IN_SHARED:
        with memoryview(shared)[:int.from_bytes(payload[1:9], "little")] as view:
            return pickle.loads(view)
    return pickle.loads(memoryview(payload)[1:])


def _decode_spans(data, start: int, spans: list, pair_begins: bool) -> Optional[tuple[list, dict, int]]:
    """(the columns of each slice, metadata, events) of consecutive spans of the events array, one slice at a time: each
    decoded, its complete and [memory] events extracted, its structs freed, its text's pages given back.
    None when a slice fails to decode or has a ``B`` event (left open at its end, or at all without
    ``pair_begins``). The metadata: the head's keys (in the first span) and those after the array."""
    schema, parts, meta, n_events = Schema(), [], {}, 0
    array_form = data[start:start + 1] == b"["
    for lo, hi in spans:
        head = lo == start
        try:
            with _slice_text(data, start, lo, hi, array_form) as text:
                events, head_meta = schema.decode(text, array_form if head else True)
        except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
            return None
        if schema.saw_begin and not pair_begins:
            return None
        complete = complete_events(events, schema.saw_begin, schema.begin_type, whole=False)
        if complete is None:
            return None
        meta.update(head_meta)
        parts.append(extract(complete, memory_events(events)))
        n_events += len(events)
        del events, complete
        _give_back_pages(data, start if head else lo, hi)
    return parts, meta, n_events


@contextmanager
def _slice_text(data, start: int, lo: int, hi: int, array_form: bool):
    """The JSON text of one slice: the head span (``lo == start``) closed after its last event with ``]``
    or ``]}``; any other span ``[`` + its events + ``]``. A mapping is patched in place (private
    copy-on-write pages) and restored; bytes are copied."""
    head = lo == start
    close = (b"] " if array_form else b"]}") if head else b"]"
    patches = [(hi, close)] if head else [(lo, b"["), (hi, close)]
    if not isinstance(data, mmap.mmap):
        text = bytes(data[start:hi]) + close if head else b"[" + data[lo + 1:hi] + close
        yield text
        return
    saved = [(at, bytes(data[at:at + len(new)])) for at, new in patches]
    for at, new in patches:
        data[at:at + len(new)] = new
    view = memoryview(data)[start if head else lo:hi + len(close)]
    try:
        yield view
    finally:
        view.release()
        for at, old in saved:
            data[at:at + len(old)] = old


def _give_back_pages(data, lo: int, hi: int) -> None:
    """Drop the mapped pages of ``[lo, hi)`` from memory (decoded; read again from the file if ever needed)."""
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        first, last = -(-lo // mmap.PAGESIZE) * mmap.PAGESIZE, hi // mmap.PAGESIZE * mmap.PAGESIZE
        if last > first:
            data.madvise(mmap.MADV_DONTNEED, first, last - first)


def _tail_keys(tail: bytes) -> dict:
    tail = tail.lstrip()
    if not tail.startswith(b","):
        return {}
    try:
        extra = msgspec.json.decode(b"{" + tail[1:])
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return {}
    return {k: extra[k] for k in META_KEYS if isinstance(extra, dict) and extra.get(k) is not None}
