"""Shared helpers: run the numbered scripts and the command lines as a user would, read the traces.

Every test that runs a command line goes through :func:`run_module` (``python -m MODULE ...``)
or :func:`run_script` (a lesson); the report's rules run strictly here: a rule that crashes
raises instead of becoming a ``rule_error`` finding (REPORT_STRICT_RULES, inherited by every
command the tests start)."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from common.dtypes import element_bytes

REPO = Path(__file__).resolve().parents[1]
DATA_TRACES = REPO / "tests" / "data" / "traces"  # real traces from other tools (copies of ../shared/traces)
DATA_TRACE_FILES = sorted(DATA_TRACES.rglob("*.json.gz"))

os.environ["REPORT_STRICT_RULES"] = "1"  # a rule that crashes fails the test that ran it (see common/report/rules/registry.py)

WORKERS = 2  # this machine's cores: the test files run on two workers (pytest-xdist, a dev dependency)

# Bytecode. Where the environment forbids it (PYTHONDONTWRITEBYTECODE, as CI images often set), every process the
# tests start compiles this repository's modules again, and each worker rewrites every test file's asserts again
# (0.2 s of a 0.5 s report run; 6 s of a worker's collection). The suite keeps its bytecode outside the tree instead,
# in one folder for its processes (PYTHONPYCACHEPREFIX, inherited by the workers and every command they start).
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None):
    os.environ.setdefault("PYTHONPYCACHEPREFIX", os.path.join(tempfile.gettempdir(), "profiling-lessons-pycache"))
    sys.dont_write_bytecode, sys.pycache_prefix = False, os.environ["PYTHONPYCACHEPREFIX"]


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """``uv run pytest`` runs the files on :data:`WORKERS` workers, each file whole on one of them (its
    module fixtures run once), where pytest-xdist is installed and the command line chose nothing else
    (``-n 0``: one process; ``-n N``: N workers). Without xdist (a GPU machine's own pytest) it runs in one."""
    if not config.pluginmanager.hasplugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if config.option.numprocesses is None and not config.option.collectonly:
        config.option.numprocesses, config.option.dist = WORKERS, "loadfile"


MEASURED_DTYPE = "LESSONS_SUITE_CPU_DTYPE"  # the session's measurement, handed to the workers (they start later)


def _measured_dtype() -> str:
    """The dtype this CPU computes at speed, as common/cpu.py measures it for a lesson without --dtype (bf16 where
    the CPU has bf16 matmul instructions, fp32 where torch emulates bf16): once a session."""
    from common.cpu import DTYPE_ENV

    if not os.environ.get(MEASURED_DTYPE):
        code = "from common.cpu import choose; print(choose(None, 1)[0])"
        env = {k: v for k, v in os.environ.items() if k != DTYPE_ENV}
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                             env=env)
        assert out.returncode == 0, out.stderr
        os.environ[MEASURED_DTYPE] = out.stdout.strip()
    return os.environ[MEASURED_DTYPE]


def _cpu_dtype() -> str:
    """The dtype a lesson runs in on this CPU without --dtype: the one LESSONS_CPU_DTYPE sets (the suite's switch
    to the other CPU's path, docs/testing.md), else the measured one."""
    from common.cpu import DTYPE_ENV, env_dtype

    return env_dtype() if os.environ.get(DTYPE_ENV) else _measured_dtype()


CPU_DTYPE = _cpu_dtype()  # "bf16" or "fp32": the <dtype> of a default CPU run's file names
# LESSONS_CPU_DTYPE=bf16 on a CPU that emulates bf16: its matmuls run 20-100x slower than fp32's
CPU_DTYPE_EMULATED = CPU_DTYPE not in ("fp32", _measured_dtype())
# Part 1's compute-bound run: a matmul of about a second a call (2048; 512 where the dtype is emulated, or one
# run would take minutes)
BIG_SIZE = 512 if CPU_DTYPE_EMULATED else 2048
CPU_DTYPE_BYTES = element_bytes(CPU_DTYPE)

