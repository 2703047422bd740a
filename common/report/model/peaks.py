"""Datasheet peaks of NVIDIA GPUs, by the name a trace's ``deviceProperties`` gives the device.

Every figure is NVIDIA's own, **dense** (without the 2:4 structured sparsity that the datasheets
mark with an asterisk and that doubles the tensor-core figures): the datasheet's sparse figure
halved where only that one is printed. Compute peaks are TFLOP/s at boost clock; memory is the
device memory's (HBM or GDDR) bandwidth in GB/s (10^9 bytes/s). ``None`` where the device has no
such unit (a V100 or T4 has no bf16 tensor cores, no TF32).

Which peak an op is held to (:func:`compute_peak`): bf16 and fp16 the tensor cores' (fp32
accumulate: the GeForce cards' figure for it is half their fp16-accumulate one), fp32 the CUDA
cores' plain fp32 (PyTorch's default for matmuls, ``allow_tf32=False``), unless the op's kernels
say they ran TF32 (``tf32`` in a kernel's name), then the TF32 tensor-core peak.

Matching (:func:`peak_of`) is by words of the name, most specific first; a device whose name
matches no row, or matches a family whose variants differ in memory (an ``A100-PG509-200``), gets
no peak it cannot stand behind: the report then gives achieved rates only. Plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

DTYPES = ("bf16", "fp16", "tf32", "fp32")


@dataclass(frozen=True)
class Peak:
    """One device's datasheet figures (dense TFLOP/s, GB/s) and where they come from."""

    device: str  # the row's name
    bf16: Optional[float]  # tensor-core TFLOP/s, dense, fp32 accumulate
    fp16: Optional[float]
    tf32: Optional[float]
    fp32: Optional[float]  # CUDA-core fp32 TFLOP/s (no tensor cores)
    memory_gbs: Optional[float]  # device memory bandwidth, GB/s
    source: str  # the NVIDIA document the figures come from

    def tflops(self, dtype: str) -> Optional[float]:
        return getattr(self, dtype) if dtype in DTYPES else None


