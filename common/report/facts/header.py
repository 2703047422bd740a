"""The header of a report: which GPUs the trace ran on, the software versions, the job it was part of.

Read once from the trace's metadata (``deviceProperties``, the version keys, ``distributedInfo``)
when the tables are built; the renderers print it as it is. The device's wording (SMs and compute
capability, or an AMD GPU's compute units) is :func:`common.report.model.gpus.describe_device`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from common.report.model.gpus import Gpu, describe_device, gpu_of
from common.report.model.build import Model

VERSION_KEYS = ("torch_version", "pytorch_version", "cuda_runtime_version", "cuda_driver_version", "cupti_version",
                "cuda_version", "cudnn_version", "nccl_version", "hip_runtime_version", "rocm_version",
                "roctracer_version", "python_version", "schemaVersion")


@dataclass(frozen=True)
class GpuInfo:
    """One deviceProperties entry, as the JSON's ``meta.gpus`` lists it."""

    id: object
    name: object
    num_sms: object
    compute_capability: Optional[str]  # "8.0"


@dataclass(frozen=True)
class Header:
    gpus: tuple  # GpuInfo: every GPU of the machine (deviceProperties)
    used_gpus: tuple  # GpuInfo: those the trace ran kernels on (the first listed when none matches)
    device: Optional[str]  # the device line: "NVIDIA A100 (108 SMs, sm_80)", "none (...)"; None: a GPU trace that names none
    versions: dict  # the trace-level version keys present
    distributed: Optional[dict]  # distributedInfo


def header_of(m: Model) -> Header:
    gpus = []
    for d, p in m.devices.items():
        cc = None
        if p.get("computeMajor") is not None:
            cc = f"{p.get('computeMajor')}.{p.get('computeMinor', 0)}"
        gpus.append(GpuInfo(id=d, name=p.get("name"), num_sms=p.get("numSms"), compute_capability=cc))
    used = []
    if m.has_gpu:
        ids = set(m.dev.device.tolist())
        used = [g for g in gpus if g.id in ids] or gpus[:1]
    if used:
        g = used[0]
        device = describe_device(g.name, g.id, g.num_sms, g.compute_capability) + (
            f" and {len(used) - 1} more" if len(used) > 1 else "")
    else:
        device = None if m.has_gpu else "none (no device lane: CPU-only trace)"
    dist = m.meta.get("distributedInfo")
    return Header(gpus=tuple(gpus), used_gpus=tuple(used), device=device,
                  versions={k: m.meta[k] for k in VERSION_KEYS if k in m.meta},
                  distributed=dist if isinstance(dist, dict) else None)


def gpu_of_trace(m: Model) -> Gpu:
    """The GPU the trace's kernels ran on (its deviceProperties entry; the first when none ran)."""
    first = int(m.dev.device[0]) if m.dev.n else None
    return gpu_of(list(m.devices.values()), first)