# Small shapes keep every run to seconds on a 2-core CPU.
SMALL_MLP = ["--batch", "2", "--seq", "16", "--dim", "64", "--hidden", "256"]


@dataclass
class Run:
    script: str
    args: list[str]
    trace_dir: Path
    returncode: int
    stdout: str
    stderr: str
    cwd: Path = REPO  # where it ran: the paths its console prints are relative to it

    def files(self) -> list[str]:
        return sorted(p.name for p in self.trace_dir.iterdir()) if self.trace_dir.exists() else []

    def path(self, name: str) -> Path:
        return self.trace_dir / name


def run_script(script: str, *args: str, trace_dir: Path | None = None, env: dict | None = None,
               timeout: float = 300, cwd: Path = REPO) -> Run:
    """`python <script> ARGS --trace_dir DIR` from the repo root (or ``cwd``), as `uv run` would start it:
    forked from an interpreter that has imported torch already (tests/zygote.py: the script still runs
    from its file as ``__main__``, in a process of its own), or a plain subprocess where the environment
    changes what torch reads at import, or with LESSONS_COLD=1."""
    cmd = [sys.executable, str(REPO / script), *args]
    if trace_dir is not None:
        cmd += ["--trace_dir", str(trace_dir)]
    # two runs share this machine's 2 cores: one thread each, or their thread pools fight and a 64x64
    # matmul takes milliseconds (the report then rightly calls the timings too noisy to judge)
    full_env = command_env(**(env or {}))
    proc = WARM.run(cmd[1:], cwd, full_env, timeout) or subprocess.run(cmd, cwd=cwd, capture_output=True,
                                                                       text=True, env=full_env, timeout=timeout)
    return Run(script, list(args), trace_dir or cwd / "traces" / Path(script).stem, proc.returncode, proc.stdout,
               proc.stderr, cwd)


