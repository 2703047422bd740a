"""The one-shot GPU run: every lesson with the posts' commands, report JSON, tests/gpu, fixtures.

    python3 tests/gpu/run_all.py OUT                 # on a CUDA machine with torch; no uv, no internet
    python3 tests/gpu/run_all.py OUT --dry-run       # print the plan, run nothing (any machine)

Runs with the Python that runs it (its torch); wheels carried in ``.whl/`` (tests/gpu/fetch_wheels.sh)
are unpacked into a temporary folder on PYTHONPATH when their package is not installed. Writes,
under OUT (new or empty): ``runs/<key>/`` per lesson run (gzipped trace, table, ``run.log``,
``report.json``), ``pytest.xml``/``pytest.log``/``claims.jsonl`` from ``tests/gpu`` (only those
tests, never the CPU suite), ``env.json``, ``summary.json``, ``gpu-claims.md`` (docs/gpu-claims.md
with its "seen on" column filled) and ``fixtures.tar.gz`` (all of it, files over --max-file-mb left
out). Exit status 0 when every run and test passed, 1 otherwise, 2 for bad input.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO), str(HERE)]

import claims_doc  # noqa: E402
import lesson_runs as LR  # noqa: E402
import wheels as W  # noqa: E402
from common.errors import CommandParser, exit_on_bad_input, fail  # noqa: E402
from lesson_runs import BY_KEY, RUNS, LessonRun  # noqa: E402

NEEDED = ("rich",)  # without these no lesson runs; msgspec and numpy only feed the report, pytest the tests
DOC = REPO / "docs" / "gpu-claims.md"


@dataclass(frozen=True)
class Command:
    key: str
    argv: tuple
    skip: str = ""  # why it will not run ("" when it will)
    env: tuple = ()  # (name, value) pairs its process adds to the environment
    note: str = ""  # how it runs, where that is not plain (a Hub kernel read from the local cache)


@dataclass(frozen=True)
class Plan:
    out: Path
    wheels: tuple  # carried wheels (wheels.Wheel)
    unpack: tuple  # the carried wheels to unpack here
    missing: tuple  # wheels.txt packages neither installed nor carried for this machine
    lessons: tuple  # Command per lesson run
    tests: Command
    update_doc: bool
    max_file_mb: float
    timeout_s: int


def parse_args(argv=None):
    p = CommandParser(prog="run_all.py", description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="output folder (new or empty)")
    p.add_argument("--wheels", type=Path, default=None, help="folder of carried wheels (default: .whl when present)")
    p.add_argument("--runs", default=None, help="comma-separated run keys (default: all; see tests/gpu/lesson_runs.py)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    p.add_argument("--update-doc", action="store_true", help="also rewrite docs/gpu-claims.md in place")
    p.add_argument("--max-file-mb", type=float, default=8.0, help="leave bigger files out of fixtures.tar.gz")
    p.add_argument("--timeout", type=int, default=900, help="seconds per lesson run (default: 900)")
    return p.parse_args(argv)


def make_plan(args) -> Plan:
    """Everything the run will do, decided before anything runs; bad input fails here."""
    out = args.out.resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        fail(f"{args.out} exists and is not an empty folder: give a new or empty output folder")
    if args.wheels is not None and not args.wheels.is_dir():
        fail(f"--wheels {args.wheels}: no such folder (tests/gpu/fetch_wheels.sh fills one)")
    wheels = tuple(W.carried(args.wheels if args.wheels is not None else REPO / ".whl"))
    unpack = tuple(w for w in wheels if w.fits and not w.installed)
    usable = {w.dist for w in wheels if w.fits} | {d for d in W.listed() if _installed_dist(d)}
    missing = tuple(d for d in W.listed() if d not in usable)
    keys = [k.strip() for k in args.runs.split(",") if k.strip()] if args.runs else [r.key for r in RUNS]
    unknown = [k for k in keys if k not in BY_KEY]
    if unknown:
        fail(f"--runs: unknown run {', '.join(unknown)} (known: {', '.join(BY_KEY)})")
    modules = {w.module for w in wheels if w.fits}
    reachable = []  # the Hub is asked at most once, and only when a run needs it

    def hub_reachable() -> bool:
        if not reachable:
            reachable.append(LR.hub_reachable())
        return reachable[0]

    lessons = tuple(_lesson(BY_KEY[k], out, modules, hub_reachable) for k in keys)
    pytest_ok = "pytest" in modules or _importable("pytest")
    # one process, xdist or not (one GPU: two workers would share it and blur the timings they check)
    tests = Command("tests/gpu", (sys.executable, "-m", "pytest", "tests/gpu", "-q", "-rA", "-p", "no:cacheprovider",
                                  "-p", "no:xdist", "--junitxml", str(out / "pytest.xml")),
                    "" if pytest_ok else "pytest is neither installed nor carried (tests/gpu/fetch_wheels.sh)")
    return Plan(out, wheels, unpack, missing, lessons, tests, args.update_doc, args.max_file_mb, args.timeout)


def _lesson(run: LessonRun, out: Path, carried_modules: set, hub_reachable) -> Command:
    """The run's command line; a run that needs a module that is not here, or a Hub kernel that can be
    neither downloaded nor read from the local cache, is skipped with the reason."""
    argv = (sys.executable, str(REPO / run.script), *run.args, "--device", "cuda", "--gzip",
            "--trace_dir", str(out / "runs" / run.key))
    if run.needs and run.needs not in carried_modules and not _importable(run.needs):
        return Command(run.key, argv, f"{run.needs} is neither installed nor carried")
    if run.hub is not None:
        access = LR.hub_access(run.hub, hub_reachable())
        return Command(run.key, argv, access.skip, access.env + run.env,
                       "" if access.skip else f"{run.hub.repo}: {access.how}")
    return Command(run.key, argv, env=run.env)


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _installed_dist(dist: str) -> bool:
    try:
        metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


def describe(plan: Plan) -> list[str]:
    lines = [f"one-shot GPU run into {plan.out}", f"python  {sys.executable} ({platform.python_version()})"]
    if plan.wheels:
        lines.append(f"wheels  {len(plan.wheels)} carried; unpacked here: "
                     f"{', '.join(w.dist for w in plan.unpack) or 'none (all installed or not for this machine)'}")
    if plan.missing:
        lines.append(f"missing {', '.join(plan.missing)} (neither installed nor carried: tests/gpu/fetch_wheels.sh)")
    lines.append(f"lessons ({len(plan.lessons)}), each into {plan.out}/runs/<key>/ with run.log and report.json:")
    for c in plan.lessons:
        env = "".join(f"{k}={v} " for k, v in c.env)
        lines.append(f"  {c.key:<17} {env}python {' '.join(c.argv[1:]).replace(str(REPO) + '/', '')}"
                     + (f"   [skipped: {c.skip}]" if c.skip else "") + (f"   [{c.note}]" if c.note else ""))
    lines.append("reports python -m common.report --json runs/<key>/<trace>.json.gz -o runs/<key>/report.json")
    lines.append(f"tests   python {' '.join(plan.tests.argv[1:])}   (GPU_RUNS_DIR={plan.out}/runs, "
                 f"GPU_CLAIMS_LOG={plan.out}/claims.jsonl)" + (f"   [skipped: {plan.tests.skip}]" if plan.tests.skip else ""))
    lines.append(f"doc     {plan.out}/gpu-claims.md" + (" and docs/gpu-claims.md" if plan.update_doc else "")
                 + " with the 'seen on' column filled")
    lines.append(f"pack    {plan.out}/fixtures.tar.gz (files up to {plan.max_file_mb:g} MB)")
    return lines


# ----------------------------------------------------------------------------- the run


PROBE = """
import json, platform
from importlib import metadata
out = dict(python=platform.python_version(), platform=platform.platform(), packages={})
for dist in ("torch", "triton", "numpy", "msgspec", "rich", "liger-kernel", "kernels", "pytest"):
    try:
        out["packages"][dist] = metadata.version(dist)
    except metadata.PackageNotFoundError:
        out["packages"][dist] = None
