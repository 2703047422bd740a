"""Reading a trace's bytes: a regular file (or ``-``, standard input) of at most ``max_bytes`` of JSON text,
gzip-compressed or not (gzip is recognised by its magic bytes, not the name, and decompressed no further
than the cap), with or without a UTF-8 byte-order mark. A device such as ``/dev/zero``, a FIFO or a folder
ends in :class:`common.errors.BadInput` with one line that says why; nothing here waits on a writer or reads
without bound. A big plain file is memory-mapped (a private copy-on-write mapping), not copied.
"""

from __future__ import annotations

import mmap
import os
import stat
import sys
import zlib

from common.errors import fail
from common.report.load.inputs import DEFAULT_MAX_BYTES, STDIN, shorten


def read_bytes(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES):
    """The trace's JSON text (gunzipped when the file is gzip; a private copy-on-write mapping of a big
    plain file) and the file's size on disk. Regular files and ``-`` (standard input) only."""
    if str(path) == STDIN:
        data = _read_stdin(max_bytes)
        return (_gunzip(data, max_bytes, "standard input") if data[:2] == b"\x1f\x8b" else data), len(data)
    shown = shorten(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        fail(f"{shown}: no such file")
    except IsADirectoryError:
        fail(f"{shown}: is a directory, not a trace file")
    except OSError as exc:
        fail(f"{shown}: cannot read it ({exc.strerror or exc})")
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            fail(f"{shown}: is a directory, not a trace file")
        fail(f"{shown}: not a regular file (a device, FIFO or socket); the report reads trace files, "
             f"or {STDIN} for standard input")
    with os.fdopen(fd, "rb") as f:
        size = info.st_size
        _check_size(size, max_bytes, shown)
        try:
            head = f.read(2)
            if head != b"\x1f\x8b" and str(path).endswith(".gz"):
                fail(f"{shown}: named .gz but not gzip-compressed")
            if head != b"\x1f\x8b" and size > (1 << 20):  # map it, not copy it (the decoder reads it in place)
                return mmap.mmap(fd, 0, access=mmap.ACCESS_COPY), size
            f.seek(0)
            data = f.read(size + 1)  # (a file that grew since the fstat is caught by the size checks below)
        except ValueError:  # mmap of a file emptied since the fstat above
            data = b""
        except OSError as exc:
            fail(f"{shown}: cannot read it ({exc.strerror or exc})")
    if data[:2] == b"\x1f\x8b":
        return _gunzip(data, max_bytes, shown), size
    _check_size(len(data), max_bytes, shown)
    return data, size


def _check_size(size: int, max_bytes: int, shown: str) -> None:
    if size > max_bytes:
        fail(f"{shown}: over {max_bytes:,} bytes of JSON, the limit (raise it with --max-size)")


def _read_stdin(max_bytes: int) -> bytes:
    chunks, total = [], 0
    stream = sys.stdin.buffer
    while chunk := stream.read1(1 << 20):
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            fail(f"standard input: over {max_bytes:,} bytes, the limit (raise it with --max-size)")
    return b"".join(chunks)


GUNZIP_CHUNK = 16 << 20  # decompressed a piece this big at a time


def _gunzip(data: bytes, max_bytes: int, shown: str) -> bytearray:
    """Every gzip member of ``data``, decompressed a piece at a time into one growing buffer, and no further
    than ``max_bytes`` (a gzip bomb stops there, having held at most the limit: never the limit twice). What
    follows the last member (bytes that are not gzip) is ignored, as gzip(1) does with a warning."""
    out = bytearray()
    try:
        while data[:2] == b"\x1f\x8b":
            data = _gunzip_member(data, out, max_bytes, shown)
    except MemoryError:
        fail(f"{shown}: not enough memory to decompress it ({len(out):,} bytes so far); "
             "lower --max-size, or decompress it with more memory")
    return out


def _gunzip_member(data, out: bytearray, max_bytes: int, shown: str):
    """Append the first gzip member of ``data`` to ``out``; what follows it."""
    member = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = data
    while True:
        want = min(GUNZIP_CHUNK, max_bytes + 1 - len(out))
        try:
            piece = member.decompress(pending, want)
        except zlib.error as exc:
            fail(f"{shown}: not a valid gzip file, truncated or corrupt ({exc})")
        out += piece
        if len(out) > max_bytes:
            fail(f"{shown}: over {max_bytes:,} bytes of JSON once decompressed, the limit (raise it with --max-size)")
        if member.eof:
            return member.unused_data
        pending = member.unconsumed_tail
        if not pending and len(piece) < want:  # all the input read, no more output: it ends inside the stream
            fail(f"{shown}: not a valid gzip file, truncated or corrupt (it ends inside the compressed data)")


def start_of_json(data, path) -> int:
    """Where the JSON starts: after a UTF-8 byte-order mark and leading white space."""
    at = 3 if data[:3] == b"\xef\xbb\xbf" else 0
    while at < len(data):
        chunk = bytes(data[at:at + 65536])
        text = chunk.lstrip()
        if text:
            return at + len(chunk) - len(text)
        at += len(chunk)
    fail(f"{shorten(path)}: empty file, not a trace")
