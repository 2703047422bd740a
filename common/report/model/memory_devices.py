"""The devices of the ``[memory]`` events: each event's device name, and how many bytes that device can hold.

Names follow the TensorBoard plugin: Device Type 0 is ``CPU``, 1 is ``GPU<Device Id>``; other device types
(and a GPU whose id is not a whole number from 0 to :data:`MAX_GPU_INDEX`) have no name and are left out of
every memory figure. A GPU holds what its
``deviceProperties`` entry says (``totalGlobalMem``), but no more than its name says where the name gives a
size (``NVIDIA H100 80GB HBM3``: 80 GB and a tenth), nor than the largest GPU made holds
(:data:`LARGEST_GPU_BYTES`); a GPU the trace does not describe, at most that too; a CPU at most
:data:`MAX_ADDRESSABLE_BYTES`.
"""

from __future__ import annotations

import re

import numpy as np

from common.amounts import fmt_bytes_binary

CPU, GPU = 0, 1  # the profiler's DeviceType
MAX_GPU_INDEX = (1 << 16) - 1
MAX_ADDRESSABLE_BYTES = 1 << 48  # 256 TiB: all a 48-bit virtual address space (today's CPUs and GPUs) can map
LARGEST_GPU_BYTES = 288 * 10**9  # the most memory one GPU holds today (AMD MI355X, NVIDIA B300: 288 GB of HBM3E)
NAMED_SIZE = re.compile(r"(?<![\d.])(\d{1,4})\s?GB\b", re.IGNORECASE)  # "80GB" in "NVIDIA H100 80GB HBM3"


def device_codes(device_type: np.ndarray, device_id: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per event, the index of its device's name in the names returned (-1: no name), one pass in numpy.
    The names are those of the devices present (``CPU``, ``GPU0``...), in no particular order."""
    codes = np.full(device_type.size, -1, dtype=np.int64)
    gpu = (device_type == GPU) & gpu_index(device_id)
    ids, inverse = np.unique(np.trunc(device_id[gpu]), return_inverse=True)
    names = [f"GPU{int(i)}" for i in ids.tolist()]
    codes[gpu] = inverse.reshape(-1)
    cpu = device_type == CPU
    if cpu.any():
        codes[cpu] = len(names)
        names.append("CPU")
    return codes, tuple(names)


def gpu_index(device_id: np.ndarray) -> np.ndarray:
    """Per Device Id, whether it can be a GPU's index."""
    return (device_id >= 0) & (device_id <= MAX_GPU_INDEX) & (device_id == np.trunc(device_id))


def device_capacity(name: str, devices: dict) -> tuple[int, str]:
    """(bytes, where that figure comes from) of the device called ``name``, ``devices`` the model's
    deviceProperties by id."""
    if not name.startswith("GPU"):
        return MAX_ADDRESSABLE_BYTES, "the 256 TiB a 48-bit address space can hold"
    props = next((p for d, p in devices.items() if str(d) == name[3:]), None) or {}
    total = props.get("totalGlobalMem")
    total = total if isinstance(total, int) and not isinstance(total, bool) and total > 0 else None
    named = NAMED_SIZE.search(str(props.get("name") or ""))
    said = int(named[1]) * 10**9 if named else None
    if said is not None and (total is None or total > said * 1.1):  # the name's size, with room for GB vs GiB
        return int(said * 1.1), f"the {named[1]} GB its name says ({props['name']})"
    if total is not None and total <= LARGEST_GPU_BYTES:
        return total, f"the {fmt_bytes_binary(total)} its deviceProperties give {name} (totalGlobalMem)"
    return LARGEST_GPU_BYTES, "the 288 GB the largest GPU made holds (no deviceProperties of it say a size that can be)"
