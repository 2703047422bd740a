"""Every file the suite writes goes through one writer: whole, beside its target, or not at all.

The report's ``-o``, ``--html`` and ``--annotate``, and a lesson's table, trace, page and annotated
copy are all written with :func:`writing` (or :func:`write_file`, its one-call form):

- a target must be a regular file or a new name. A folder, a device (``/dev/null``), a FIFO (which
  would wait for a reader forever), a socket, or a symbolic link (to a file, a folder or nothing) is
  refused in one line: an output never writes through a link into a file it does not name
  (:func:`check_target`, the one check every output goes through);
- two outputs that are one file (the same path, or the same file through links) are refused
  (:func:`check_targets`);
- the bytes go to a temporary file with the target's own name in a hidden folder beside it
  (``.tmp-<pid>-<random>/<name>``: the same file system, and a ``.json.gz`` name still makes the
  profiler gzip), renamed over the target when the block succeeds. On any failure, and on SIGINT or
  SIGTERM (:mod:`common.errors` turns them into exceptions and removes registered temporaries
  itself), the hidden folder goes with everything in it, the exporter's own temporaries included
  (Kineto writes ``<name>.tmp`` and renames it), and so do the folders the writer created;
- a write that fails is one ``error:`` line (:class:`~common.errors.BadInput`, exit status 2): a full
  disk (ENOSPC, EDQUOT) says so, and so does an exporter that wrote nothing (Kineto fails silently);
- a hidden folder that a writer killed mid-write left (``kill -9``: nothing of this process runs to remove
  it) is removed by the next write into the same folder (:func:`remove_stale_temporaries`).

Standard output (``-o -``) is written with :func:`write_stdout`: EPIPE stays BrokenPipeError (the
reader left), any other error is one line.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from common.errors import BadInput, StdoutError, at_interrupt, describe_os_error, fail, interrupts_deferred
from common.commands import display_path, shorten
from common.printable import printable

STDOUT = "-"
TMP_PREFIX = ".tmp-"  # hidden: listings (common.view --list, a job's folder) skip it
_NOTHING_WRITTEN = "nothing was written"
_NOT_REGULAR = "not a regular file (a device, FIFO or socket); name a new file or a regular one"


def shown(path, flag: str | None = None) -> str:
    """How an error line names an output: ``--html out.html`` as typed, a lesson's file relative to
    the project when that is shorter; long paths shortened."""
    return f"{flag} {shorten(path)}" if flag else shorten(display_path(Path(path)))


def check_target(path, flag: str | None = None) -> Path:
    """The file that writing ``path`` replaces: ``path`` itself, when it is new or a regular file.
    Anything else is refused in one line, a symbolic link too (whatever it names: writing through it
    would replace a file the command line does not name)."""
    p = Path(path)
    if os.path.islink(p):
        fail(f"{_link_label(p, flag)}: {_link_refused(p)}")
    label = shown(path, flag)
    try:
        info = os.stat(p)
    except FileNotFoundError:
        return p
    except NotADirectoryError:
        fail(f"{label}: cannot write there (a part of the path is a file, not a folder)")
    except OSError as exc:
        fail(f"{label}: cannot write there ({exc.strerror or exc})")
    if stat.S_ISDIR(info.st_mode):
        fail(f"{label}: is a directory; name a file")
    if not stat.S_ISREG(info.st_mode):
        fail(f"{label}: {_NOT_REGULAR}")
    return p


def _link_label(link: Path, flag: str | None) -> str:
    """How an error line names a symbolic link: itself, not the file it names (:func:`shown` resolves)."""
    if flag:
        return shown(link, flag)
    return shorten(os.path.join(display_path(link.parent), printable(link.name)))


def _link_refused(link: Path) -> str:
    """Why a symbolic link is not written: what it points at, in words."""
    try:
        to = f"a symbolic link to {shorten(os.readlink(link), 60)}"
    except OSError:
        to = "a symbolic link"
    if not os.path.exists(link):
        to += " (which does not exist)"
    return f"{to}; an output is never written through a link: name a new file or a regular one"


def identity(path) -> tuple:
    """What makes two names one file: device and inode when it exists, else the path with every
    link and ``..`` resolved."""
    try:
        info = os.stat(path)
        return ("inode", info.st_dev, info.st_ino)
    except OSError:
        return ("path", os.path.realpath(os.path.abspath(path)))


def check_targets(named: Sequence[tuple[str | None, object]]) -> list[Path]:
    """Check every (flag, path) output with :func:`check_target`, and that no two are one file
    (standard output, ``-``, is not a file here). Returns the files to replace."""
    seen: dict[tuple, str] = {}
    finals = []
    for flag, path in named:
        if path is None or str(path) == STDOUT:
            continue
        finals.append(check_target(path, flag))
        key = identity(path)
        label = shown(path, flag)
        if key in seen:
            fail(f"{seen[key]} and {label} are the same file; give each output its own")
        seen[key] = label
    return finals


def check_folder(folder: Path) -> None:
    """A folder that a write could create or fill: the nearest part of it that exists must be a
    writable folder. Nothing is created here (a run that fails before writing leaves no folder)."""
    label = shown(folder)
    p = Path(os.path.abspath(folder))
    while True:
        try:
            info = os.stat(p)
            break
        except (FileNotFoundError, NotADirectoryError):  # not there yet, or under a file (said below)
            if p.parent == p:
                fail(f"cannot write to the trace folder {label}: no folder of its path exists")
            p = p.parent
        except OSError as exc:
            fail(f"cannot write to the trace folder {label}: {exc.strerror or exc}")
    if not stat.S_ISDIR(info.st_mode):
        fail(f"cannot write to the trace folder {label}: {shown(p)} is a file, not a folder")
    if not os.access(p, os.W_OK | os.X_OK):
        why = "read-only file system" if _read_only(p) else "permission denied"
        fail(f"cannot write to the trace folder {label}: {why}")
    if _disk_full(p):
        fail(f"cannot write to the trace folder {label}: the disk is full (no space left on {shown(p)}'s "
             "file system)")


def _read_only(p: Path) -> bool:
    try:
        return bool(os.statvfs(p).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _disk_full(folder: Path) -> bool:
    try:
        v = os.statvfs(folder)
    except OSError:
        return False
    return v.f_bavail == 0 or (v.f_files > 0 and v.f_favail == 0)


@dataclass
class _Pending:
    final: Path  # the file replaced at commit
    folder: Path  # the hidden temporary folder beside it
    tmp: Path  # folder / final.name: what the block writes


def _missing_folders(parent: Path) -> list[Path]:
    """The folders to create for ``parent`` to exist, outermost first."""
    missing = []
    p = Path(os.path.abspath(parent))
    while not p.exists() and p.parent != p:
        missing.append(p)
        p = p.parent
    return missing[::-1]


@contextlib.contextmanager
def writing(paths: Sequence, *, flag: str | None = None, what: str = "the file",
            make_folders: bool = False) -> Iterator[list[Path]]:
    """Temporary paths for ``paths`` (one each, same order); every one is renamed over its target
    when the block succeeds and has written it. ``flag`` and ``what`` name the output in an error
    line (``--html out.html: cannot write the page (...)``). ``make_folders`` creates the missing
    folders on the way (removed again if the write fails); otherwise a missing folder is refused."""
    finals = check_targets([(flag, p) for p in paths])
    label = shown(paths[0], flag) if len(paths) == 1 else shown(Path(paths[0]).parent)
    created: list[Path] = []
    pending: list[_Pending] = []

    def cleanup(committed: bool = False) -> None:
        for item in pending:
            shutil.rmtree(item.folder, ignore_errors=True)
        if not committed:
            for folder in reversed(created):
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only when empty: never what someone else put there

    forget = at_interrupt(cleanup)
    committed = False
    try:
        for final in finals:
            missing = _missing_folders(final.parent)
            if missing and not make_folders:
                fail(f"{label}: no such folder {shown(missing[0])}")
            for folder in missing:
                try:
                    folder.mkdir()
                except FileExistsError:
                    continue
                created.append(folder)
        for parent in {final.parent for final in finals}:
            remove_stale_temporaries(parent)
        for final in finals:
            folder = final.parent / f"{TMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
            item = _Pending(final, folder, folder / final.name)
            pending.append(item)  # before it exists: a signal now still removes it
            folder.mkdir(mode=0o700)
        yield [item.tmp for item in pending]
        for item in pending:
            if not item.tmp.is_file():
                raise FileNotFoundError(errno.ENOENT, _NOTHING_WRITTEN, str(item.tmp))
        with interrupts_deferred():  # the set is renamed whole; an interrupt meanwhile is raised after
            for item in pending:
                check_target(item.final)  # still a regular file or new (a FIFO made meanwhile is refused)
                _keep_mode(item)
                os.replace(item.tmp, item.final)
            committed = True
    except OSError as exc:
        raise BadInput(f"{label}: cannot write {what} ({_why(exc, pending)})") from None
    finally:
        cleanup(committed)
        forget()


_TMP_NAME = re.compile(re.escape(TMP_PREFIX) + r"(\d+)-[0-9a-f]{8}")


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the hidden temporary folders (``.tmp-<pid>-<8 hex>``) in ``folder`` that a writer killed
    mid-write left (``kill -9``: no cleanup ran): this user's, whose process no longer runs. A live writer's,
    another user's, a link or anything else named otherwise is left alone. Returns what was removed."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        found = _TMP_NAME.fullmatch(entry.name)
        if found is None or not entry.is_dir(follow_symlinks=False) or _running(int(found[1])):
            continue
        with contextlib.suppress(OSError):
            if entry.stat(follow_symlinks=False).st_uid == os.geteuid():
                shutil.rmtree(entry.path)
                removed.append(Path(entry.path))
    return removed


def _running(pid: int) -> bool:
    """Whether a process ``pid`` runs (another user's too: then it may be a writer, and is left alone)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


def _keep_mode(item: _Pending) -> None:
    """A file replaced keeps its permissions (a new one gets the umask's)."""
    with contextlib.suppress(OSError):
        os.chmod(item.tmp, stat.S_IMODE(os.stat(item.final).st_mode))


def _why(exc: OSError, pending: list[_Pending]) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return describe_os_error(exc)
    if exc.errno == errno.ENOENT and exc.strerror == _NOTHING_WRITTEN:  # the exporter failed silently
        if pending and _disk_full(pending[0].folder.parent):
            return "the disk is full"
        return "nothing was written to it: the exporter failed without saying why"
    return exc.strerror or str(exc)


def write_file(path, data: bytes, *, flag: str | None = None, what: str = "the file",
               make_folders: bool = False) -> int:
    """Write ``data`` to ``path`` with :func:`writing`; returns its size."""
    with writing([path], flag=flag, what=what, make_folders=make_folders) as (tmp,):
        with open(tmp, "wb") as f:
            f.write(data)
    return len(data)


def write_stdout(data: bytes) -> None:
    """``data`` on standard output: a reader that left raises BrokenPipeError, any other error is one line."""
    try:
        sys.stdout.flush()
        out = sys.stdout.buffer
        out.write(data)
        out.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise StdoutError(f"cannot write to standard output ({describe_os_error(exc)})") from None
