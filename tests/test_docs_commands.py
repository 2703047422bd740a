"""Every command the README and docs/*.md show in a ``bash`` block runs, on this CPU, as written or
shrunk the documented way below.

:data:`COMMANDS` is the one table: each documented command, and how it runs here. A command added
to the docs without a line here fails :func:`test_every_documented_command_is_mapped`; a line
whose command left the docs fails it too. The kinds:

- :class:`Lesson`: the lesson runs, its post's big shape shrunk by ``replace`` (flag -> value) and
  ``append``. Several documented commands that shrink to one run are run once; a run that
  ``tests/conftest.py``'s session ``runs`` already made (the same flags, or those plus only
  ``--html``/``--annotate``) is reused, not run again. Only Part 3's five CPU commands run here.
- :class:`Refused`: a command the CPU cannot run (CUDA kernels): ``tests/test_bad_input.py`` runs it
  on the CPU (one ``error:`` line, exit 2, nothing written), in a case that reads ``case``; here its
  ``--help`` must name each of its flags.
- :class:`Elsewhere`: a command another test runs (the LLM lesson in ``tests/test_llm.py``, the DDP
  job under torchrun in ``tests/test_ddp.py``, CUDA graphs in ``tests/gpu``): its ``--help`` must
  answer and name each of its flags, and the covering test file must pass each flag.
- :class:`Report`: ``common.report`` on traces the tests made; placeholders (``TRACE``, ``A``,
  ``B``, ``DIR``, ``<tag>``, the posts' trace paths) resolved by :func:`places`; outputs go to a
  temporary folder and must appear. They run two at a time.
- :class:`View`, :class:`ViewList`, :class:`Share`: the viewer serves the trace to a client as
  the Perfetto UI and stops; ``--list`` lists a run; ``common.share`` without a login refuses in
  one line before running trace-util.
- :class:`CI`: a test command: it must be a line of ``.ci/run`` (it is not re-run here).
- :class:`Script`: a helper of the one-shot GPU run: ``--dry-run`` runs; the rest must exist.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import (ATTENTION_SMALL, REPO, SMALL_MLP, command_env, free_port, module_command, run_module, run_script,
                      trace_of, wait_listening)
from test_ddp import gpu_rank

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MLP_SHRUNK = dict(zip(SMALL_MLP[::2], SMALL_MLP[1::2]))
OUTPUT_ONLY = {"--html", "--annotate"}  # flags that add files and change nothing else in a run
RECORDING = {"--profile-memory"}  # flags that record more into the trace: the run is the documented one, and more
DEFAULTS = {  # a flag given at its default is the run without it
    "01_matmul_add.py": {"--size": "64"},
    "02_linear.py": {"--batch": "1024", "--in_dim": "32", "--out_dim": "64"},
    "03_simple_mlp.py": {"--batch": "64", "--seq": "128", "--dim": "768", "--hidden": "3072"},
}


@dataclass(frozen=True)
class Lesson:
    replace: dict = field(default_factory=dict)
    append: tuple = ()


@dataclass(frozen=True)
class Refused:
    case: str  # how tests/test_bad_input.py's case for it reads
    test: str = "tests/test_bad_input.py"


@dataclass(frozen=True)
class Elsewhere:
    test: str  # the test file that runs it


@dataclass(frozen=True)
class Report:
    outputs: tuple = ()  # files the command writes (relative: in its temporary folder)


class View:
    pass


class ViewList:
    pass


class Share:
    pass


class CI:
    pass


class Script:
    pass


class Yours:
    """docs/your-workload.md's copy of a lesson: run, as the page shows it, by tests/test_your_workload.py."""


@dataclass(frozen=True)
class Generated:
    """docs/compiled-kernels.md: a command on the compiled module a lesson copied beside its trace (or the lesson
    run that copies a kernel's own file), run by ``test`` (on the CPU, or on a GPU by tests/gpu, run_all.py), in
    the place ``marker`` names; its copies' names are those the lesson writes for the MLP's documented trace."""

    test: str
    marker: str


