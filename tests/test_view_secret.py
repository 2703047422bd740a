"""common.view serves the trace to the learner's own page alone (issue 38): the secret in the link, the file
checked at start and served from the open file, odd names and paths without a traceback, the browser
opened without blocking and without the secret on a command line, and what it says when it cannot open one."""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from pathlib import Path

import pytest
from conftest import run_module
from test_view import TRACE, UI, UI_FILES, Viewer, clean_env, viewer_factory  # noqa: F401 - the fixture

from common.view import REQUEST_TIMEOUT_S


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "64_bf16_cold_eager.json"
    path.write_text(json.dumps(TRACE))
    return path


def test_only_the_link_reads_the_trace(trace, viewer_factory):
    """Another user who knows the port and the file name (``/proc/PID/cmdline``) gets nothing: the trace is
    served at ``/<secret>/<name>`` alone, the secret new at every run and in no command line."""
    v = viewer_factory(trace)
    w = viewer_factory(trace)
    assert len(v.secret) >= 32 and v.secret != w.secret
    cmdline = Path(f"/proc/{v.proc.pid}/cmdline").read_bytes()
    assert trace.name.encode() in cmdline and v.secret.encode() not in cmdline
    for path in (f"/{v.name}", f"/{w.secret}/{v.name}", f"/{v.secret}", f"/{v.secret}/", f"/{v.secret[:-1]}/{v.name}",
                 f"/{v.secret}/{v.name}x", f"/x/{v.secret}/{v.name}", f"/{v.secret.upper()}/{v.name}"):
        for origin in (None, UI):
            resp = v.raw("GET", path, origin=origin)
            assert resp.status == 404 and b"traceEvents" not in resp.body, path
    resp = v.raw("GET", v.trace_path, origin=None)  # the learner's own curl, with the link
    assert resp.status == 200 and json.loads(resp.body) == TRACE
    assert v.wait()[0] == 0


def test_the_ui_files_need_no_secret_but_the_trace_does(trace, viewer_factory):
    v = viewer_factory(trace, local=True)
    assert v.raw("GET", "/", origin=None).status == 200  # Perfetto's own page: public code
    assert v.raw("GET", f"/{v.name}", origin=f"http://127.0.0.1:{v.port}").status == 404
    assert v.raw("GET", v.trace_path, origin=f"http://127.0.0.1:{v.port}").status == 200


def test_the_file_checked_at_start_is_the_one_served(trace, tmp_path, viewer_factory):
    """A symlink swapped in for the trace while it is served (to a secret, a device, a FIFO) changes nothing."""
    secret = tmp_path / "shadow"
    secret.write_text("root:secret-hash\n")
    v = viewer_factory(trace, local=True)  # serves on for a second after each fetch (--linger 1)
    for swap in (lambda: trace.symlink_to(secret), lambda: trace.symlink_to("/dev/zero"), lambda: os.mkfifo(trace)):
        trace.unlink()
        swap()
        resp = v.raw("GET", v.trace_path, origin=None)
        assert resp.status == 200 and json.loads(resp.body) == TRACE
    assert v.wait(timeout=15)[0] == 0


@pytest.mark.parametrize("local", [True, False])
def test_a_nul_in_the_path_is_a_404_not_a_traceback(trace, viewer_factory, local):
    v = viewer_factory(trace, local=local)
    (version,) = [d.name for d in UI_FILES.iterdir() if (d / "frontend_bundle.js").is_file()]
    for path in (f"/{version}/%00", f"/{version}/a%00b.js", "/%00", f"/{v.secret}/%00", f"{v.trace_path}%00",
                 f"/{version}/%ff%fe", f"/{version}/%C0%AE%C0%AE/x"):
        resp = v.raw("GET", path, origin=None)
        assert resp.status in (400, 404), path
    assert v.proc.poll() is None
    assert v.raw("GET", v.trace_path, origin=None).status == 200
    rc, _, err = v.wait(timeout=15)
    assert rc == 0 and "Traceback" not in err and "Error" not in err, err


NASTY = "[bold]x\x1b]0;owned\x07\u202eosj\n.json"


@pytest.mark.parametrize("name", [os.fsdecode(b"\xff\xfe.json"), NASTY])
def test_an_odd_trace_name_is_served_and_shown_escaped(tmp_path, viewer_factory, name):
    """A name that is not UTF-8, or holds markup, escape sequences, U+202E or a newline: served, and the first
    line shows it the way ``--list`` and the error lines do."""
    path = tmp_path / name
    path.write_text(json.dumps(TRACE))
    v = viewer_factory(path)
    first = v.head.splitlines()[0]
    shown = "\\xff\\xfe.json" if name.startswith("\udcff") else "[bold]x\\x1b]0;owned\\x07\\u202eosj\\n.json"
    assert first.startswith(f"serving {shown} (") and "\x1b" not in v.head and "\u202e" not in v.head, v.head
    assert v.link.isascii()
    resp = v.raw("GET", v.trace_path, origin=None)
    assert resp.status == 200 and json.loads(resp.body) == TRACE
    rc, _, err = v.wait()
    assert rc == 0 and err == "", err