class WarmStart:
    """The client of tests/zygote.py: its server, started on the first run of the session (stopped at exit)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.server: subprocess.Popen | None = None
        self.socket: str | None = None
        self.env: dict = {}  # the server's environment: what a run must match to fork from it
        self.failed = os.environ.get("LESSONS_COLD") == "1"
        self.forks = 0  # runs forked from the server in this process (tests/test_warm_start.py counts them)

    def _start(self) -> bool:
        with self.lock:
            if self.server is None and not self.failed:
                folder, self.env = tempfile.mkdtemp(prefix="zygote-"), command_env()
                self.socket = os.path.join(folder, "s")
                self.server = subprocess.Popen([sys.executable, str(REPO / "tests" / "zygote.py"), self.socket],
                                               cwd=REPO, env=self.env, stdout=subprocess.PIPE,
                                               stderr=subprocess.DEVNULL, text=True)
                atexit.register(self.server.kill)
                if self.server.stdout.readline().strip() != "ready":
                    self.failed = True
            return not self.failed

    def run(self, argv: list, cwd: Path, env: dict, timeout: float, module: str | None = None):
        """The finished run of ``python ARGV`` (or ``python -m MODULE ARGV``; ``argv[0]`` is then ignored), a
        CompletedProcess with text output; None where it must be a plain subprocess."""
        from zygote import can_warm_start

        if not self._start() or not can_warm_start(env, self.env):
            return None
        with tempfile.TemporaryDirectory() as out:
            request = json.dumps(dict(argv=[str(a) for a in argv], module=module, cwd=str(cwd), env=env,
                                      stdout=f"{out}/stdout", stderr=f"{out}/stderr")).encode() + b"\n"
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                try:
                    conn.connect(self.socket)
                except OSError:  # the server is gone: this run and the rest start cold
                    self.failed = True
                    return None
                conn.settimeout(timeout)
                conn.sendall(request)
                reply, pid = {}, None
                try:
                    for line in conn.makefile("rb"):
                        reply = json.loads(line)
                        pid = reply.get("pid", pid)
                        if "status" in reply:
                            break
                except TimeoutError:
                    if pid is not None:
                        os.kill(pid, signal.SIGKILL)
                    raise subprocess.TimeoutExpired(argv, timeout) from None
            status = reply.get("status", -signal.SIGKILL)  # the child died without a word: killed
            self.forks += 1
            read = lambda name: Path(out, name).read_text(errors="replace") if Path(out, name).exists() else ""
            return subprocess.CompletedProcess(argv, status, read("stdout"), read("stderr"))


WARM = WarmStart()


@pytest.fixture(scope="session", autouse=True)
def environment_stays_warm():
    """After the last test of a test process: its os.environ still lets a run fork from the warm server. A test,
    or library code it runs in-process, that writes a variable into os.environ for good (Inductor's cache folder,
    transformers' advisory switch) made every lesson run after it a plain process, 3 s of CPU each, and nothing
    failed: now the session errs, naming the variable (monkeypatch.setenv sets one for one test; a variable
    torch never reads at import belongs in zygote.MAY_DIFFER)."""
    yield
    if WARM.server is not None and not WARM.failed:
        from zygote import differences

        drift = differences(command_env(), WARM.env)
        assert not drift, f"os.environ gained or lost {drift} in this test process: every run after started cold"


def module_command(module: str, *args) -> list[str]:
    """``python -m MODULE ARGS`` with this interpreter (a Popen of a long-running command uses it too)."""
    return [sys.executable, "-m", module, *map(str, args)]


def command_env(**extra: str) -> dict:
    """The environment a test command runs in: this one, 200 columns (no wrapped lines to match), one
    OpenMP thread (as a lesson's: the same environment as the warm interpreter's), and ``extra``."""
    return {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1", **extra}


def run_module(module: str, *args, cwd: Path = REPO, env: dict | None = None, stdin=None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` as a user runs it (text output), forked from the warm interpreter where
    it can be (as :func:`run_script`). ``stdin``: bytes fed to it, or an open file that becomes its
    standard input (a plain subprocess then)."""
    env = env if env is not None else command_env()
    if stdin is None and (proc := WARM.run(["-m", *map(str, args)], cwd, env, timeout, module=module)):
        return proc  # forked from the warm interpreter (tests/zygote.py)
    feed = dict(input=stdin) if isinstance(stdin, bytes) else dict(stdin=stdin)
    proc = subprocess.run(module_command(module, *args), cwd=cwd, capture_output=True, timeout=timeout, env=env,
                          **feed)
    proc.stdout, proc.stderr = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    return proc


def report_json(*args) -> dict:
    """``common.report --json ARGS``, which must succeed, as a dict (or list)."""
    proc = run_module("common.report", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def trace_of(run: Run) -> Path:
    """The one trace a lesson run wrote (not the report's annotated copy of it, --annotate): the one its
    console names (``wrote DIR/NAME.json``), for a folder that several runs share."""
    assert run.returncode == 0, run.stderr
    (path,) = [Path(m) for m in re.findall(r"^wrote (\S+\.json(?:\.gz)?)\b", run.stdout, flags=re.M)
               if ".annotated." not in m]
    return (run.cwd / path).resolve()  # the console prints it relative to where the run stood


def event(name: str, ts: float, dur: float, cat: str = "cpu_op", pid=100, tid=100, **args) -> dict:
    """A complete event (``ph: "X"``) for a synthetic trace; keyword arguments become its ``args``."""
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        e["args"] = args
    return e


def write_trace(path: Path, events: list, **top) -> Path:
    """``{"traceEvents": events, **top}`` as JSON at ``path``."""
    path.write_text(json.dumps({"traceEvents": events, **top}))
    return path


def run_torchrun(script: str, *args: str, trace_dir: Path | None = None, nproc: int = 2, timeout: float = 300,
                 cwd: Path = REPO) -> Run:
    """`torchrun --standalone --nproc-per-node N <script> ARGS --trace_dir DIR` from the repo root (or
    ``cwd``), with this Python; without ``trace_dir`` the script's own folder, ``traces/<script>``."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           str(REPO / script), *args, *(["--trace_dir", str(trace_dir)] if trace_dir is not None else [])]
    # PYTHONFAULTHANDLER: the ranks of a job that outlives its timeout are sent SIGABRT, and each prints its Python
    # stacks, so that the failure says where the job waited (one CI run's job hung once)
    env = {**os.environ, "COLUMNS": "200", "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}
    with subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            ranks = descendants(proc.pid)  # torchrun starts each rank in a session of its own
            for pid in ranks:  # all at once, and before the agent: one rank's end has the agent end the others
                _signal(pid, signal.SIGABRT)
            time.sleep(2)
            for pid in (proc.pid, *ranks):
                _signal(pid, signal.SIGKILL)
            out, err = proc.communicate(timeout=30)
            raise AssertionError(f"{' '.join(cmd[2:])} still ran after {timeout:g} s; its ranks' stacks "
                                 f"(SIGABRT):\n{err[-20000:]}\nits output:\n{out[-2000:]}") from None
    return Run(script, list(args), trace_dir or cwd / "traces" / Path(script).stem, proc.returncode, out, err, cwd)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, children before theirs (from /proc: each process's parent)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):  # a process that ended meanwhile
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    out, todo = [], [pid]
    while todo:
        above = todo.pop(0)
        children = [child for child, parent in parents.items() if parent == above]
        out += children
        todo += children
    return out


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen, limit: float) -> None:
    """Until something listens on 127.0.0.1:``port``. An AssertionError carrying ``proc``'s standard error
    when ``proc`` ends first or ``limit`` seconds pass (``proc`` is killed then, so its stderr can be read)."""
    deadline = time.monotonic() + limit
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                raise AssertionError(f"nothing listens on port {port}: {proc.stderr.read()}") from None
            time.sleep(0.05)


def load_events(path: Path) -> list[dict]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)["traceEvents"]


class Trace:
    """The complete CPU events of a trace, with nesting by timestamps."""

    def __init__(self, path: Path):
        self.events = [e for e in load_events(path) if e.get("ph") == "X" and "dur" in e]
        self.events.sort(key=lambda e: (e["ts"], -e["dur"]))

    def named(self, name: str) -> list[dict]:
        return [e for e in self.events if e["name"] == name]

    def starting(self, prefix: str) -> list[dict]:
        return [e for e in self.events if e["name"].startswith(prefix)]

    @property
    def steps(self) -> list[dict]:
        return self.starting("ProfilerStep#")

    def inside(self, outer: dict, name: str | None = None) -> list[dict]:
        """Events nested in ``outer`` (same thread, within its time span), optionally by name."""
        end = outer["ts"] + outer["dur"]
        return [
            e for e in self.events
            if e is not outer and e.get("tid") == outer.get("tid") and e["ts"] >= outer["ts"]
            and e["ts"] + e["dur"] <= end + 1e-3 and (name is None or e["name"] == name)
        ]


def once_per_session(tmp_path_factory, name: str, make: Callable[[Path], dict[str, Run]]) -> dict[str, Run]:
    """A session fixture's runs, made once for the whole session however many workers ask: the first
    makes them (``make(folder)``) under a lock, in a folder every worker sees; the others read them back."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above each worker's own
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / f"{name}.json"
        if done.exists():
            return {key: Run(**{**fields, "trace_dir": Path(fields["trace_dir"]), "cwd": Path(fields["cwd"])})
                    for key, fields in json.loads(done.read_text()).items()}
        folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=root))  # a new one per try: a failed try's error repeats
        made = make(folder)
        done.write_text(json.dumps({key: dataclasses.asdict(run) for key, run in made.items()}, default=str))
        return made


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """Every script run the lesson tests read, started two at a time (this machine has 2 cores), once
    for every worker."""
    return once_per_session(tmp_path_factory, "runs", _lesson_runs)