POSTS_01 = Lesson(replace={"--size": "64"})  # Part 1's 4096 matrices: 64 (the schedule is what counts)
COMMANDS = {
    # Part 1: 4096 -> 64; the batch run at 32 (conftest's runs "01_batch", "01_cold_sched")
    "uv run 01_matmul_add.py --size 4096 --warmup --compile": POSTS_01,
    "uv run 01_matmul_add.py --size 64": POSTS_01,
    "uv run 01_matmul_add.py --size 64 --warmup": POSTS_01,
    "uv run 01_matmul_add.py --size 4096 --warmup": POSTS_01,
    "uv run 01_matmul_add.py --size 64 --batch 8": Lesson(replace={"--size": "32"}),
    "uv run 01_matmul_add.py --size 64 --schedule 0,0,20": POSTS_01,
    "uv run 01_matmul_add.py --size 64 --schedule 0,0,3": POSTS_01,
    # the page and the annotated copy: at conftest's "01_cold_sched" schedule, which writes them too
    "uv run 01_matmul_add.py --html --annotate": Lesson(append=("--schedule", "0,0,20")),
    # Part 2: nn.Linear's batch 1024 -> 64 when compiled; the MLP at conftest's SMALL_MLP
    "uv run 02_linear.py --batch 1024 --in_dim 32 --out_dim 64": Lesson(),
    "uv run 02_linear.py --batch 1024 --in_dim 32 --out_dim 64 --compile": Lesson(replace={"--batch": "64"}),
    "uv run 03_simple_mlp.py --batch 64 --seq 128 --dim 768 --hidden 3072": Lesson(replace=MLP_SHRUNK),
    "uv run 03_simple_mlp.py --batch 64 --seq 128 --dim 768 --hidden 3072 --compile": Lesson(replace=MLP_SHRUNK),
    # CUDA only: tests/test_bad_input.py runs each on the CPU (one error: line, exit 2, nothing written)
    "uv run 03_kernels_mlp.py --batch 64 --seq 128 --dim 768 --hidden 3072": Refused("03_simple_mlp.py --compile"),
    # Part 3: the post's 8x16x1024x64 -> 2x4x256x64 (conftest's attention_runs)
    "uv run 04_a_naive_attention.py": Lesson(append=tuple(ATTENTION_SMALL)),
    "uv run 04_b_inplace_ops_attention.py": Lesson(append=tuple(ATTENTION_SMALL)),
    "uv run 04_c_sdpa_attention.py --backend math": Lesson(append=tuple(ATTENTION_SMALL)),
    "uv run 04_c_sdpa_attention.py --backend flash": Lesson(append=tuple(ATTENTION_SMALL)),
    "uv run 04_c_sdpa_attention.py --backend auto": Lesson(append=tuple(ATTENTION_SMALL)),
    "uv run 04_c_sdpa_attention.py --backend efficient": Refused('["--backend", "efficient"]'),
    "uv run 04_c_sdpa_attention.py --backend cudnn": Refused('["--backend", "cudnn"'),
    "uv run 04_d_kernels_attention.py": Refused("04_c_sdpa_attention.py --backend flash"),
    # beyond the posts
    "uv run 05_llm.py": Elsewhere("tests/test_llm.py"),
    "uv run 05_llm.py --attn eager": Elsewhere("tests/test_llm.py"),
    "uv run 05_llm.py --cache static": Elsewhere("tests/test_llm.py"),
    "uv run 05_llm.py --compile --cache dynamic": Elsewhere("tests/test_llm.py"),
    "uv run 05_llm.py --compile --cache static": Elsewhere("tests/test_llm.py"),
    "uv run 05_llm.py --compile --compile-mode reduce-overhead --cache static": Elsewhere("tests/gpu/test_llm_gpu.py"),
    'uv run 05_llm.py --model ./my-checkpoint --prompt "The capital of France is"': Elsewhere("tests/test_llm.py"),
    "uv run torchrun --standalone --nproc-per-node 2 06_ddp.py": Elsewhere("tests/test_ddp.py"),
    "uv run torchrun --standalone --nproc-per-node 2 06_ddp.py --bucket-cap-mb 1": Elsewhere("tests/test_ddp.py"),
    "uv run torchrun --standalone --nproc-per-node 2 06_ddp.py --straggler 1 --delay-ms 50": Elsewhere("tests/test_ddp.py"),
    # your own workload (docs/your-workload.md)
    "cp 03_simple_mlp.py my_model.py": Yours(),
    "uv run my_model.py --batch 4 --seq 64 --dim 256 --hidden 1024": Yours(),
    # from a compiled kernel to its code (docs/compiled-kernels.md)
    "OMP_NUM_THREADS=1 uv run traces/03_simple_mlp/64x128x768x3072_bf16_warm_compile.graph0.py -p":
        Generated("tests/test_generated_code.py", "def test_the_printed_module_command_times_the_kernel"),
    "TORCHINDUCTOR_BENCHMARK_KERNEL=1 uv run 03_simple_mlp.py --batch 64 --seq 128 --dim 768 --hidden 3072 --compile":
        Generated("tests/gpu/lesson_runs.py", 'env=(("TORCHINDUCTOR_BENCHMARK_KERNEL", "1"),)'),
    "uv run traces/03_simple_mlp/64x128x768x3072_bf16_warm_compile.graph0.py -p":
        Generated("tests/gpu/test_generated_code_gpu.py", "def test_g6_the_module_alone_times_its_kernels_by_category"),
    "uv run traces/03_simple_mlp/64x128x768x3072_bf16_warm_compile.graph0.kernel0.py":
        Generated("tests/gpu/test_generated_code_gpu.py", "def test_g6_the_kernel_alone_and_with_max_autotune"),
    """sed "s/'max_autotune': False/'max_autotune': True/" traces/03_simple_mlp/64x128x768x3072_bf16_warm_compile.graph0.kernel0.py > traces/03_simple_mlp/64x128x768x3072_bf16_warm_compile.graph0.kernel0.max_autotune.py && uv run traces/03_simple_mlp/64x128x768x3072_bf16_warm_compile.graph0.kernel0.max_autotune.py""":
        Generated("tests/gpu/test_generated_code_gpu.py", "def test_g6_the_kernel_alone_and_with_max_autotune"),
    # the report
    "uv run -m common.report traces/03_simple_mlp/64x128x768x3072_bf16_warm_compile.json": Report(),
    "uv run -m common.report TRACE": Report(),
    "uv run -m common.report traces/01_matmul_add/64_bf16_cold_eager.json": Report(),
    "uv run -m common.report TRACE --short": Report(),
    "uv run -m common.report --json TRACE > report.json": Report(("report.json",)),
    "uv run -m common.report --json TRACE -o report.json": Report(("report.json",)),
    "uv run -m common.report --compare A B": Report(),
    "uv run -m common.report --compare traces/02_linear/1024x32x64_bf16_warm_eager.json "
    "traces/02_linear/1024x32x64_bf16_warm_compile.json": Report(),
    "uv run -m common.report TRACE --html report.html": Report(("report.html",)),
    "uv run -m common.report --compare A B --html compare.html": Report(("compare.html",)),
    "uv run -m common.report TRACE --annotate TRACE.annotated.json.gz": Report(("TRACE.annotated.json.gz",)),
    "uv run -m common.report --glance traces/04_a_naive_attention traces/04_c_sdpa_attention": Report(),
    "uv run -m common.report traces/06_ddp/<tag>_rank*.json": Report(),
    "uv run -m common.report DIR": Report(),
    "uv run -m common.report traces/06_ddp/<tag>_rank*.json --json > job.json": Report(("job.json",)),
    # viewing and sharing
    "uv run -m common.view traces/01_matmul_add/64_bf16_cold_eager.json": View(),
    "uv run -m common.view TRACE.annotated.json.gz": View(),
    "uv run -m common.view --list": ViewList(),
    "uv run -m common.share traces -b my-traces": Share(),
    # tests and CI
    "uv sync --compile-bytecode": CI(),
    "uv run pytest": CI(),
    "uv run --with holistictraceanalysis==0.5.0 pytest -q tests/test_hta_interop.py tests/test_h100_bounds.py::test_hta_figures_agree_with_hta_itself": CI(),
    "uv run --with traceinsight==0.6.1 pytest -q tests/test_hta_interop.py tests/test_h100_bounds.py::test_hta_figures_agree_with_hta_itself": CI(),
    "tests/gpu/fetch_wheels.sh": Script(),
    "PYVER=3.11 ARCH=aarch64 tests/gpu/fetch_wheels.sh": Script(),
    "python3 tests/gpu/run_all.py OUT --dry-run": Script(),
    "python3 tests/gpu/run_all.py OUT": Elsewhere("tests/test_gpu_run_all.py"),
}


