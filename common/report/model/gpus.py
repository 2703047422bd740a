"""Which GPU a trace ran on, from its ``deviceProperties``, and what that changes in the posts' claims.

The posts ran on an A100 (sm_80). On Hopper (sm_90) and newer, cuBLAS launches its GEMMs with
``cuLaunchKernelEx`` and may ask ``cudaOccupancyMaxActiveClusters``, or nothing the profiler records,
instead of ``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` before every GEMM. So the per-GEMM
occupancy query is expected only below sm_90. Plain Python (no numpy): the GPU claim checks under
``tests/gpu`` import it on machines without the report's dependencies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

_AMD_WORDS = ("AMD", "Radeon", "Instinct")  # AMD's computeMajor 9 is gfx9, not sm_90
HOPPER_MAJOR = 9


@dataclass(frozen=True)
class Gpu:
    name: Optional[str]
    vendor: str  # "nvidia" | "amd" | "unknown"
    major: Optional[int]  # compute capability (NVIDIA)
    minor: Optional[int]

    @property
    def sm(self) -> Optional[str]:
        """``sm_80``, ``sm_90``; None where the trace does not say (or the GPU is not NVIDIA's)."""
        if self.vendor != "nvidia" or self.major is None:
            return None
        return f"sm_{self.major}{self.minor or 0}"

    @property
    def expects_gemm_occupancy_query(self) -> Optional[bool]:
        """True below sm_90 (a query before every cuBLAS GEMM launch, as on the posts' A100), False on
        sm_90+ and AMD (optional), None when the trace does not say which GPU it ran on."""
        if self.vendor == "amd":
            return False
        if self.vendor != "nvidia" or self.major is None:
            return None
        return self.major < HOPPER_MAJOR

    def occupancy_case(self) -> str:
        """Which case of the occupancy claim this GPU is, in words."""
        expected = self.expects_gemm_occupancy_query
        if expected is None:
            return "compute capability unknown: checked as on the posts' A100 (a query before every GEMM)"
        if self.vendor == "amd":
            return "AMD GPU: the posts' CUDA occupancy query has no required counterpart"
        if expected:
            return f"{self.sm} (below sm_90): a query before every GEMM launch, as on the posts' A100"
        return (f"{self.sm} (sm_90 or newer): the query is optional; cuBLAS launches with cuLaunchKernelEx and may "
                "ask cudaOccupancyMaxActiveClusters or nothing the profiler records")

    def describe(self) -> str:
        extra = f" ({self.sm})" if self.sm else ""
        return f"{self.name or 'unnamed GPU'}{extra}"


def gpu_of(device_properties, device_id=None) -> Gpu:
    """The GPU of a trace's ``deviceProperties`` list (the entry with ``device_id``, else the first)."""
    props = [p for p in (device_properties or []) if isinstance(p, dict)] if isinstance(device_properties, list) else []
    chosen = next((p for p in props if p.get("id") == device_id), props[0] if props else {})
    name = chosen.get("name") if isinstance(chosen.get("name"), str) else None
    major, minor = _int(chosen.get("computeMajor")), _int(chosen.get("computeMinor"))
    if name and is_amd(name):
        vendor = "amd"
    elif major is not None:
        vendor = "nvidia"
    else:
        vendor = "unknown"
    return Gpu(name, vendor, major, minor)


def is_amd(name) -> bool:
    """An AMD GPU, by its name (its deviceProperties' computeMajor 9 is gfx9, not sm_90)."""
    return any(w in str(name) for w in _AMD_WORDS)


def describe_device(name, device_id, num_sms, compute_capability: Optional[str]) -> str:
    """The report's words for a GPU of deviceProperties: ``NVIDIA A100-SXM4-40GB (108 SMs, sm_80)``,
    an AMD GPU's compute units (``(104 CUs)``), or ``unnamed GPU 0``."""
    extra = (f" ({num_sms} CUs)" if is_amd(name) and num_sms else
             f" ({num_sms} SMs, sm_{compute_capability.replace('.', '')})" if num_sms and compute_capability else "")
    return f"{name or 'unnamed GPU ' + str(device_id)}{extra}"


def _int(value) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
