"""A real browser accepts the viewer's CORS reply: headless Chromium, a page on another origin
fetch()es the trace the way the Perfetto UI does. Skips where Chromium is absent (fails in CI). No internet."""

from __future__ import annotations

import gzip
import http.server
import subprocess
import threading
from functools import partial
from pathlib import Path

import pytest
from browser import find_browser
from conftest import free_port
from test_view import Viewer

BROWSER = find_browser()
pytestmark = pytest.mark.usefixtures("chromium")  # skips without Chromium, fails in CI (tests/browser.py)

# What the UI does with a ?url= link: fetch it, read the bytes. The page writes what it got.
PAGE = """<!doctype html><html><body><pre id="out">pending</pre><script>
fetch("{url}")
  .then(r => r.arrayBuffer())
  .then(b => {{ const u = new Uint8Array(b);
               document.getElementById("out").textContent = "got " + u.length + " bytes, first " + u[0] + "," + u[1]; }})
  .catch(e => {{ document.getElementById("out").textContent = "failed: " + e; }});
</script></body></html>"""


def page_server(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A static server on 127.0.0.1 at another port: a different origin from the viewer's."""
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def dump_dom(url: str, profile: Path) -> str:
    r = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--virtual-time-budget=10000",
         "--dump-dom", url],
        capture_output=True, text=True, timeout=60,
    )
    return r.stdout


def browser_fetch(tmp_path: Path, trace: Path, allow: bool) -> tuple[str, Viewer]:
    site = tmp_path / "site"
    site.mkdir()
    server, origin = page_server(site)
    try:
        viewer = Viewer(trace, *(["--allow-origin", origin] if allow else []))
        (site / "index.html").write_text(PAGE.format(url=f"http://127.0.0.1:{viewer.port}/{trace.name}"))
        return dump_dom(f"{origin}/index.html", tmp_path / "profile"), viewer
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_browser_on_an_allowed_origin_reads_the_trace(tmp_path, suffix):
    raw = b'{"traceEvents": []}'
    trace = tmp_path / f"64_bf16_cold_eager{suffix}"
    trace.write_bytes(gzip.compress(raw) if suffix.endswith(".gz") else raw)
    dom, viewer = browser_fetch(tmp_path, trace, allow=True)
    try:
        data = trace.read_bytes()
        assert f"got {len(data)} bytes, first {data[0]},{data[1]}" in dom, dom
        rc, _, err = viewer.wait(timeout=10)  # the fetch was complete: the viewer stopped by itself
        assert rc == 0, err
    finally:
        viewer.stop()


def test_browser_on_another_origin_is_refused(tmp_path):
    trace = tmp_path / "64_bf16_cold_eager.json"
    trace.write_text('{"traceEvents": []}')
    dom, viewer = browser_fetch(tmp_path, trace, allow=False)
    try:
        assert "failed: TypeError" in dom, dom
        assert viewer.proc.poll() is None  # still waiting for the real UI
    finally:
        viewer.stop()