# (words that must all be in the name, words that must not be, the peak). The first match wins.
_TABLE: tuple = (
    # NVIDIA H200 Tensor Core GPU datasheet (H200 SXM / H200 NVL): BF16/FP16 1,979* / 1,671*, TF32 989* / 835*,
    # FP32 67 / 60 TFLOPS, 4.8 TB/s (* with sparsity)
    (("H200", "NVL"), (), Peak("H200 NVL", 835.5, 835.5, 417.5, 60.0, 4800.0, "NVIDIA H200 Tensor Core GPU datasheet")),
    (("H200",), (), Peak("H200 SXM", 989.5, 989.5, 494.5, 67.0, 4800.0, "NVIDIA H200 Tensor Core GPU datasheet")),
    # NVIDIA H100 Tensor Core GPU datasheet: SXM BF16 1,979*, TF32 989*, FP32 67, 3.35 TB/s; PCIe 1,513*, 756*, 51,
    # 2 TB/s; NVL 1,671*, 835*, 60, 3.9 TB/s
    (("H100", "NVL"), (), Peak("H100 NVL", 835.5, 835.5, 417.5, 60.0, 3900.0, "NVIDIA H100 Tensor Core GPU datasheet")),
    (("H100", "PCIe"), (), Peak("H100 PCIe", 756.5, 756.5, 378.0, 51.0, 2000.0, "NVIDIA H100 Tensor Core GPU datasheet")),
    (("H100", "HBM3"), (), Peak("H100 SXM", 989.5, 989.5, 494.5, 67.0, 3350.0, "NVIDIA H100 Tensor Core GPU datasheet")),
    (("H100", "SXM5"), (), Peak("H100 SXM", 989.5, 989.5, 494.5, 67.0, 3350.0, "NVIDIA H100 Tensor Core GPU datasheet")),
    # NVIDIA A100 Tensor Core GPU datasheet: BF16/FP16 312, TF32 156, FP32 19.5 (all variants); memory 1,555 GB/s
    # (40GB PCIe and SXM), 1,935 GB/s (80GB PCIe), 2,039 GB/s (80GB SXM)
    (("A100", "SXM4", "80GB"), (), Peak("A100 SXM 80GB", 312.0, 312.0, 156.0, 19.5, 2039.0,
                                       "NVIDIA A100 Tensor Core GPU datasheet")),
    (("A100", "SXM4", "40GB"), (), Peak("A100 SXM 40GB", 312.0, 312.0, 156.0, 19.5, 1555.0,
                                       "NVIDIA A100 Tensor Core GPU datasheet")),
    (("A100", "80GB", "PCIe"), (), Peak("A100 PCIe 80GB", 312.0, 312.0, 156.0, 19.5, 1935.0,
                                        "NVIDIA A100 Tensor Core GPU datasheet")),
    (("A100", "PCIE", "40GB"), (), Peak("A100 PCIe 40GB", 312.0, 312.0, 156.0, 19.5, 1555.0,
                                        "NVIDIA A100 Tensor Core GPU datasheet")),
    # any other A100 (e.g. A100-PG509-200): the compute is every A100's, the memory differs between variants
    (("A100",), (), Peak("A100 (variant: memory bandwidth unknown)", 312.0, 312.0, 156.0, 19.5, None,
                         "NVIDIA A100 Tensor Core GPU datasheet")),
    # NVIDIA A10 Tensor Core GPU datasheet: BF16/FP16 250*, TF32 125*, FP32 31.2, 600 GB/s
    (("A10",), ("A100", "A10G"), Peak("A10", 125.0, 125.0, 62.5, 31.2, 600.0, "NVIDIA A10 Tensor Core GPU datasheet")),
    # NVIDIA A40 datasheet: BF16/FP16 299.4*, TF32 149.6*, FP32 37.4, 696 GB/s
    (("A40",), (), Peak("A40", 149.7, 149.7, 74.8, 37.4, 696.0, "NVIDIA A40 datasheet")),
    # NVIDIA L40S datasheet: BF16/FP16 362.05 | 733*, TF32 183 | 366*, FP32 91.6, 864 GB/s
    (("L40S",), (), Peak("L40S", 362.05, 362.05, 183.0, 91.6, 864.0, "NVIDIA L40S datasheet")),
    # NVIDIA L40 datasheet: BF16/FP16 181.05 | 362.1*, TF32 90.5 | 181*, FP32 90.5, 864 GB/s
    (("L40",), ("L40S",), Peak("L40", 181.05, 181.05, 90.5, 90.5, 864.0, "NVIDIA L40 datasheet")),
    # NVIDIA L4 Tensor Core GPU datasheet: BF16/FP16 242*, TF32 120*, FP32 30.3, 300 GB/s
    (("L4",), ("L40",), Peak("L4", 121.0, 121.0, 60.0, 30.3, 300.0, "NVIDIA L4 Tensor Core GPU datasheet")),
    # NVIDIA Ada GPU Architecture whitepaper, appendix (GeForce RTX 4090): FP16/BF16 tensor with FP32 accumulate
    # 165.2 (330.4*), TF32 82.6 (165.2*), FP32 82.6, 1,008 GB/s
    (("RTX 4090",), (), Peak("GeForce RTX 4090", 165.2, 165.2, 82.6, 82.6, 1008.0,
                             "NVIDIA Ada GPU Architecture whitepaper")),
    # NVIDIA Ampere GA102 GPU Architecture whitepaper (GeForce RTX 3090): FP16/BF16 tensor with FP32 accumulate 71
    # (142*), TF32 35.6 (71*), FP32 35.6, 936 GB/s
    (("RTX 3090",), ("Ti",), Peak("GeForce RTX 3090", 71.0, 71.0, 35.6, 35.6, 936.0,
                                  "NVIDIA Ampere GA102 GPU Architecture whitepaper")),
    # NVIDIA Tesla V100 datasheet: SXM2 tensor 125, FP32 15.7; PCIe 112, 14; 900 GB/s. No bf16, no TF32.
    # (The DGX Station's V100-DGXS is left out: its clocks are not on the datasheet.)
    (("V100", "SXM2"), (), Peak("V100 SXM2", None, 125.0, None, 15.7, 900.0, "NVIDIA Tesla V100 GPU datasheet")),
    (("V100", "PCIE"), ("V100S",), Peak("V100 PCIe", None, 112.0, None, 14.0, 900.0,
                                        "NVIDIA Tesla V100 GPU datasheet")),
    # NVIDIA Tesla T4 datasheet: mixed-precision (FP16/FP32) 65, FP32 8.1, 320 GB/s. No bf16, no TF32.
    (("T4",), (), Peak("T4", None, 65.0, None, 8.1, 320.0, "NVIDIA T4 Tensor Core GPU datasheet")),
)


def _words(name: str) -> str:
    return f" {name.upper().replace('-', ' ').replace('_', ' ')} "


def peak_of(device_name: Optional[str]) -> Optional[Peak]:
    """The datasheet row of a ``deviceProperties`` name (``NVIDIA H100 80GB HBM3``), None when unknown.
    Each word of a row must appear in the name as a word (``L4`` is not ``L40``)."""
    if not device_name:
        return None
    words = _words(device_name)
    for must, must_not, peak in _TABLE:
        if all(_has(words, w) for w in must) and not any(_has(words, w) for w in must_not):
            return peak
    return None


def _has(words: str, word: str) -> bool:
    return _words(word) in words


def compute_peak(peak: Peak, dtype: Optional[str], tf32: bool = False) -> tuple[Optional[float], str]:
    """(the TFLOP/s an op of ``dtype`` is held to, which unit that is); (None, why) where none applies."""
    if dtype == "fp32":
        unit = "tf32" if tf32 else "fp32"
    elif dtype in ("bf16", "fp16"):
        unit = dtype
    else:
        return None, f"dtype {dtype or 'unknown'}: no datasheet peak to compare with"
    value = peak.tflops(unit)
    if value is None:
        return None, f"the {peak.device} has no {unit} {'tensor cores' if unit != 'fp32' else 'peak'} on its datasheet"
    return value, unit
