"""Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON messages
ended by a NUL byte on fds 3 and 4), so no client library is needed. Headless (Perfetto's UI, served
by common.view, draws its timeline there). The network to anything but loopback goes to ``proxy``
(a port on 127.0.0.1; loopback itself is never proxied), and no host name but 127.0.0.1 resolves.

The network is watched on the page and on every target it starts (its workers, its service worker, an
out-of-process frame), each attached before it runs: ``requests`` are those of the page and of all its
targets, and no request the browser makes for itself is among them."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import subprocess
import threading
import time
from pathlib import Path

from browser import find_browser

OFFLINE_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--window-size=1400,900",
    # the browser's own calls home (not the page's): time, sign-in, safe browsing, metrics
    "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,AutofillServerCommunication",
    "--disable-client-side-phishing-detection", "--disable-default-apps", "--disable-extensions",
    "--disable-domain-reliability", "--metrics-recording-only", "--no-pings", "--disable-breakpad",
    "--password-store=basic", "--use-mock-keychain",
]


# ids of the commands the reader thread writes to a newly attached target; their answers are dropped
QUIET_IDS = 1 << 30


def _high(fd: int) -> int:
    """``fd`` moved to 10 or above, so that placing the pipes on fds 3 and 4 overwrites neither."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


def _request(event: dict) -> tuple[str | None, str]:
    """Which request a Network event is about: its target's session and its id there."""
    return event.get("sessionId"), event["params"]["requestId"]


class Browser:
    """One Chromium with one page; ``send`` a command and get its result, ``events`` as they came."""

    def __init__(self, profile: Path, proxy: int):
        to_browser, self._writer = map(_high, os.pipe())
        self._reader, from_browser = map(_high, os.pipe())
        command = [find_browser(), *OFFLINE_FLAGS, f"--proxy-server=http://127.0.0.1:{proxy}", f"--user-data-dir={profile}",
                   "--remote-debugging-pipe", "about:blank"]
        self.proc = subprocess.Popen(["bash", "-c", f'exec "$@" 3<&{to_browser} 4>&{from_browser}', "bash", *command],
                                     pass_fds=(to_browser, from_browser),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self.events: list[dict] = []
        self._results: dict[int, dict] = {}
        self._next = 0
        self._quiet = QUIET_IDS
        self._cond = threading.Condition()
        self._writing = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def _write(self, message: dict) -> None:
        with self._writing:
            os.write(self._writer, json.dumps(message).encode() + b"\0")

    def _start(self, session: str) -> None:
        """A target just attached (the page, then each target it starts, paused before it runs): its network
        watched, the targets it starts attached the same way, then run. Written by the reader thread, which
        does not wait: the answers are dropped. The page's own event comes before ``attachToTarget``'s answer,
        so all this is written before any command that follows."""
        for method, params in (("Network.enable", {}),
                               ("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": True,
                                                         "flatten": True}),
                               ("Runtime.runIfWaitingForDebugger", {})):
            self._quiet += 1
            self._write({"id": self._quiet, "method": method, "params": params, "sessionId": session})

    def _read(self) -> None:
        buffer = b""
        with os.fdopen(self._reader, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                buffer += chunk
                *messages, buffer = buffer.split(b"\0")
                with self._cond:
                    for raw in messages:
                        message = json.loads(raw)
                        if message.get("id", 0) >= QUIET_IDS:
                            continue
                        if "id" in message:
                            self._results[message["id"]] = message
                        else:
                            self.events.append(message)
                        if message.get("method") == "Target.attachedToTarget":
                            self._start(message["params"]["sessionId"])
                    self._cond.notify_all()

    def send(self, method: str, session: bool | None = None, timeout: float = 30, **params) -> dict:
        self._next += 1
        message = {"id": self._next, "method": method, "params": params}
        if session if session is not None else hasattr(self, "session"):
            message["sessionId"] = self.session
        self._write(message)
        with self._cond:
            if not self._cond.wait_for(lambda: self._next in self._results, timeout):
                raise TimeoutError(f"{method}: no answer in {timeout} s")
            answer = self._results.pop(self._next)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float):
        """Until ``expression`` is truthy in the page; its last value (falsy when the time ran out)."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.25)

    def screenshot(self, path: Path) -> Path:
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", format="png")["data"]))
        return path

    def requests(self, first: int = 0) -> list[tuple[str, str | None]]:
        """Every request the page and its targets made, from event ``first`` on: (URL, why it was stopped
        unsent: Chromium's ``blockedReason``, e.g. "csp", or None)."""
        with self._cond:
            events = self.events[first:]
        blocked = {_request(e): e["params"].get("blockedReason") for e in events
                   if e.get("method") == "Network.loadingFailed"}
        return [(e["params"]["request"]["url"], blocked.get(_request(e))) for e in events
                if e.get("method") == "Network.requestWillBeSent"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.close(self._writer)