def documented() -> dict[str, list[str]]:
    """Every command line of every ``bash`` block in the docs (continuations joined, comments
    dropped, spaces squeezed) -> the files that show it."""
    found: dict[str, list[str]] = {}
    for doc in DOCS:
        for block in re.findall(r"^[ \t]*```bash\n(.*?)^[ \t]*```", doc.read_text(), flags=re.S | re.M):
            pending = ""
            for line in block.splitlines():
                line = line.strip()
                if line.endswith("\\"):
                    pending += line[:-1] + " "
                    continue
                line, pending = pending + line, ""
                line = " ".join(re.sub(r"(^|\s+)#.*$", "", line).split())
                if line:
                    found.setdefault(line, []).append(doc.relative_to(REPO).as_posix())
    return found


DOCUMENTED = documented()


def test_every_documented_command_is_mapped():
    """The table above and the docs name the same commands: none unmapped, none stale."""
    unmapped = sorted(set(DOCUMENTED) - set(COMMANDS))
    stale = sorted(set(COMMANDS) - set(DOCUMENTED))
    assert not unmapped, f"documented but not in COMMANDS (say how it runs here): {unmapped}"
    assert not stale, f"in COMMANDS but no longer documented: {stale}"


def test_report_doc_lists_every_rule_in_its_own_words():
    """docs/report.md's table of rules is the one tests/rules_doc.py makes from the rules: a row for every rule
    the report runs, in its order, in the words of its docstring's first paragraph (which live there only;
    ``uv run python tests/rules_doc.py --write`` writes the table anew). The README links the page."""
    import rules_doc

    now = rules_doc.in_doc((REPO / "docs" / "report.md").read_text())
    assert now == rules_doc.table(), "stale: run uv run python tests/rules_doc.py --write\n" + \
        "\n".join(sorted(set(now.splitlines()) ^ set(rules_doc.table().splitlines())))
    assert "(docs/report.md)" in (REPO / "README.md").read_text()


