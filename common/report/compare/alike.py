"""Whether two runs can be compared step for step, and what makes them unlike, said before any verdict.

A step is the same work in two runs only when the lessons' knobs give the same workload: shape, dtype and
device (an LLM run of 1x128x32 against one of 1x64x8 ran other steps: "0.32x" of theirs is no result).
Other differences do not stop a comparison but change what it measures, so the comparison says them
first: another GPU (an H100 run against an H200 run measures the card as much as the code), other CUDA
or torch versions. The knobs and lessons a comparison is made for (eager or compiled, a backend, naive
against in-place) are its subject, not a difference to warn of.
"""

from __future__ import annotations

from common.report.facts.steps import RunSteps

VERSIONS = ("torch_version", "pytorch_version", "cuda_runtime_version", "cuda_driver_version", "cudnn_version")


def _gpu(t: RunSteps) -> str | None:
    used = t.header.used_gpus
    return str(used[0].name) if used and used[0].name is not None else None


def workload_differences(a: RunSteps, b: RunSteps) -> list[str]:
    """``shape 1x128x32 vs 1x64x8``, ``dtype bf16 vs fp32``, ``device cuda vs cpu``: the knobs that make a step
    other work (nothing where either trace has no knobs: its names are all it says)."""
    ka, kb = a.knobs, b.knobs
    if ka is None or kb is None:
        return []
    pairs = (("shape", "x".join(map(str, ka.shape)), "x".join(map(str, kb.shape))), ("dtype", ka.dtype, kb.dtype),
             ("device", ka.device, kb.device))
    return [f"{what} {x} vs {y}" for what, x, y in pairs if x != y]


def other_differences(a: RunSteps, b: RunSteps) -> list[str]:
    """The GPU and the software versions, where they differ (another lesson on the same workload is what Part 3
    compares: naive against in-place, a backend against another)."""
    out = []
    ga, gb = _gpu(a), _gpu(b)
    if ga and gb and ga != gb:
        out.append(f"GPU {ga} vs {gb}")
    va, vb = a.header.versions, b.header.versions
    out += [f"{key.replace('_version', '').replace('_', ' ')} {va[key]} vs {vb[key]}" for key in VERSIONS
            if key in va and key in vb and va[key] != vb[key]]
    return out


def unlike_text(workload: list[str], other: list[str]) -> str:
    """The line said before the verdicts, empty when the runs are alike."""
    parts = []
    if workload:
        parts.append(f"the runs ran other work ({', '.join(workload)}): a step of one is not a step of the other, "
                     "so no verdict per step")
    if other:
        parts.append(f"they differ in {', '.join(other)}: a difference is theirs as much as the code's")
    return "; ".join(parts)
