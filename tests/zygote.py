"""A warm start for the lessons the tests run: one interpreter imports torch once, then forks a child per run.

A lesson spends about 5 s of a 6 s test run importing torch and the compiler stack that torch's profiler
loads on start (``torch._inductor``); the suite starts a few hundred lessons. Here one server process
imports them once (:func:`_warm`, never running an op, so no thread pool exists yet) and listens on a Unix
socket; each request forks a child that becomes the lesson: its own folder, environment, argv and
standard streams (files the test reads back), the script run as ``__main__`` from its file, exactly as
``python SCRIPT ARGS`` runs it, and its exit status sent back. ``python -m MODULE ARGS`` (the report, the
viewer) is served the same way, with the report's modules imported once too.

What torch reads at import is fixed in the server: :func:`can_warm_start` sends a run whose environment
differs in anything but a few variables read later (:data:`MAY_DIFFER`) to a plain subprocess instead.
Tests of signals, of start-up itself (``--help`` before torch loads) and torchrun start real processes.

Run as ``python tests/zygote.py SOCKET`` (conftest starts it on the first lesson run of a session).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

# What a run may change and still fork from the server: variables nothing reads while torch imports (the
# terminal's width, the Hub's settings: the server imports no Hub library; the lessons' CPU dtype; torchrun's
# rank variables, which torch.distributed reads when a process group starts; what a test process writes into
# its own os.environ by running library code in-process, read each time it is used: Inductor's cache folder,
# set by Inductor's first ask, transformers' advisory switch, set by common/llm.py, and Kineto's log level, which
# common/lesson.py sets to the value every lesson sets itself; with any of them, every run after would start
# cold). Any other difference (threads, CXX, which Inductor reads at import, CUDA's or
# Python's settings) gets a plain subprocess.
MAY_DIFFER = frozenset({"COLUMNS", "LINES", "TERM", "NO_COLOR", "FORCE_COLOR", "HF_HUB_OFFLINE", "HF_HOME",
                        "HF_HUB_CACHE", "TRANSFORMERS_OFFLINE", "PYTEST_CURRENT_TEST", "LESSONS_CPU_DTYPE",
                        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHINDUCTOR_CACHE_DIR",
                        "TRANSFORMERS_NO_ADVISORY_WARNINGS", "KINETO_LOG_LEVEL"})


def differences(env: dict, server_env: dict) -> list[str]:
    """The variables, outside :data:`MAY_DIFFER`, that ``env`` sets otherwise than the server's environment (or
    sets where it does not, or not where it does)."""
    return sorted(k for k in (set(env) | set(server_env)) - MAY_DIFFER if env.get(k) != server_env.get(k))


def can_warm_start(env: dict, server_env: dict) -> bool:
    """A run may fork from the server when its environment is the server's but for :data:`MAY_DIFFER`."""
    return not differences(env, server_env)


def _warm() -> None:
    """What every lesson imports before its first op: torch, the profiler (which loads torch._inductor when
    it starts), dynamo (torch.compile, torch.compiler.set_stance), fake tensors (common.work's count); and
    the report, from the repository the server runs in."""
    import numpy  # noqa: F401
    import rich.console  # noqa: F401
    import torch
    import torch._dynamo  # noqa: F401
    import torch._inductor.config  # noqa: F401
    import torch.profiler  # noqa: F401
    import torch.utils.flop_counter  # noqa: F401
    from torch._subclasses import fake_tensor  # noqa: F401

    assert hasattr(torch, "_inductor")
    # the report's modules (no torch): every lesson ends with its report, and the tests run it on its own
    import common.report.cli.main  # noqa: F401
    import common.report.rules.registry  # noqa: F401


def _child(request: dict) -> None:
    """Become the lesson: folder, environment, streams, argv; run the file (or module) as __main__; leave
    as the interpreter does: non-daemon threads joined, atexit's functions run, the streams flushed."""
    import atexit
    import runpy
    import threading
    import traceback

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
        os.close(out)
    module = request.get("module")
    sys.argv = [module or request["argv"][0], *request["argv"][1:]]
    sys.path[0] = os.getcwd() if module else os.path.dirname(os.path.abspath(sys.argv[0]))
    status = 0
    try:
        if module:  # python -m MODULE ARGS
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:  # python SCRIPT ARGS
            runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            status = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    except BaseException:  # as the interpreter does: the traceback, status 1
        traceback.print_exc()
        status = 1
    try:
        # as the interpreter leaves: threading's exit hooks (an executor's idle workers told to stop), its
        # non-daemon threads joined, then atexit's functions
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(status)


def _waiter(conn: socket.socket, request: dict) -> None:
    """Between the server and the run: fork the run, send its pid, wait for it, send its exit status as
    ``subprocess`` gives it (negative: the signal that ended it), however it left (``os._exit`` too)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the server's SIG_IGN would hide the run's status
    pid = os.fork()
    if pid == 0:
        conn.close()
        _child(request)
    try:
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        conn.sendall(json.dumps({"status": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    finally:
        os._exit(0)


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def serve(path: str) -> None:
    """Accept a request and fork its waiter (:func:`_waiter`), which forks the run itself."""
    sys.path[0] = os.getcwd()  # the repository (conftest starts the server there), not tests/
    _warm()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the waiters are reaped by the kernel: no zombies
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        try:
            request = json.loads(_read_line(conn))
        except ValueError:  # a client that went away before asking: nothing to run
            conn.close()
            continue
        if os.fork() == 0:
            server.close()
            _waiter(conn, request)
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])