def _lesson_runs(base: Path) -> dict[str, Run]:
    plan = {
        "01_default": ("01_matmul_add.py", []),
        "01_batch": ("01_matmul_add.py", ["--size", "32", "--batch", "8"]),
        "01_compile": ("01_matmul_add.py", ["--warmup", "--compile"]),
        "01_gzip": ("01_matmul_add.py", ["--size", "16", "--warmup", "--schedule", "0,0,4", "--gzip",
                                         "--dtype", "fp32", "--record-shapes"]),
        "01_warm": ("01_matmul_add.py", ["--warmup"]),
        # the posts' wait=0, warmup=0, active=20 experiment; also the report's page and the annotated trace
        "01_cold_sched": ("01_matmul_add.py", ["--schedule", "0,0,20", "--html", "--annotate"]),
        "01_2048": ("01_matmul_add.py", ["--size", str(BIG_SIZE), "--warmup"]),
        "02_eager": ("02_linear.py", []),
        "02_compile": ("02_linear.py", ["--batch", "64", "--compile"]),
        "03_eager": ("03_simple_mlp.py", SMALL_MLP),
        "03_compile": ("03_simple_mlp.py", [*SMALL_MLP, "--compile"]),
        "04c_compile": ("04_c_sdpa_attention.py", [*ATTENTION_SMALL, "--backend", "math", "--compile"]),
    }

    def go(item):
        key, (script, args) = item
        return key, run_script(script, *args, trace_dir=base / key)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(go, plan.items()))


