"""For the command line only: keep freed memory in the process instead of giving it back at each free.

A big trace's stages make and drop many temporary numpy arrays of tens of MB. glibc's ``malloc`` serves
each from a fresh ``mmap`` and unmaps it on free, so every array's pages are faulted in (and zeroed by the
kernel) again: about a third of the model's and the tables' CPU time on the 12-fold benchmark input
(``benchmarks/README.md``). With ``mmap`` off for ``malloc`` and the heap's top never trimmed, a freed
array's pages serve the next one. Peak memory is the heap's high-water mark, about what it was on a big
trace (+2 % on the 12-fold input) but more on a small one (the gzipped original: 167 -> 224 MiB), so
:func:`~.reader.load` switches it on for a big text on the command line only (``parallel``, the text it
slices); a library caller (``analyze()`` inside a torch program) keeps its allocator as it was. A no-op off glibc.

numpy also asks the kernel for huge pages for each array of 4 MB or more (``madvise(MADV_HUGEPAGE)``); where
the kernel then compacts memory to find them (``defrag`` set to ``madvise``, a machine whose memory is split
by its page cache), each new array stalls in the kernel: joining the 48-fold input's columns took 0.94 s, 0.88
of it in the kernel, and 0.25 s without. :func:`keep_freed_memory` turns that request off as well."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

try:
    from numpy._core import multiarray
except ImportError:  # numpy 1.x
    from numpy.core import multiarray

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
_NEVER_TRIM = 2**31 - 1  # mallopt takes an int


def keep_freed_memory() -> bool:
    """Switch glibc's ``malloc`` to reuse freed memory and numpy to ask for no huge pages (see the module's
    docstring); whether ``malloc`` took it."""
    if not sys.platform.startswith("linux"):
        return False
    _no_huge_pages()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, _NEVER_TRIM))


def _no_huge_pages() -> None:
    """numpy's switch for ``madvise(MADV_HUGEPAGE)`` on new arrays, off (a private function: skipped if gone)."""
    switch = getattr(multiarray, "_set_madvise_hugepage", None)
    if switch is not None:
        switch(False)