# ---- lessons -------------------------------------------------------------------------------------


def split(command: str) -> tuple[str, list[str]]:
    """(script, its arguments) of ``uv run [torchrun ...] SCRIPT.py ARGS``."""
    words = shlex.split(command)
    i = next(k for k, w in enumerate(words) if w.endswith(".py"))
    return Path(words[i]).name, words[i + 1:]


def shrunk(command: str, how: Lesson) -> tuple[str, tuple]:
    script, args = split(command)
    out = list(args)
    for flag, value in how.replace.items():
        if flag in out:
            out[out.index(flag) + 1] = value
    return script, (*out, *how.append)


def canonical(script: str, args) -> dict:
    """The flags of a run as {flag: value or True}, without those given at their default."""
    flags, args = {}, list(args)
    while args:
        flag = args.pop(0)
        flags[flag] = args.pop(0) if args and not args[0].startswith("--") else True
    return {f: v for f, v in flags.items() if DEFAULTS.get(script, {}).get(f) != v}


def same_run(script: str, args, run) -> bool:
    """A session run of conftest is this run, perhaps with --html/--annotate more."""
    if run.script != script:
        return False
    mine, theirs = canonical(script, args), canonical(script, run.args)
    return all(theirs.get(f) == v for f, v in mine.items()) and set(theirs) - set(mine) <= OUTPUT_ONLY | RECORDING


