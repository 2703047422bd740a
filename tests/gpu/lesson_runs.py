"""The lesson runs behind the GPU claims: the posts' commands, one key each.

``run_all.py`` runs all of them (adding ``--device cuda --gzip --trace_dir OUT/runs/<key>``);
``test_gpu_claims.py`` reads the ones it checks from that folder when ``GPU_RUNS_DIR`` names it,
and otherwise runs them itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

MLP = ("--batch", "64", "--seq", "128", "--dim", "768", "--hidden", "3072")


@dataclass(frozen=True)
class LessonRun:
    key: str
    script: str
    args: tuple
    shows: str  # the claims it is for (CLAIMS.md ids)
    needs: Optional[str] = None  # a module the run needs beyond the project's own (liger_kernel)


RUNS = (
    LessonRun("p1_64", "01_matmul_add.py", ("--size", "64"), "P1.3 P1.6 P1.11 P1.12 P1.13 (cold)"),
    LessonRun("p1_64_warm", "01_matmul_add.py", ("--size", "64", "--warmup"), "P1.7"),
    LessonRun("p1_64_batch", "01_matmul_add.py", ("--size", "64", "--batch", "8"), "P1.10 (aten::bmm)"),
    LessonRun("p1_64_wait0", "01_matmul_add.py", ("--size", "64", "--schedule", "0,0,3"), "P1.8 (buffer request)"),
    LessonRun("p1_64_active20", "01_matmul_add.py", ("--size", "64", "--schedule", "0,0,20"), "P1.8 (one gap in 20)"),
    LessonRun("p1_4096", "01_matmul_add.py", ("--size", "4096", "--warmup"), "P1.4 P1.14"),
    LessonRun("p1_4096_active20", "01_matmul_add.py", ("--size", "4096", "--warmup", "--schedule", "0,0,20"),
              "P1.14 (20 steps)"),
    LessonRun("p1_4096_compile", "01_matmul_add.py", ("--size", "4096", "--warmup", "--compile"), "P1.15-P1.18"),
    LessonRun("linear", "02_linear.py", ("--batch", "1024", "--in_dim", "32", "--out_dim", "64"), "P2.1 P2.3 P2.5"),
    LessonRun("linear_compile", "02_linear.py", ("--batch", "1024", "--in_dim", "32", "--out_dim", "64", "--compile"),
              "P2.2"),
    LessonRun("mlp", "03_simple_mlp.py", MLP, "P2.4 P2.6 P2.8"),
    LessonRun("mlp_compile", "03_simple_mlp.py", MLP + ("--compile",), "P2.7"),
    LessonRun("liger", "03_kernels_mlp.py", MLP + ("--source", "pip"), "P2.9 P2.10", needs="liger_kernel"),
)
BY_KEY = {run.key: run for run in RUNS}


@dataclass(frozen=True)
class RunFiles:
    """What one lesson run left in its folder."""

    folder: Path
    trace: Path  # .json or .json.gz
    table: Path  # the profiler table (.txt)
    log: Optional[Path]  # run_all.py's capture of the run's console, when there is one


def files_of(folder: Path) -> RunFiles:
    traces = sorted(folder.glob("*.json")) + sorted(folder.glob("*.json.gz"))
    traces = [t for t in traces if t.name != "report.json"]
    tables = sorted(folder.glob("*.txt"))
    if len(traces) != 1 or len(tables) != 1:
        raise FileNotFoundError(f"{folder}: expected one trace and one table, found "
                                f"{[t.name for t in traces]} and {[t.name for t in tables]}")
    log = folder / "run.log"
    return RunFiles(folder, traces[0], tables[0], log if log.exists() else None)
