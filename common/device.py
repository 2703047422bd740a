"""Where a lesson runs and whether it can: the device, the dtype, the memory its tensors need, the
C++ compiler a compiled CPU run needs. Each check says what to do in one ``error:`` line
(:func:`common.errors.fail`), before anything is allocated or written.

torch is imported inside the functions (the flags are parsed before torch's seconds-long import).
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

from rich.console import Console

from common.errors import fail
from common.amounts import fmt_bytes_binary

if TYPE_CHECKING:
    import torch

TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}  # --dtype -> the torch dtype's name
MEMORY_HEADROOM = 0.8  # refuse a run whose tensors would take more than this share of free memory


def resolve_device(choice: str, console: Console) -> "torch.device":
    """--device auto|cuda|cpu as a torch.device; auto without CUDA says so and runs on the CPU."""
    import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    if choice == "cuda" and not torch.cuda.is_available():
        fail("--device cuda, but CUDA is not available on this machine (use --device cpu or auto)")
    if choice == "auto" and not torch.cuda.is_available():
        console.print("[yellow]CUDA is not available: running on the CPU[/] (no GPU lane in the trace; "
                      "see the README, 'Without a GPU')")
        return torch.device("cpu")
    return torch.device("cuda" if choice in ("auto", "cuda") else "cpu")


def gpu_dtype(device: "torch.device", console: Console) -> str:
    """The posts' bf16, or fp16 on a GPU without bf16 (said on the console)."""
    import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    if torch.cuda.is_bf16_supported():
        return "bf16"
    console.print(f"dtype   fp16: this GPU ({torch.cuda.get_device_name(device)}) has no bf16 (--dtype to choose)")
    return "fp16"


def check_dtype(name: str, device: "torch.device") -> None:
    import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    if device.type == "cuda" and name == "bf16" and not torch.cuda.is_bf16_supported():
        fail(f"this GPU ({torch.cuda.get_device_name(device)}) does not support bf16; use --dtype fp16 or fp32")


def free_bytes(device: "torch.device") -> int:
    """Memory the run may use now: free GPU memory, or the kernel's MemAvailable."""
    if device.type == "cuda":
        import torch  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def check_fits(elements: int, dtype: "torch.dtype", device: "torch.device") -> None:
    """Refuse shapes whose ``elements`` would take more than :data:`MEMORY_HEADROOM` of the free memory."""
    need = elements * dtype.itemsize
    have = free_bytes(device)
    if need > MEMORY_HEADROOM * have:
        fail(f"these shapes need about {fmt_bytes_binary(need)} on {device.type}, but only "
             f"{fmt_bytes_binary(have)} is free; use smaller sizes")


def check_compiler() -> None:
    """Inductor on the CPU builds C++: make sure a compiler is there before compiling."""
    from torch._inductor import cpp_builder  # lazy: torch, 3.7 s: a lesson answers --help and bad flags without it

    what = "--compile on the CPU needs a C++ compiler"
    todo = "Install g++ (e.g. apt-get install g++) or set CXX, or run without --compile"
    try:
        compiler = cpp_builder.get_cpp_compiler()
    except Exception as exc:  # Inductor raises its own error types here
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        fail(f"{what}, and none was found ({reason}). {todo}")
    if not shutil.which(compiler):
        fail(f"{what}, and {compiler!r} was not found. {todo}")