LESSON_RUNS = sorted({shrunk(c, how) for c, how in COMMANDS.items() if isinstance(how, Lesson)})


@pytest.fixture(scope="module")
def lesson_runs(runs, attention_runs, tmp_path_factory):
    """Each shrunk lesson run: conftest's when it made it, else run now (two at a time), every run of a
    lesson writing into one folder as a user's would."""
    base = tmp_path_factory.mktemp("docs_runs")
    made = [*runs.values(), *attention_runs.values()]
    done = {key: next((r for r in made if same_run(*key, r)), None) for key in LESSON_RUNS}
    todo = [key for key, run in done.items() if run is None]

    def go(key):
        script, args = key
        return key, run_script(script, *args, trace_dir=base / Path(script).stem)

    with ThreadPoolExecutor(max_workers=2) as pool:
        done.update(pool.map(go, todo))
    return done


@pytest.mark.parametrize("command", [c for c, how in COMMANDS.items() if isinstance(how, Lesson)])
def test_lesson_command_runs(command, lesson_runs):
    run = lesson_runs[shrunk(command, COMMANDS[command])]
    assert run.returncode == 0, f"{command} (as {run.args}) failed:\n{run.stdout}\n{run.stderr}"
    stems = [p.name for p in run.trace_dir.iterdir()]
    assert any(n.endswith(".json") and ".annotated." not in n for n in stems) and any(n.endswith(".txt") for n in stems)
    for flag, suffix in (("--html", ".html"), ("--annotate", ".annotated.json")):
        if flag in run.args:
            assert any(n.endswith(suffix) for n in stems), (flag, stems)