# Part 3 at 2 sequences, 4 heads, 256 tokens (the ops per forward do not depend on the shape). The runs
# memory teaches with (04_a vs 04_b, naive vs flash) also record allocations: that adds [memory] events
# and no op.
ATTENTION_SMALL = ["--batch", "2", "--heads", "4", "--seq", "256", "--head_dim", "64"]
ATTENTION_PLAN = {
    "naive": ("04_a_naive_attention.py", [*ATTENTION_SMALL, "--profile-memory"]),
    "inplace": ("04_b_inplace_ops_attention.py", [*ATTENTION_SMALL, "--profile-memory"]),
    "math": ("04_c_sdpa_attention.py", [*ATTENTION_SMALL, "--backend", "math"]),
    "flash": ("04_c_sdpa_attention.py", [*ATTENTION_SMALL, "--backend", "flash", "--profile-memory"]),
    "auto": ("04_c_sdpa_attention.py", [*ATTENTION_SMALL, "--backend", "auto"]),
    # bf16 inputs: the math backend's FP32 upcast (P3.6) shows only when the inputs are not fp32 already
    "math_bf16": ("04_c_sdpa_attention.py", [*ATTENTION_SMALL, "--backend", "math", "--dtype", "bf16"]),
}


@pytest.fixture(scope="session")
def attention_runs(tmp_path_factory):
    """Every Part 3 run the tests read, two at a time, each lesson's runs in one folder as a user's are;
    once for every worker."""
    return once_per_session(tmp_path_factory, "attention", _attention_runs)


def _attention_runs(base: Path) -> dict[str, Run]:
    def go(item):
        key, (script, args) = item
        return key, run_script(script, *args, trace_dir=base / Path(script).stem)

    # where this CPU runs bf16 by default, the default math run is the bf16 one: run it once, under both keys
    # (two runs of one command would write the same file)
    plan = {k: v for k, v in ATTENTION_PLAN.items() if not (CPU_DTYPE == "bf16" and k == "math_bf16")}
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = dict(pool.map(go, plan.items()))
    return {**runs, "math_bf16": runs.get("math_bf16", runs["math"])}


@pytest.fixture
def chromium() -> str:
    """Chromium's path for a browser test: skips where it is missing, fails in CI (tests/browser.py)."""
    from browser import require_browser

    return require_browser()
