"""The report's JSON, frozen: every trace the suite holds, read by the command line's ``--json``, against
the JSON the same code wrote before a restructuring (issue 29: a move of code changes no byte).

    uv run python tests/golden.py            # compare; prints each case that differs, exit 1 if any
    uv run python tests/golden.py --write    # write tests/data/golden/ anew (only for a change on purpose)
    uv run python tests/golden.py --write NAME...   # only those cases

Cases (JSON unless named text or short): each real trace under ``tests/data/traces`` and ``tests/data/h100/runs``, each lesson's CPU trace
under ``tests/data/lessons_cpu`` (small runs made once, gzipped), two ``--compare`` pairs and the DDP job;
and the text reports (full and ``--short``) of the H100 runs and the lesson traces.
Paths are written relative to the repository, so the JSON is the same on any clone."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
GOLDEN = DATA / "golden"


def _rel(paths) -> list[str]:
    return [str(p.relative_to(REPO)) for p in paths]


def cases() -> dict[str, list[str]]:
    """Case name -> the command line's arguments after ``--json``."""
    out = {}
    singles = [*sorted((DATA / "traces").rglob("*.json.gz")), *sorted((DATA / "h100" / "runs").glob("*/*.json.gz")),
               *sorted(p for p in (DATA / "lessons_cpu").rglob("*.json.gz") if "_rank" not in p.name)]
    for path in singles:
        out[str(path.relative_to(DATA)).replace("/", "__").removesuffix(".json.gz")] = _rel([path])
    runs = DATA / "h100" / "runs"
    for a, b in (("attn_naive", "attn_inplace"), ("mlp", "mlp_compile")):
        out[f"compare__{a}__{b}"] = ["--compare", *_rel([*runs.glob(f"{a}/*.json.gz"), *runs.glob(f"{b}/*.json.gz")])]
    lessons = DATA / "lessons_cpu"
    out["compare__02_linear"] = ["--compare", *_rel(sorted((lessons / "02_linear").glob("*.json.gz"))[::-1])]
    out["job__06_ddp"] = _rel(sorted((lessons / "06_ddp").glob("*_rank*.json.gz")))
    # The text reports too (80 columns, no colour), full and short, on the runs the posts read.
    for path in [*sorted(runs.glob("*/*.json.gz")), *sorted(p for p in lessons.rglob("*.json.gz") if "_rank" not in p.name)]:
        name = path.parent.name + ("" if path.parent.parent.name == "runs" else "__" + path.name.removesuffix(".json.gz"))
        out[f"text__{name}"] = ["TEXT", *_rel([path])]
        out[f"short__{name}"] = ["TEXT", "--short", *_rel([path])]
    out["text__job__06_ddp"] = ["TEXT", *out["job__06_ddp"]]
    out["text__compare__attn_naive__attn_inplace"] = ["TEXT", *out["compare__attn_naive__attn_inplace"]]
    # --glance: every H100 run, and Part 3's variants side by side with their verdicts
    out["glance__h100"] = ["--glance", *_rel([runs])]
    out["text__glance__h100"] = ["TEXT", "--glance", *_rel([runs])]
    attention = [runs / n for n in ("attn_naive", "attn_inplace", "sdpa_flash", "sdpa_cudnn")]
    out["text__glance__attention"] = ["TEXT", "--glance", *_rel(attention)]
    return out


def report_json(args: list[str]) -> str:
    """What ``uv run -m common.report --json ARGS -o FILE`` writes, run in this process from the repo,
    with its exit status and console (a warning is part of what the command says)."""
    from common.report.__main__ import run

    old = Path.cwd()
    console = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "report.json"
        try:
            os.chdir(REPO)
            with contextlib.redirect_stdout(console), contextlib.redirect_stderr(console):
                code = run(args[1:] if args[0] == "TEXT" else ["--json", *args, "-o", str(dest)])
        finally:
            os.chdir(old)
        text = dest.read_text() if dest.exists() else ""
    said = re.sub(r"wrote \S*report\.json", "wrote FILE", console.getvalue())  # the temporary path, as shown
    return f"exit {code}\n{said}{text}"


def golden_path(name: str) -> Path:
    return GOLDEN / f"{name}.json.gz"


def first_difference(want: str, got: str) -> str:
    for i, (a, b) in enumerate(zip(want.splitlines(), got.splitlines())):
        if a != b:
            return f"line {i + 1}: was {a.strip()!r}, now {b.strip()!r}"
    return f"lengths differ: {len(want)} against {len(got)} characters"


def main(argv: list[str]) -> int:
    write = "--write" in argv
    only = {a for a in argv if not a.startswith("--")}  # --write NAME...: only those cases
    GOLDEN.mkdir(exist_ok=True)
    bad = 0
    for name, args in cases().items():
        if only and name not in only:
            continue
        got = report_json(args)
        if write:
            golden_path(name).write_bytes(gzip.compress(got.encode(), mtime=0))
            continue
        want = gzip.decompress(golden_path(name).read_bytes()).decode()
        if want != got:
            bad += 1
            print(f"{name}: {first_difference(want, got)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main(sys.argv[1:]))
