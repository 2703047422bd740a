"""Open a trace in the Perfetto UI without uploading it, or list the traces you have.

    uv run -m common.view traces/01_matmul_add/64_bf16_cold_eager.json
    uv run -m common.view --list [DIR]

The viewer is Perfetto's own ``open_trace_in_ui`` recipe: a loopback-only HTTP server on port
9001 (the one port the UI's Content-Security-Policy lets it fetch from) serves the one named file
with a CORS header for https://ui.perfetto.dev, prints the link, and stops once the UI has
fetched the file completely. The trace never leaves the machine.
"""

from __future__ import annotations

import argparse
import errno
import getpass
import http.server
import os
import shutil
import signal
import socket
import sys
import time
import webbrowser
from datetime import datetime
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from rich.console import Console
from rich.filesize import decimal
from rich.table import Table

from common.errors import CommandParser, exit_on_bad_input, fail
from common.paths import TRACE_SUFFIXES, parse_tag

UI_ORIGIN = "https://ui.perfetto.dev"
PORT = 9001  # the only port the Perfetto UI fetches from (and trace_processor --httpd's)
LARGE_BYTES = 500_000_000  # above this, the UI (and TensorBoard) become slow to open a trace


def perfetto_link(name: str, port: int = PORT) -> str:
    return f"{UI_ORIGIN}/#!/?url=http://127.0.0.1:{port}/{quote(name)}"


# ----------------------------------------------------------------------------- the server