@functools.lru_cache(maxsize=None)
def help_of(script: str) -> str:
    """``SCRIPT --help``, which must answer (before torch loads: fast)."""
    proc = subprocess.run([sys.executable, str(REPO / script), "--help"], cwd=REPO, capture_output=True,
                          text=True, env=command_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def own_flags(command: str) -> tuple[str, list[str]]:
    words = shlex.split(command)
    script = next(w for w in words if w.endswith(".py"))
    return script, [w for w in words[words.index(script) + 1:] if w.startswith("--")]


@pytest.mark.parametrize("command", [c for c, how in COMMANDS.items() if isinstance(how, Refused)])
def test_gpu_only_command_is_a_bad_input_case(command):
    """Its flags are real, and tests/test_bad_input.py runs it on the CPU (one line, exit 2, nothing written)."""
    script, flags = own_flags(command)
    text = help_of(script)
    assert all(flag in text for flag in flags), (flags, text)
    covering = (REPO / COMMANDS[command].test).read_text()
    assert f'("{script}", [' in covering and COMMANDS[command].case in covering


@pytest.mark.parametrize("command", [c for c, how in COMMANDS.items() if isinstance(how, Elsewhere)])
def test_command_run_elsewhere_names_real_flags(command):
    """Its --help answers and lists each flag; the covering test passes each flag."""
    script, flags = own_flags(command)
    text = help_of(script)
    for flag in flags:
        assert flag in text, f"{flag} is not a flag of {script}"
    covering = (REPO / COMMANDS[command].test).read_text()
    assert Path(script).name in covering or Path(script).stem in covering
    for flag in flags:
        assert f'"{flag}"' in covering, f"{COMMANDS[command].test} never passes {flag}"


# ---- the report, the viewer, sharing -------------------------------------------------------------


@pytest.fixture(scope="module")
def places(runs, lesson_runs, tmp_path_factory) -> dict[str, list[str]]:
    """What each placeholder or documented path stands for here."""
    job = tmp_path_factory.mktemp("job")
    ranks = [str(gpu_rank(job / f"8x128x768x3072x4_bf16_warm_eager_rank{k}.json", k, us))
             for k, us in ((0, 300.0), (1, 100.0))]
    attention = {Path(s).stem: run.trace_dir for (s, _), run in lesson_runs.items() if s.startswith("04_")}
    trace = str(trace_of(runs["01_default"]))
    annotated = tmp_path_factory.mktemp("annotated") / "trace.annotated.json.gz"
    made = run_module("common.report", trace, "--annotate", annotated)
    assert made.returncode == 0, made.stderr
    a, b = str(trace_of(runs["02_eager"])), str(trace_of(runs["02_compile"]))
    return {
        "TRACE": [trace],
        "traces/01_matmul_add/64_bf16_cold_eager.json": [trace],
        "A": [a], "B": [b],
        "traces/02_linear/1024x32x64_bf16_warm_eager.json": [a],
        "traces/02_linear/1024x32x64_bf16_warm_compile.json": [b],
        "traces/03_simple_mlp/64x128x768x3072_bf16_warm_compile.json": [str(trace_of(runs["03_compile"]))],
        "traces/04_a_naive_attention": [str(attention["04_a_naive_attention"])],
        "traces/04_c_sdpa_attention": [str(attention["04_c_sdpa_attention"])],
        "traces/06_ddp/<tag>_rank*.json": ranks,
        "DIR": [str(job)],
        "TRACE.annotated.json.gz@view": [str(annotated)],
    }


REPORTS = [c for c, how in COMMANDS.items() if isinstance(how, Report)]


@pytest.fixture(scope="module")
def reports(places, tmp_path_factory) -> dict:
    """Each report command run once, two at a time, each in its own temporary folder (its outputs go there)."""

    def go(command):
        words = shlex.split(command)[3:]  # after "uv run -m"
        module, words = words[0], words[1:]
        out = None
        if ">" in words:
            out, words = words[words.index(">") + 1], words[:words.index(">")]
        cwd = tmp_path_factory.mktemp("report")
        proc = run_module(module, *[x for w in words for x in (places.get(w) or [w])], cwd=cwd)
        if out is not None:
            (cwd / out).write_text(proc.stdout)
        return command, (proc, cwd, words)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(go, REPORTS))


@pytest.mark.parametrize("command", REPORTS)
def test_report_command_runs(command, reports):
    proc, cwd, words = reports[command]
    assert proc.returncode == 0, f"{command}:\n{proc.stdout}\n{proc.stderr}"
    for name in COMMANDS[command].outputs:
        path = cwd / name
        assert path.is_file() and path.stat().st_size > 0, name
        if name.endswith(".json"):
            json.loads(path.read_text())
    if "--glance" in words:
        assert "04_a_naive_attention" in proc.stdout and "backend-math" in proc.stdout, proc.stdout
    if "rank*" in command or "DIR" in words:
        assert "straggler" in proc.stdout