try:
    import torch
except ImportError:
    out["torch"] = None
else:
    out.update(torch=torch.__version__, cuda=torch.version.cuda, cuda_available=torch.cuda.is_available())
    if out["cuda_available"]:
        cap = torch.cuda.get_device_capability()
        out.update(gpu=torch.cuda.get_device_name(), compute_capability=f"{cap[0]}.{cap[1]}")
print(json.dumps(out))
"""


def machine_of(env: dict) -> dict:
    """The machine, for env.json and the 'seen on' column, asked in a child process (this one never
    holds a CUDA context); bad input unless torch sees a GPU."""
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        fail(f"could not ask torch about the machine: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    machine = json.loads(p.stdout)
    if machine["torch"] is None:
        fail(f"torch is not importable with {sys.executable}: run run_all.py with the Python that has torch")
    if not machine["cuda_available"]:
        fail("no CUDA device: run_all.py runs the lessons on a GPU (--dry-run prints the plan anywhere)")
    return machine


def run_lesson(c: Command, env: dict, timeout_s: int) -> dict:
    folder = Path(c.argv[-1])
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(folder / "run.log", "w") as log:
        try:
            rc = subprocess.run(c.argv, cwd=REPO, env=dict(env, **dict(c.env)), stdout=log, stderr=subprocess.STDOUT,
                                timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return dict(key=c.key, returncode=rc, seconds=round(time.monotonic() - t0, 1),
                files=sorted(p.name for p in folder.iterdir()))


def write_report(folder: Path, env: dict) -> str:
    """report.json for the run's trace; the outcome in a few words."""
    traces = sorted(folder.glob("*.json.gz")) + sorted(p for p in folder.glob("*.json") if p.name != "report.json")
    if not traces:
        return "no trace"
    p = subprocess.run([sys.executable, "-m", "common.report", "--json", str(traces[0]), "-o", str(folder / "report.json")],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    return "ok" if p.returncode == 0 else f"failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}"


def run_tests(plan: Plan, env: dict) -> int:
    test_env = dict(env, GPU_RUNS_DIR=str(plan.out / "runs"), GPU_CLAIMS_LOG=str(plan.out / "claims.jsonl"))
    with open(plan.out / "pytest.log", "w") as log:
        return subprocess.run(plan.tests.argv, cwd=REPO, env=test_env, stdout=log, stderr=subprocess.STDOUT).returncode


def fill_doc(plan: Plan, machine: dict) -> None:
    label = f"{machine['gpu']}, torch {machine['torch']}"
    text = claims_doc.fill(DOC.read_text(), label, claims_doc.read_verdicts(plan.out / "claims.jsonl"),
                           claims_doc.read_outcomes(plan.out / "pytest.xml"), claims_doc.read_reports(plan.out / "runs"))
    (plan.out / "gpu-claims.md").write_text(text)
    if plan.update_doc:
        DOC.write_text(text)


def pack(plan: Plan) -> list[str]:
    """fixtures.tar.gz of OUT (files over the size cap left out); the names left out."""
    left_out = []
    limit = plan.max_file_mb * 1e6
    with tarfile.open(plan.out / "fixtures.tar.gz", "w:gz") as tar:
        for path in sorted(plan.out.rglob("*")):
            if not path.is_file() or path.name == "fixtures.tar.gz":
                continue
            name = str(path.relative_to(plan.out))
            if path.stat().st_size > limit:
                left_out.append(name)
                continue
            tar.add(path, arcname=name)
    return left_out


def site_env(site: str) -> dict:
    """The environment of every child process: the unpacked wheels and the repository on PYTHONPATH."""
    path = [site, str(REPO)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path), PYTHONUNBUFFERED="1")