class _OneFileHandler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.trace`` at ``/<its name>`` and nothing else: no listing, no other path."""

    server: _OneFileServer
    server_version = "common.view"

    def log_message(self, format, *args):  # keep the console for the user
        pass

    def _origin_ok(self) -> bool:
        origin = self.headers.get("Origin")
        return origin is None or origin in self.server.origins  # no Origin: curl, not a browser page

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

    def _check(self) -> bool:
        if not self._origin_ok():
            self._refuse(403, "origin not allowed")
            return False
        if unquote(urlsplit(self.path).path) != "/" + self.server.trace.name:
            self._refuse(404, "not found")
            return False
        return True

    def do_OPTIONS(self) -> None:  # CORS preflight (a fetch with extra headers, Chrome's local-network check)
        if not self._check():
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
        if not self._check():
            return
        trace = self.server.trace
        gz = trace.name.endswith(".gz")
        self.send_response(200)
        self._cors()
        # Served as stored: a .json.gz stays gzip bytes (no Content-Encoding), Perfetto unzips it.
        self.send_header("Content-Type", "application/gzip" if gz else "application/json")
        self.send_header("Content-Length", str(trace.stat().st_size))
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if not body:
            return
        try:
            with trace.open("rb") as f:
                shutil.copyfileobj(f, self.wfile, 1 << 20)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return  # the client went away mid-file: keep serving for the next try
        self.server.served = True


class _OneFileServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, trace: Path, origins: set[str]):
        self.trace, self.origins, self.served = trace, origins, False
        super().__init__(("127.0.0.1", port), _OneFileHandler)  # loopback only


def _open_server(port: int, trace: Path, origins: set[str]) -> _OneFileServer:
    try:
        return _OneFileServer(port, trace, origins)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            fail(
                f"port {port} on 127.0.0.1 is in use (another viewer or trace_processor --httpd?); "
                "stop it and try again"
            )
        fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")


def _over_ssh() -> bool:
    return bool(os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_CLIENT"))


def _has_display() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _checked_trace(path: Path) -> Path:
    if not path.exists():
        fail(f"no such trace: {path}")
    if path.is_dir():
        fail(f"{path} is a folder; name one trace in it, or list them: uv run -m common.view --list {path}")
    try:
        with path.open("rb") as f:
            f.read(1)
    except OSError as exc:
        fail(f"cannot read {path}: {exc.strerror or exc}")
    return path.resolve()


def serve(
    path: Path,
    port: int = PORT,
    browser: bool = True,
    timeout: float | None = None,
    origins: tuple[str, ...] = (),
    console: Console | None = None,
) -> int:
    """Serve one trace to the Perfetto UI until it has fetched it (0), or until ``timeout`` (1)."""
    console = console or Console(highlight=False)
    trace = _checked_trace(path)
    size = trace.stat().st_size
    with _open_server(port, trace, {UI_ORIGIN, *origins}) as server:
        server.timeout = 0.2
        link = perfetto_link(trace.name, port)
        console.print(f"serving [bold]{trace.name}[/] ({decimal(size)}) on http://127.0.0.1:{port} only; open:")
        console.print(link, markup=False, soft_wrap=True)
        if port != PORT:
            console.print(f"[yellow]note:[/] ui.perfetto.dev only fetches from port {PORT}; port {port} "
                          "suits a self-hosted UI or a test")
        if size > LARGE_BYTES:
            console.print(f"[yellow]note:[/] {decimal(size)} is large: the UI may be slow or run out of memory. "
                          "Record fewer active steps (--schedule 1,1,1) to shrink the trace.")
        if _over_ssh():
            host = socket.gethostname()
            console.print("over SSH: on the machine with the browser, forward the port first:")
            console.print(f"  ssh -L {port}:127.0.0.1:{port} {getpass.getuser()}@{host}", markup=False)
            console.print("  (use the host name you ssh to), then open the link there.")
        elif browser and _has_display():
            try:
                webbrowser.open_new_tab(link)
            except Exception:  # no usable browser: the printed link is enough
                pass
        console.print("waiting for the UI to fetch it (Ctrl-C to stop)...")
        deadline = None if timeout is None else time.monotonic() + timeout
        while not server.served:
            if deadline is not None and time.monotonic() > deadline:
                console.print(f"[yellow]gave up:[/] nothing fetched the trace within {timeout:g} s")
                return 1
            server.handle_request()
    console.print("the UI has the trace; server stopped")
    return 0


# ----------------------------------------------------------------------------- the listing


def find_traces(root: Path) -> list[Path]:
    """Trace files under ``root`` (recursively), newest first; hidden files and folders skipped."""
    found = [
        p for p in root.rglob("*")
        if p.name.endswith(TRACE_SUFFIXES) and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def list_traces(root: Path, console: Console | None = None) -> int:
    console = console or Console(highlight=False)
    if not root.is_dir():
        fail(f"no such folder: {root}")
    traces = find_traces(root)
    if not traces:
        console.print(f"no traces under {root}")
        return 0
    table = Table(title=f"traces under {root}, newest first")
    table.add_column("trace", overflow="fold")
    for name in ("script", "shape", "dtype", "warm", "mode", "gz"):
        table.add_column(name)
    table.add_column("size", justify="right")
    table.add_column("modified")
    table.add_column("variants")  # the other knobs of the name: sched-0-0-20, attn-eager, cache-static, ...
    for p in traces:
        tag = parse_tag(p.name)
        knobs = (
            ["x".join(map(str, tag.shape)), tag.dtype, "warm" if tag.warm else "cold", tag.mode]
            if tag else ["", "", "", ""]
        )
        folder = p.parent.relative_to(root).as_posix()
        stat = p.stat()
        table.add_row(
            str(p), "" if folder == "." else folder, *knobs, "gz" if p.name.endswith(".gz") else "",
            decimal(stat.st_size), datetime.fromtimestamp(stat.st_mtime).strftime("%Y-%m-%d %H:%M"),
            tag.variants_text if tag else "",
        )
    console.print(table)
    console.print("open one: [cyan]uv run -m common.view TRACE[/]")
    return 0


# ----------------------------------------------------------------------------- the command


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be positive")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="uv run -m common.view", description=__doc__.split("\n\n")[0])
    p.add_argument("trace", nargs="?", type=Path, help="the .json or .json.gz trace to open")
    p.add_argument("--list", nargs="?", const=Path("traces"), type=Path, metavar="DIR",
                   help="list the traces under DIR (default: traces) instead, newest first")
    p.add_argument("--port", type=int, default=PORT, help=f"port on 127.0.0.1 (default: {PORT}, the UI's)")
    p.add_argument("--no-browser", "--no_browser", action="store_true", help="only print the link")
    p.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="give up when nothing fetched the trace within SECONDS (default: wait)")
    p.add_argument("--allow-origin", "--allow_origin", action="append", default=[], metavar="ORIGIN",
                   help=f"also let this page origin fetch the trace (e.g. a self-hosted UI); {UI_ORIGIN} always can")
    return p


@exit_on_bad_input
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.list is not None:
        if args.trace is not None:
            fail("give a TRACE to open or --list DIR, not both")
        return list_traces(args.list)
    if args.trace is None:
        fail("name a trace to open (or --list to see them)")
    if not 0 < args.port < 65536:
        fail(f"--port {args.port} is not a port number")
    # Ctrl-C stops the server even when started from a shell that ignores SIGINT (a background job)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return serve(args.trace, args.port, browser=not args.no_browser, timeout=args.timeout,
                 origins=tuple(args.allow_origin))


if __name__ == "__main__":
    raise SystemExit(main())