@pytest.mark.parametrize("command", [c for c, how in COMMANDS.items() if isinstance(how, View)])
def test_view_command_serves_the_trace(command, places):
    """As documented, plus a free port, no browser and a 1 s linger: the Perfetto UI's fetch gets the file, then
    it stops."""
    (path,) = places.get(shlex.split(command)[-1] + "@view") or places[shlex.split(command)[-1]]
    port = free_port()
    proc = subprocess.Popen(module_command("common.view", path, "--port", port, "--no-browser", "--timeout", "60",
                                           "--linger", "1"),
                            cwd=REPO, env=command_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_listening(port, proc, 30)
        link = next(line.strip() for line in proc.stdout if line.startswith("http"))  # it holds the secret
        req = urllib.request.Request(link.split("?url=")[1],
                                     headers={"Origin": "https://ui.perfetto.dev"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.read() == Path(path).read_bytes()
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_view_list_names_a_run(places, tmp_path):
    """``--list`` from a folder whose traces/ holds a lesson's run."""
    assert "uv run -m common.view --list" in COMMANDS
    (trace,) = places["TRACE"]
    dest = tmp_path / "traces" / "01_matmul_add"
    dest.mkdir(parents=True)
    shutil.copy(trace, dest)
    proc = run_module("common.view", "--list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"traces/01_matmul_add/{Path(trace).name}" in proc.stdout


def test_share_without_a_login_refuses_before_uploading(tmp_path):
    """``common.share traces -b my-traces`` with no Hugging Face login: one line, exit 2, trace-util never run."""
    (command,) = [c for c, how in COMMANDS.items() if isinstance(how, Share)]
    (tmp_path / "traces" / "01_matmul_add").mkdir(parents=True)
    (tmp_path / "traces" / "01_matmul_add" / "64_bf16_cold_eager.json").write_text("{}")
    (tmp_path / "bin").mkdir()
    marker = tmp_path / "trace-util-ran"
    fake = tmp_path / "bin" / "trace-util"
    fake.write_text(f"#!/bin/sh\ntouch {marker}\n")
    fake.chmod(0o755)
    env = {k: v for k, v in command_env().items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(PATH=str(tmp_path / "bin"), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1")
    proc = run_module("common.share", *shlex.split(command)[4:], cwd=tmp_path, env=env)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error:"), proc.stderr
    assert "hf auth login" in proc.stderr and not marker.exists()


# ---- tests and CI --------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [c for c, how in COMMANDS.items() if isinstance(how, CI)])
def test_test_command_is_what_ci_runs(command):
    ci = [" ".join(line.split()) for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert command in ci


@pytest.mark.parametrize("command", [c for c, how in COMMANDS.items() if isinstance(how, Script)])
def test_gpu_run_helpers(command, tmp_path):
    words = [w for w in shlex.split(command) if "=" not in w]
    script = next(REPO / w for w in words if w.startswith("tests/"))
    assert script.is_file() and (script.suffix == ".py" or os.access(script, os.X_OK))
    if "--dry-run" in words:
        out = tmp_path / "out"
        proc = subprocess.run([sys.executable, str(script), str(out), "--dry-run"], cwd=REPO, capture_output=True,
                              text=True, env=command_env(), timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "01_matmul_add.py" in proc.stdout and not out.exists()



@pytest.mark.parametrize("command", [c for c, how in COMMANDS.items() if isinstance(how, Yours)])
def test_your_workload_commands_are_the_ones_its_test_runs(command):
    from test_your_workload import doc_commands

    assert command in doc_commands()


# ---- from a compiled kernel to its code ----------------------------------------------------------

MLP_TRACE = Path("traces/03_simple_mlp/64x128x768x3072_bf16_warm_compile.json")  # the MLP's documented run


@pytest.mark.parametrize("command", [c for c, how in COMMANDS.items() if isinstance(how, Generated)])
def test_documented_generated_code_command_is_run_by_its_test(command):
    """Its test runs it (the marker is there), and each copy it names is one the lesson writes beside the MLP's
    documented trace (the module, the kernel's own file); the max-autotune edit is the one the report prints."""
    from common import inductor_source
    from common.report.rules.generated_code import max_autotune_command

    how = COMMANDS[command]
    assert how.marker in (REPO / how.test).read_text(), (how.test, how.marker)
    named = {inductor_source.module_copy(MLP_TRACE, 0).as_posix(), inductor_source.kernel_copy(MLP_TRACE, 0, 0).as_posix()}
    for path in re.findall(r"traces/\S+\.py", command):
        assert path in named or path.endswith(".max_autotune.py"), path
    if command.startswith("sed "):
        assert command == max_autotune_command(inductor_source.kernel_copy(MLP_TRACE, 0, 0).as_posix())
