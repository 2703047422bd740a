"""Opening the viewer's link in the learner's browser, without showing its secret to anyone else and
without waiting for the browser.

The link holds the secret that lets a request read the trace (:mod:`common.view`). A browser started with
the link as an argument would put it in that process's command line, which every user of the machine can
read (``/proc/PID/cmdline``). So the browser is given a page instead, written where only this user can
read it (a private folder, the file mode 0600), which sends the browser on to the link; the page is
removed when the viewer stops (Jupyter's ``jpserver-*-open.html`` does the same).

The browser is started from a thread: a console browser (``BROWSER=w3m``) or a launcher that waits for the
browser to end must not keep the server from answering. What can go wrong is said, once, on the console:
no display (nothing is opened), and running as root (Chromium and Chrome refuse to start as root without
``--no-sandbox``, and say so only to their own standard error).
"""

from __future__ import annotations

import contextlib
import html
import os
import shutil
import sys
import tempfile
import threading
import webbrowser
from pathlib import Path
from typing import Iterator

from rich.console import Console


def has_display() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def redirect_page(folder: Path, link: str) -> Path:
    """A page, readable by this user only, that sends the browser on to ``link``."""
    page = folder / "open.html"
    quoted = html.escape(link, quote=True)
    text = (f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={quoted}">'
            f'<title>common.view</title><p><a href="{quoted}">open the trace</a></p>\n')
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return page


def _open_quietly(url: str) -> None:
    try:
        webbrowser.open_new_tab(url)
    except Exception:  # noqa: BLE001 - no usable browser: the printed link is enough
        pass


@contextlib.contextmanager
def opening_browser(link: str, console: Console, wanted: bool) -> Iterator[None]:
    """While the block runs (the server serving), the browser is being opened on ``link`` when ``wanted``
    and there is a display; the private page it is given is removed when the block ends."""
    if not wanted:
        yield
        return
    if not has_display():
        console.print("[yellow]note:[/] no display (DISPLAY and WAYLAND_DISPLAY are unset): no browser opened; "
                      "open the link above in a browser on this machine")
        yield
        return
    if _is_root():
        console.print("[yellow]note:[/] running as root: Chromium and Chrome refuse to start as root (unless "
                      "given --no-sandbox); if no browser opens, open the link above yourself")
    folder = Path(tempfile.mkdtemp(prefix="common-view-"))  # mode 0700: this user's alone
    try:
        page = redirect_page(folder, link)
        threading.Thread(target=_open_quietly, args=(page.as_uri(),), daemon=True, name="browser").start()
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)
