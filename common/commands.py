"""Commands and paths as the user can type them from the folder they stand in.

A lesson run from another folder (``uv run --project DIR DIR/01_matmul_add.py``) writes its
traces under that folder; the next steps it prints must work from there too: ``uv run`` finds
the project from the current folder, so outside it the command names ``--project``.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from common.printable import printable

ROOT = Path(__file__).resolve().parents[1]  # the project (the package is installed from here)


def display_path(path: os.PathLike | str, start: os.PathLike | str | None = None) -> str:
    """``path`` relative to the current folder (or ``start``) when that is shorter, else absolute;
    :func:`~common.printable.printable` (a control character in a file name is shown escaped)."""
    absolute = Path(path).resolve()
    try:
        relative = os.path.relpath(absolute, start if start is not None else os.curdir)
    except ValueError:  # another drive (Windows)
        return printable(str(absolute))
    return printable(relative if len(relative) <= len(str(absolute)) else str(absolute))



def shorten(path: str | os.PathLike, width: int = 120) -> str:
    """A path for an error line: whole when short, else its start and end around an ellipsis."""
    text = str(path)
    return text if len(text) <= width else f"{text[:width // 2 - 1]}…{text[-(width // 2):]}"


def _inside_project(folder: Path) -> bool:
    return folder == ROOT or ROOT in folder.parents


def uv_run(*args: str | os.PathLike) -> str:
    """``uv run ARGS`` that works from the current folder (``--project`` outside the project).

    Path arguments are shown relative to the current folder; pass them as :class:`~pathlib.Path`.
    """
    words = ["uv", "run"]
    if not _inside_project(Path.cwd().resolve()):
        words += ["--project", display_path(ROOT)]
    words += [display_path(a) if isinstance(a, Path) else str(a) for a in args]
    return shlex.join(words)
