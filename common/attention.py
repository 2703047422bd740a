"""What Part 3's attention lessons share besides their workload: the shape flags, the sizes the
run will hold, the arithmetic it does, and which SDPA backends can run where.

The shape is the post's: q, k and v are ``[batch, heads, seq, head_dim]`` = ``[8, 16, 1024, 64]``,
causal, bf16 (fp32 on a CPU without bf16 matmul instructions: see :mod:`common.cpu`). The file
name's size part is ``<batch>x<heads>x<seq>x<head_dim>``. No torch at import time.
"""

from __future__ import annotations

import argparse

from common.errors import fail
from common.checks import positive_int

ANNOTATION_NAIVE = "attn_fwd"  # the post's name for the hand-written forward (04_a, 04_b)
# SDPA's backends as torch.nn.attention.SDPBackend names them; "auto" lets SDPA choose
BACKENDS = {"auto": None, "math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
            "cudnn": "CUDNN_ATTENTION"}
CPU_BACKENDS = ("auto", "math", "flash")  # what exists on the CPU: efficient and cuDNN are CUDA kernels


def add_shape_flags(cli: argparse.ArgumentParser) -> None:
    """--batch --heads --seq --head_dim (each also hyphenated), the post's defaults."""
    cli.add_argument("--batch", type=positive_int, default=8, help="sequences per batch (default: 8)")
    cli.add_argument("--heads", type=positive_int, default=16, help="attention heads (default: 16)")
    cli.add_argument("--seq", type=positive_int, default=1024, help="tokens per sequence (default: 1024)")
    cli.add_argument("--head_dim", type=positive_int, default=64, help="width of one head (default: 64)")


def shape(a) -> tuple[int, int, int, int]:
    return (a.batch, a.heads, a.seq, a.head_dim)


def elements(a, scores: float) -> int:
    """q, k, v and the output, plus ``scores`` live ``[batch, heads, seq, seq]`` matrices at once
    (naive attention keeps about 3: the scores, their scaled or masked copy, the softmax)."""
    qkv_out = 4 * a.batch * a.heads * a.seq * a.head_dim
    return int(qkv_out + scores * a.batch * a.heads * a.seq * a.seq)


def flops(a, causal_skips: bool) -> int:
    """The two GEMMs of attention, q·kᵀ and attn·v: 2·seq·seq·head_dim each per head; with
    ``causal_skips``, the unmasked half of the causal square. The lessons count the operation, not the
    implementation: every variant of Part 3's causal attention (naive, in-place, SDPA's math, efficient,
    flash, cuDNN, the Hub's) gets the causal half, so their rates rank as their times do (the naive and
    math GEMMs compute the masked half too; the report's roofline counts that as their GEMMs' own work)."""
    full = 2 * 2 * a.batch * a.heads * a.seq * a.seq * a.head_dim
    return full // 2 if causal_skips else full


def check_device(backend: str, device) -> None:
    """A backend that does not exist on this device: one line, before anything is printed or allocated."""
    if device.type == "cpu" and backend not in CPU_BACKENDS:
        fail(f"--backend {backend} does not exist on the CPU (its kernels are CUDA's); on the CPU, SDPA "
             f"has {', '.join(b for b in CPU_BACKENDS if b != 'auto')} (or auto): "
             f"e.g. --backend flash, PyTorch's fused CPU attention")


def check_backend(backend: str, device, q, k, v) -> None:
    """On a GPU, refuse in one line (before anything is profiled or written) a backend that cannot run
    these inputs (dtype, head size, compute capability)."""
    if backend == "auto" or device.type == "cpu":
        return
    import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    can_use = {"flash": "can_use_flash_attention", "efficient": "can_use_efficient_attention",
               "cudnn": "can_use_cudnn_attention"}.get(backend)
    if can_use is None:  # math runs anything
        return
    try:
        params = torch.backends.cuda.SDPAParams(q, k, v, None, 0.0, True, False)
        ok = getattr(torch.backends.cuda, can_use)(params, False)
    except (AttributeError, TypeError, RuntimeError):
        return  # this torch cannot be asked beforehand: the first call will say
    if not ok:
        fail(f"--backend {backend} cannot run these inputs on {torch.cuda.get_device_name(device)} "
             f"({q.dtype}, head_dim {q.shape[-1]}, causal); try --backend auto, which picks one that can")