@pytest.mark.parametrize("origin", ["null", "*", "https://ui.example/path", "ftp://x", "not an origin"])
def test_allow_origin_refuses_any_page(trace, origin):
    r = run_module("common.view", trace, "--no-browser", "--allow-origin", origin, env=clean_env(), timeout=30)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr
    assert r.stdout == ""


def test_a_stalled_connection_is_closed(trace, viewer_factory):
    """A client that connects and sends nothing does not hold a server thread for ever."""
    v = viewer_factory(trace)
    with socket.create_connection(("127.0.0.1", v.port), timeout=REQUEST_TIMEOUT_S + 5) as s:
        s.sendall(b"GET /")  # half a request line, then nothing
        start = time.monotonic()
        assert s.recv(100) == b""  # closed by the server, with no answer
        waited = time.monotonic() - start
    assert waited < REQUEST_TIMEOUT_S + 3, waited
    assert v.raw("GET", v.trace_path, origin=None).status == 200
    assert v.wait()[0] == 0


def fake_browser(tmp_path: Path, wait_s: float) -> tuple[Path, Path]:
    """A console 'browser' that writes down its arguments and then holds on, as w3m would."""
    said = tmp_path / "browser-args"
    script = tmp_path / "console-browser"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {said}\nexec sleep {wait_s} >/dev/null 2>&1\n')
    script.chmod(0o755)
    return script, said


def test_a_console_browser_does_not_block_the_server(trace, tmp_path, viewer_factory):
    """It is given a private page (mode 0600) that sends it on to the link: the secret is on no command line."""
    script, said = fake_browser(tmp_path, 20)
    v = viewer_factory(trace, browser=True, env=clean_env(DISPLAY=":0", BROWSER=str(script)))
    deadline = time.monotonic() + 10
    while not said.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (uri,) = said.read_text().split()
    page = Path(uri.removeprefix("file://"))
    assert v.secret not in uri and stat.S_IMODE(page.stat().st_mode) == 0o600
    assert v.link.replace("&", "&amp;") in page.read_text()
    start = time.monotonic()
    assert v.raw("GET", v.trace_path, origin=None).status == 200  # while the console browser still runs
    assert time.monotonic() - start < 2
    assert v.wait()[0] == 0
    assert not page.exists()  # removed when the viewer stops


def test_no_display_says_no_browser_was_opened(trace, viewer_factory):
    v = viewer_factory(trace, browser=True)
    assert "no browser opened" in v.head
    v.fetch()
    assert v.wait()[0] == 0


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="says so only to root")
def test_as_root_it_says_chromium_will_not_start(trace, tmp_path, viewer_factory):
    script, _ = fake_browser(tmp_path, 0)
    v = viewer_factory(trace, browser=True, env=clean_env(DISPLAY=":99", BROWSER=str(script)))
    assert "running as root" in v.head and "--no-sandbox" in v.head
    v.fetch()
    assert v.wait()[0] == 0


PROBE_SEED = 38
PIECES = ["%00", "%ff", "%fe", "%2e%2e", "..", "%2f", "/", "%C0%AE", "%E2%80%AE", "x", "%", "%0a", "%1b[2J", "?a=%00",
          "#", ";", "index.html", "trace_processor.wasm"]


def test_seeded_probes_of_odd_paths_are_refused_quietly(trace, viewer_factory):
    """NUL, bytes that are not UTF-8, dots and escapes, in 60 random paths: none reads the trace, none is a
    traceback."""
    import random

    rng = random.Random(PROBE_SEED)
    v = viewer_factory(trace, local=True)
    (version,) = [d.name for d in UI_FILES.iterdir() if (d / "frontend_bundle.js").is_file()]
    for _ in range(60):
        head = rng.choice(["", f"/{version}", f"/{v.secret}", "/x"])
        path = head + "/" + "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4)))
        resp = v.raw("GET", path, origin=None)
        assert resp.status in (200, 400, 404) and trace.read_bytes() not in resp.body, path  # 200: a file of the UI
    assert v.raw("GET", v.trace_path, origin=None).status == 200
    rc, _, err = v.wait(timeout=15)
    assert rc == 0 and "Traceback" not in err, err