def execute(plan: Plan, env: dict, machine: dict) -> int:
    plan.out.mkdir(parents=True, exist_ok=True)
    print(f"{machine['gpu']} (compute capability {machine['compute_capability']}), torch {machine['torch']}, "
          f"CUDA {machine['cuda']}", flush=True)
    results = []
    for i, c in enumerate(plan.lessons, 1):
        if c.skip:
            results.append(dict(key=c.key, skipped=c.skip))
            print(f"[{i}/{len(plan.lessons)}] {c.key}: skipped ({c.skip})", flush=True)
            continue
        r = run_lesson(c, env, plan.timeout_s)
        r["report"] = write_report(Path(c.argv[-1]), env) if r["returncode"] == 0 else "not written"
        results.append(r)
        print(f"[{i}/{len(plan.lessons)}] {c.key}: exit {r['returncode']} in {r['seconds']} s, "
              f"report {r['report']}", flush=True)
    tests_rc = run_tests(plan, env) if not plan.tests.skip else None
    print(f"tests/gpu: {'skipped (' + plan.tests.skip + ')' if tests_rc is None else f'exit {tests_rc}'} "
          f"(see {plan.out / 'pytest.log'})", flush=True)
    fill_doc(plan, machine)
    ok = all(r.get("returncode", 0) == 0 for r in results) and tests_rc == 0
    summary = dict(ok=ok, machine=machine, runs=results, tests_returncode=tests_rc, missing_wheels=list(plan.missing))
    (plan.out / "env.json").write_text(json.dumps(machine, indent=2) + "\n")
    (plan.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    left_out = pack(plan)
    print(f"wrote {plan.out / 'fixtures.tar.gz'}" + (f" (left out, too big: {', '.join(left_out)})" if left_out else ""))
    return 0 if ok else 1


@exit_on_bad_input
def main(argv=None) -> int:
    args = parse_args(argv)
    plan = make_plan(args)
    print("\n".join(describe(plan)), flush=True)
    if args.dry_run:
        return 0
    needed = [d for d in NEEDED if d in plan.missing]
    if needed:
        fail(f"the lessons need {', '.join(needed)}: carry its wheel (tests/gpu/fetch_wheels.sh) or install it")
    with tempfile.TemporaryDirectory(prefix="run_all_site_") as site:
        W.unpack(list(plan.unpack), Path(site))
        env = site_env(site)
        return execute(plan, env, machine_of(env))


if __name__ == "__main__":
    raise SystemExit(main())
