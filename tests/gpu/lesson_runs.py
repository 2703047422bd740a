"""The lesson runs behind the GPU claims: the posts' commands, one key each.

``run_all.py`` runs all of them (adding ``--device cuda --gzip --trace_dir OUT/runs/<key>``);
``test_gpu_claims.py`` reads the ones it checks from that folder when ``GPU_RUNS_DIR`` names it,
and otherwise runs them itself.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Optional
from urllib.parse import urlparse

MLP = ("--batch", "64", "--seq", "128", "--dim", "768", "--hidden", "3072")


@dataclass(frozen=True)
class HubKernel:
    """A kernel a run loads from the Hugging Face Hub with ``kernels.get_kernel(repo, version=...)``."""

    repo: str
    version: int


@dataclass(frozen=True)
class LessonRun:
    key: str
    script: str
    args: tuple
    shows: str  # the claims it is for (CLAIMS.md ids)
    needs: Optional[str] = None  # a module the run needs beyond the project's own (liger_kernel, kernels)
    hub: Optional[HubKernel] = None  # a kernel it loads from the Hub (reachable, or already in the local cache)
    env: tuple = ()  # (name, value) pairs its process adds to the environment


FLASH_ATTN2 = HubKernel("kernels-community/flash-attn2", 3)


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
    # the TorchInductor profiling guide's workflow (docs/compiled-kernels.md): each Triton kernel's file runs alone
    LessonRun("mlp_compile_kernels", "03_simple_mlp.py", MLP + ("--compile",), "G.6",
              env=(("TORCHINDUCTOR_BENCHMARK_KERNEL", "1"),)),
    LessonRun("liger", "03_kernels_mlp.py", MLP + ("--source", "pip"), "P2.9 P2.10", needs="liger_kernel"),
    # Part 3: the post's commands, its default shapes (q, k, v [8, 16, 1024, 64] bf16, causal)
    LessonRun("attn_naive", "04_a_naive_attention.py", (), "P3.1 P3.2 P3.6 (bf16 GEMMs)"),
    LessonRun("attn_inplace", "04_b_inplace_ops_attention.py", (), "P3.3 P3.4 P3.5"),
    LessonRun("sdpa_math", "04_c_sdpa_attention.py", ("--backend", "math"), "P3.4-P3.8 P3.10 (math's time)"),
    LessonRun("sdpa_efficient", "04_c_sdpa_attention.py", ("--backend", "efficient"), "P3.9 P3.10 P3.12 P3.15"),
    LessonRun("sdpa_flash", "04_c_sdpa_attention.py", ("--backend", "flash"), "P3.10-P3.12 P3.15"),
    LessonRun("sdpa_cudnn", "04_c_sdpa_attention.py", ("--backend", "cudnn"), "P3.10 P3.12-P3.15"),
    LessonRun("attn_hub", "04_d_kernels_attention.py", (), "P3.16", needs="kernels", hub=FLASH_ATTN2),
)
BY_KEY = {run.key: run for run in RUNS}


# ----------------------------------------------------------------------------- the Hugging Face Hub

OFFLINE_WORDS = ("1", "on", "yes", "true")


def hub_cache_dirs() -> list[Path]:
    """Where ``kernels`` looks for a downloaded kernel: $KERNELS_CACHE, else huggingface_hub's cache
    ($HF_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub)."""
    env = os.environ
    if env.get("KERNELS_CACHE"):
        return [Path(env["KERNELS_CACHE"])]
    if env.get("HF_HUB_CACHE"):
        return [Path(env["HF_HUB_CACHE"])]
    home = Path(env["HF_HOME"]) if env.get("HF_HOME") else \
        Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    return [home / "hub"]


def hub_cached(kernel: HubKernel) -> Optional[Path]:
    """The cache folder holding ``kernel``'s version (its ``refs/v<N>``, as ``kernels`` reads it offline), or None."""
    for base in hub_cache_dirs():
        for kind in ("kernels", "models"):  # huggingface_hub's "kernel" repo type, and older caches' "model"
            folder = base / f"{kind}--{kernel.repo.replace('/', '--')}"
            if (folder / "refs" / f"v{kernel.version}").is_file():
                return folder
    return None


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in OFFLINE_WORDS


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether the Hub answers a TCP connection ($HF_ENDPOINT or huggingface.co, port 443); False when
    $HF_HUB_OFFLINE is set (no connection is tried then)."""
    if hub_offline():
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout_s):
            return True
    except OSError:
        return False


@dataclass(frozen=True)
class HubAccess:
    """How a run can load its Hub kernel here: ``skip`` says why it cannot ("" when it can); ``env`` is
    what its process needs (HF_HUB_OFFLINE=1 to read the cache without asking the Hub)."""

    skip: str = ""
    env: tuple = ()
    how: str = ""


def hub_access(kernel: HubKernel, reachable: Optional[bool] = None) -> HubAccess:
    """Decide how a run reaches ``kernel``: from the Hub, from the local cache offline, or not at all."""
    reachable = hub_reachable() if reachable is None else reachable
    if reachable:
        return HubAccess(how="from the Hugging Face Hub")
    cached = hub_cached(kernel)
    if cached is not None:
        return HubAccess(env=(("HF_HUB_OFFLINE", "1"),), how=f"from the local cache {cached}, offline")
    why = "HF_HUB_OFFLINE is set" if hub_offline() else "the Hugging Face Hub is unreachable from here"
    where = ", ".join(str(d) for d in hub_cache_dirs())
    return HubAccess(skip=f"{why} and {kernel.repo} (version {kernel.version}) is not in the local cache ({where}): "
                          "run it where the Hub is reachable, or fill the cache first")


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
