"""The posts' GPU claims (CLAIMS.md) as checks over parsed traces, so that they run without a GPU.

Each check takes what lesson runs wrote (a trace parsed by :class:`GpuTrace`, for some the profiler
table) and returns a :class:`Verdict`: whether the claim holds, which variant of it the run shows
(an A100 and a Hopper GPU, or two torch versions, show the same claim in different forms), and the
evidence. ``tests/gpu/test_gpu_claims.py`` runs the checks on real CUDA runs;
``tests/test_gpu_checks.py`` runs them on synthetic A100-style and Hopper-style traces on the CPU.

A kernel belongs to the op whose runtime call launched it (by correlation id), never to a name
pattern: a GEMM is what ``aten::mm``/``aten::addmm`` launched, so a split-K reduction kernel is
counted as part of its GEMM op, not as another GEMM. Plain Python: no numpy, no msgspec.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from common.report.model import names as trace_names
from common.report.model.gpus import gpu_of
from common.report.facts.occupancy import Footprint
from common.report.facts.occupancy import footprint as occupancy_footprint

RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver", "hip_runtime"})
KERNEL_CATS = frozenset({"kernel", "Kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "Memcpy"})
COMPILE_FRAMES = ("Torch-Compiled Region", "TorchDynamo")
UNIT_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


# ----------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Verdict:
    claim: str  # the id in CLAIMS.md, e.g. "P1.17"
    holds: bool
    variant: str  # which form of the claim the run shows ("" when it does not hold)
    evidence: str  # the names and numbers behind the verdict, or why the claim does not hold

    def __str__(self) -> str:
        if self.holds:
            return f"{self.claim} holds: {self.variant}" + (f" ({self.evidence})" if self.evidence else "")
        return f"{self.claim} does not hold: {self.evidence}"


class Broken(Exception):
    """Raised inside a check: the claim does not hold, and the message says why."""


def need(condition, why: str) -> None:
    if not condition:
        raise Broken(why)


CHECKS: dict[str, Callable[..., Verdict]] = {}


def check(claim: str):
    """Register a check for ``claim``: the function returns (variant, evidence) or raises :class:`Broken`."""

    def wrap(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs) -> Verdict:
            try:
                variant, evidence = fn(*args, **kwargs)
            except Broken as exc:
                return Verdict(claim, False, "", str(exc))
            return Verdict(claim, True, variant, evidence)

        CHECKS[claim] = run
        return run

    return wrap


def record(verdict: Verdict, log: str | None = None) -> None:
    """Append the verdict as one JSON line to ``log`` (default: $GPU_CLAIMS_LOG; nothing when unset)."""
    log = log or os.environ.get("GPU_CLAIMS_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps(asdict(verdict)) + "\n")


# ----------------------------------------------------------------------------- the parsed trace


class GpuTrace:
    """A trace's complete events: the CPU call tree by nesting, kernels and copies by correlation."""

    def __init__(self, doc: dict, source: str = "trace"):
        events = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X" and "dur" in e]
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        self.source = source
        self.events = events
        self.kernels = [e for e in events if e.get("cat") in KERNEL_CATS]
        self.memcpys = [e for e in events if e.get("cat") in MEMCPY_CATS]
        self.by_corr: dict = {}
        for e in self.kernels + self.memcpys:
            self.by_corr.setdefault(_corr(e), []).append(e)
        self.runtime_by_corr = {_corr(e): e for e in events if e.get("cat") in RUNTIME_CATS and _corr(e) is not None}
        device = self.kernels[0].get("args", {}).get("device") if self.kernels else None
        self.gpu = gpu_of(doc.get("deviceProperties"), device)
        props = doc.get("deviceProperties")
        self.device_props = [d for d in props if isinstance(d, dict)] if isinstance(props, list) else []

    @classmethod
    def read(cls, path) -> "GpuTrace":
        raw = Path(path).read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return cls(json.loads(raw), str(path))

    @property
    def steps(self) -> list[dict]:
        return [e for e in self.events if e["name"].startswith("ProfilerStep#") and e.get("cat") != "gpu_user_annotation"]

    def inside(self, outer: dict, name: str | None = None) -> list[dict]:
        """CPU events nested in ``outer`` (same thread, within its span), optionally by name."""
        end = outer["ts"] + outer["dur"]
        return [e for e in self.events
                if e is not outer and e.get("tid") == outer.get("tid") and e.get("pid") == outer.get("pid")
                and e["ts"] >= outer["ts"] and e["ts"] + e["dur"] <= end + 1e-3
                and (name is None or e["name"] == name)]

    def one(self, outer: dict, name: str) -> dict:
        found = self.inside(outer, name)
        need(len(found) == 1, f"{len(found)} {name} in {outer['name']}, expected one")
        return found[0]

    def runtime_in(self, outer: dict) -> list[dict]:
        return [e for e in self.inside(outer) if e.get("cat") in RUNTIME_CATS]

    def device_work_of(self, outer: dict) -> list[dict]:
        """Kernels and copies launched from inside ``outer`` (by correlation id), in time order."""
        work = []
        for r in self.runtime_in(outer):
            work += self.by_corr.get(_corr(r), [])
        return sorted(work, key=lambda e: e["ts"])

    def kernels_of(self, outer: dict) -> list[dict]:
        return [e for e in self.device_work_of(outer) if e.get("cat") in KERNEL_CATS]

    def launch_of(self, work: dict) -> dict:
        """The runtime/driver call that launched a kernel or copy (by correlation id)."""
        call = self.runtime_by_corr.get(_corr(work))
        need(call is not None, f"no runtime call launched {work['name'][:60]}")
        return call

    def ancestors(self, event: dict) -> list[dict]:
        """The CPU events enclosing ``event`` on its thread, outermost first (its call chain)."""
        end = event["ts"] + event["dur"]
        return [e for e in self.events
                if e is not event and e.get("tid") == event.get("tid") and e.get("pid") == event.get("pid")
                and e.get("cat") not in RUNTIME_CATS and e["ts"] <= event["ts"] and e["ts"] + e["dur"] >= end - 1e-3]

    def children(self, outer: dict) -> list[dict]:
        """The events directly under ``outer`` (not nested in another of its events), in time order."""
        out, end = [], float("-inf")
        for e in self.inside(outer):
            if e["ts"] >= end - 1e-3:
                out.append(e)
                end = e["ts"] + e["dur"]
        return out

    def self_us(self, op: dict) -> float:
        """An op's own CPU time: its duration less that of the events directly under it."""
        return op["dur"] - sum(c["dur"] for c in self.children(op))

    def props_of(self, kernel: dict) -> dict:
        """The deviceProperties entry of the device a kernel ran on (else the first)."""
        device = kernel.get("args", {}).get("device")
        chosen = [d for d in self.device_props if d.get("id") == device] or self.device_props[:1]
        need(chosen, f"{self.source}: the trace carries no deviceProperties")
        return chosen[0]


def _corr(e: dict):
    return e.get("args", {}).get("correlation")


def table_totals(table: str) -> dict[str, float]:
    """'Self CPU time total: 2.314ms' -> {'CPU': 2.314}, in ms."""
    return {kind: float(value) * UNIT_MS[unit]
            for kind, value, unit in re.findall(r"Self (CPU|CUDA) time total: ([\d.]+)(us|ms|s)\b", table)}


def _steps(trace: GpuTrace) -> list[dict]:
    steps = trace.steps
    need(steps, f"{trace.source}: no ProfilerStep in the trace")
    return steps


def gemm_of(trace: GpuTrace, op: dict) -> dict:
    """The GEMM kernel an op launched: its longest kernel (a split-K reduction is shorter)."""
    kernels = trace.kernels_of(op)
    need(kernels, f"{op['name']} launched no kernel")
    return max(kernels, key=lambda k: k["dur"])


def queries_before_launch(trace: GpuTrace, op: dict) -> list[str]:
    """The occupancy queries an op made before its first kernel launch."""
    names = [e["name"] for e in trace.runtime_in(op)]
    launches = [i for i, n in enumerate(names) if trace_names.is_launch(n)]
    need(launches, f"{op['name']} made no kernel launch (runtime calls: {names})")
    return [n for n in names[:launches[0]] if trace_names.is_occupancy_query(n)]


def launch_calls(trace: GpuTrace, op: dict) -> list[str]:
    return sorted({e["name"] for e in trace.runtime_in(op) if trace_names.is_launch(e["name"])})


def same_gemm(name: str, eager: set[str]) -> str:
    """How a compiled run's GEMM kernel matches the eager ones: the same name, or (Hopper names carry
    epilogue flags) the same library, arch and tile. Raises Broken otherwise (e.g. a Triton GEMM)."""
    if name in eager:
        return f"the eager GEMM kernel {name}"
    mine = trace_names.decode_gemm(name)
    need(mine and mine.get("tile"), f"{name} is not a library GEMM kernel (eager: {', '.join(sorted(eager))})")
    for other in sorted(eager):
        theirs = trace_names.decode_gemm(other)
        if theirs and all(mine.get(k) == theirs.get(k) for k in ("library", "arch", "tile")):
            return f"the eager GEMM's library, arch and tile {mine['tile']} ({other} -> {name})"
    raise Broken(f"{name} is not the eager GEMM ({', '.join(sorted(eager))})")


def eager_gemms(trace: GpuTrace, op_name: str = "aten::mm") -> set[str]:
    return {gemm_of(trace, op)["name"] for step in _steps(trace) for op in trace.inside(step, op_name)}


# ----------------------------------------------------------------------------- Part 1


@check("P1.3")
def overhead_bound(table: str):
    """Size 64: Self CUDA total under 5% of Self CPU total (the posts: CPU in ms, CUDA in µs)."""
    t = table_totals(table)
    need("CPU" in t and "CUDA" in t, f"the table has no Self CPU/CUDA totals ({sorted(t)})")
    share = t["CUDA"] / t["CPU"] if t["CPU"] > 0 else float("inf")
    evidence = f"Self CPU {t['CPU']:.3f} ms, Self CUDA {t['CUDA']:.3f} ms ({share:.1%} of CPU)"
    need(share < 0.05, f"not overhead-bound: {evidence}")
    return "device time a sliver of CPU time, as in the posts", evidence


@check("P1.4")
def compute_bound(table: str, trace: GpuTrace):
    """Size 4096: Self CUDA total at least a quarter of Self CPU total (the CPU waits for the GPU), and
    the kernels aten::mm launched own most of the device time. No A100 figure (an H200 is ~5x faster)."""
    t = table_totals(table)
    need("CPU" in t and "CUDA" in t, f"the table has no Self CPU/CUDA totals ({sorted(t)})")
    ratio = t["CUDA"] / t["CPU"] if t["CPU"] > 0 else 0.0
    mm_time = sum(k["dur"] for step in _steps(trace) for mm in trace.inside(step, "aten::mm")
                  for k in trace.kernels_of(mm))
    all_time = sum(k["dur"] for k in trace.kernels)
    share = mm_time / all_time if all_time else 0.0
    evidence = (f"Self CUDA {t['CUDA']:.3f} ms vs Self CPU {t['CPU']:.3f} ms (ratio {ratio:.2f}); aten::mm's "
                f"kernels {share:.0%} of kernel time")
    need(ratio >= 0.25, f"device time is small next to CPU time: {evidence}")
    need(share > 0.5, f"the GEMM does not own most of the device time: {evidence}")
    return f"device/CPU {ratio:.2f}, GEMM {share:.0%} of kernel time", evidence


@check("P1.11")
def occupancy_queries(trace: GpuTrace):
    """aten::mm's launch follows an occupancy query (required below sm_90, optional on sm_90+);
    aten::add launches with no query."""
    gpu = trace.gpu
    steps = _steps(trace)
    queried, queries, launches = 0, set(), set()
    for step in steps:
        mm = trace.one(step, "aten::mm")
        before = queries_before_launch(trace, mm)
        queried += bool(before)
        queries.update(before)
        launches.update(launch_calls(trace, mm))
        add = trace.one(step, "aten::add")
        add_calls = [e["name"] for e in trace.runtime_in(add)]
        need(not any(trace_names.is_occupancy_query(n) for n in add_calls), f"aten::add made an occupancy query: {add_calls}")
        need(any(trace_names.is_launch(n) for n in add_calls), f"aten::add made no kernel launch: {add_calls}")
    if gpu.expects_gemm_occupancy_query is not False:
        need(queried == len(steps), f"{gpu.occupancy_case()}; but aten::mm launched without a query in "
             f"{len(steps) - queried} of {len(steps)} steps")
    how = (f"{', '.join(sorted(queries))} before every aten::mm launch" if queried == len(steps) else
           f"no occupancy query before aten::mm's launch in {len(steps) - queried} of {len(steps)} steps")
    return (f"{gpu.describe()}: {how} ({', '.join(sorted(launches))}); aten::add launches with no query",
            gpu.occupancy_case())


@check("P1.12")
def kernel_footprint(trace: GpuTrace):
    """The add kernel uses no shared memory, the GEMM kernel some (kernel event args). Register
    counts are the compiler's choice and not checked."""
    step = _steps(trace)[0]
    add_kernels = trace.kernels_of(trace.one(step, "aten::add"))
    need(len(add_kernels) == 1, f"aten::add launched {len(add_kernels)} kernels, expected one")
    add_args = add_kernels[0].get("args", {})
    gemm_args = gemm_of(trace, trace.one(step, "aten::mm")).get("args", {})
    need("shared memory" in add_args and "shared memory" in gemm_args, "the kernel events carry no 'shared memory'")
    need(add_args["shared memory"] == 0, f"the add kernel uses {add_args['shared memory']} B of shared memory")
    need(gemm_args["shared memory"] > 0, "the GEMM kernel uses no shared memory")
    return (f"add kernel 0 B shared memory ({add_args.get('registers per thread')} registers), GEMM "
            f"{gemm_args['shared memory']:,} B ({gemm_args.get('registers per thread')} registers)"), add_kernels[0]["name"]


@check("P1.16")
def compiled_addmm(eager: GpuTrace, compiled: GpuTrace):
    """--compile: one aten::addmm per step instead of aten::mm + aten::add, launching the eager
    GEMM kernel (same name, or on Hopper the same library, arch and tile)."""
    gemms = eager_gemms(eager)
    need(gemms, "the eager run has no aten::mm GEMM")
    hows = set()
    for step in _steps(compiled):
        addmm = compiled.one(step, "aten::addmm")
        need(not compiled.inside(step, "aten::mm") and not compiled.inside(step, "aten::add"),
             "the compiled step still runs aten::mm/aten::add")
        hows.add(same_gemm(gemm_of(compiled, addmm)["name"], gemms))
    return f"one aten::addmm per step; its GEMM is {'; '.join(sorted(hows))}", f"{len(_steps(compiled))} steps"


@check("P1.17")
def bias_seed_copy(compiled: GpuTrace):
    """--compile: per step either a Memcpy DtoD (the bias seed copy) right before the GEMM, as in the
    posts, or (recent torch) no copy at all; one launch per GEMM kernel and nothing else launched."""
    variants, sizes = set(), set()
    for step in _steps(compiled):
        addmm = compiled.one(step, "aten::addmm")
        work = compiled.device_work_of(addmm)
        copies = [w for w in work if w.get("cat") in MEMCPY_CATS]
        kernels = [w for w in work if w.get("cat") in KERNEL_CATS]
        calls = [e["name"] for e in compiled.runtime_in(step)]
        memcpy_calls = [n for n in calls if n.startswith(("cudaMemcpy", "cuMemcpy", "hipMemcpy"))]
        need(kernels, "aten::addmm launched no kernel")
        need(len(copies) <= 1 and len(memcpy_calls) == len(copies),
             f"{len(memcpy_calls)} memcpy calls and {len(copies)} copies in one step, expected none or one")
        need(sum(trace_names.is_launch(n) for n in calls) == len(kernels), f"launches besides aten::addmm's: {calls}")
        if copies:
            need("DtoD" in copies[0]["name"] or "Device -> Device" in copies[0]["name"],
                 f"the copy is {copies[0]['name']}, not device to device")
            need(copies[0]["ts"] <= kernels[0]["ts"], "the copy comes after the GEMM")
            sizes.add(copies[0].get("args", {}).get("bytes"))
        variants.add("copy" if copies else "no copy")
    need(len(variants) == 1, "some steps copy the bias and others do not")
    if variants == {"copy"}:
        size = ", ".join(f"{b / 1e6:.1f} MB" for b in sizes if b) or "size not recorded"
        return "a Memcpy DtoD seeds the output with the bias before the GEMM (as in the posts)", size
    return ("no bias copy: the GEMM reads the bias itself (recent torch; the posts' torch copied it first)",
            f"{len(_steps(compiled))} steps without a memcpy")


# ----------------------------------------------------------------------------- Part 2


@check("P2.1")
def linear_one_gemm(trace: GpuTrace):
    """nn.Linear(bias=True): aten::t launches nothing, aten::addmm one kernel, no aten::add: one GEMM
    per forward with the bias in its epilogue (on Hopper the name's 'bias' flag says so)."""
    names = set()
    for step in _steps(trace):
        need(trace.device_work_of(trace.one(step, "aten::t")) == [], "aten::t launched device work")
        linear = trace.one(step, "aten::linear")
        addmm = trace.one(linear, "aten::addmm")
        need(not trace.inside(step, "aten::add"), "an aten::add runs beside the linear")
        work = trace.device_work_of(linear)
        need(len(work) == 1 and work == trace.kernels_of(addmm),
             f"the linear launched {[w['name'] for w in work]}, expected aten::addmm's one GEMM kernel")
        names.add(work[0]["name"])
    flagged = sorted(n for n in names if trace_names.has_bias_epilogue(trace_names.decode_gemm(n) or {}))
    if flagged:
        return (f"one GEMM per forward; its name carries the bias epilogue flag ({flagged[0]})",
                "the bias rides in the GEMM's epilogue")
    return f"one GEMM per forward, no separate bias kernel or copy ({', '.join(sorted(names))})", "no epilogue flag in the name"


@check("P2.4")
def mlp_kernels(trace: GpuTrace):
    """Eager GeGLU MLP: per forward 3 aten::mm (GEMMs, each queried below sm_90) + aten::gelu and
    aten::mul with one kernel each and no query, and no other kernel; GEMMs counted by op."""
    gpu = trace.gpu
    counts, splits, unqueried, gemm_calls = set(), set(), 0, 0
    for step in _steps(trace):
        fwd = trace.one(step, "mlp_fwd")
        mms = trace.inside(fwd, "aten::mm")
        need(len(mms) == 3, f"{len(mms)} aten::mm in mlp_fwd, expected 3")
        per_mm = [len(trace.kernels_of(mm)) for mm in mms]
        need(all(per_mm), "an aten::mm launched no kernel")
        splits.add(sum(n > 1 for n in per_mm))
        unqueried += sum(not queries_before_launch(trace, mm) for mm in mms)
        gemm_calls += len(mms)
        for name in ("aten::gelu", "aten::mul"):
            op = trace.one(fwd, name)
            need(len(trace.kernels_of(op)) == 1, f"{name} launched {len(trace.kernels_of(op))} kernels, expected one")
            need(not queries_before_launch(trace, op), f"{name} made an occupancy query")
        total = len(trace.kernels_of(fwd))
        need(total == sum(per_mm) + 2, f"{total} kernels in mlp_fwd, but the GEMMs and gelu/mul launched {sum(per_mm) + 2}")
        counts.add(total)
    if gpu.expects_gemm_occupancy_query is not False:
        need(not unqueried, f"{gpu.occupancy_case()}; but {unqueried} of {gemm_calls} aten::mm launches had no query")
    kernels = "/".join(map(str, sorted(counts)))
    split = "/".join(map(str, sorted(splits)))
    extra = f", {split} aten::mm per forward launched a second kernel (split-K reduction)" if splits != {0} else ""
    queried = ("every GEMM launch queried" if not unqueried else
               f"{unqueried} of {gemm_calls} GEMM launches without a query")
    return f"{kernels} kernels per forward: 3 GEMMs + gelu + mul{extra}; {queried}", gpu.occupancy_case()


@check("P2.7")
def compiled_mlp(eager: GpuTrace, compiled: GpuTrace):
    """Compiled MLP: per step 3 aten::mm (the eager GEMMs) and one fused Triton pointwise kernel
    doing gelu + mul, and no other kernel."""
    gemms = eager_gemms(eager)
    need(gemms, "the eager run has no aten::mm GEMM")
    fused_names, hows = set(), set()
    for step in _steps(compiled):
        kernels = compiled.kernels_of(step)
        fused = [k["name"] for k in kernels if _fuses_gelu_mul(k["name"])]
        need(len(fused) == 1, f"{len(fused)} fused gelu*mul kernels in a step: {[k['name'] for k in kernels]}")
        mms = compiled.inside(step, "aten::mm")
        need(len(mms) == 3, f"{len(mms)} aten::mm in a compiled step, expected 3")
        hows.update(same_gemm(gemm_of(compiled, mm)["name"], gemms) for mm in mms)
        need(len(kernels) == sum(len(compiled.kernels_of(mm)) for mm in mms) + 1,
             f"kernels besides the GEMMs and the fused one: {[k['name'] for k in kernels]}")
        fused_names.update(fused)
    return f"3 GEMMs + {', '.join(sorted(fused_names))}", "; ".join(sorted(hows))


def _fuses_gelu_mul(name: str) -> bool:
    d = trace_names.decode_fused(name)
    return bool(d and d["backend"] == "Triton" and d["kind"] == "pointwise" and {"gelu", "mul"} <= set(d["ops"]))


@check("P2.9")
def liger_mlp(trace: GpuTrace):
    """03_kernels_mlp.py: per step 3 aten::linear, one Triton GeGLU kernel, no Dynamo/compile rows."""
    kernels = set()
    for step in _steps(trace):
        names = [e["name"] for e in trace.inside(step)]
        need(names.count("aten::linear") == 3, f"{names.count('aten::linear')} aten::linear in a step, expected 3")
        need(not any(n.startswith(COMPILE_FRAMES) for n in names), "compile frames in an uncompiled run")
        geglu = [k["name"] for k in trace.kernels_of(step) if "geglu" in k["name"].lower()]
        need(len(geglu) == 1, f"{len(geglu)} GeGLU kernels in a step, expected one")
        kernels.update(geglu)
    return f"one {', '.join(sorted(kernels))} per forward, 3 aten::linear, no compile frames", ""


# ----------------------------------------------------------------------------- Part 3: attention

NAIVE_FWD, SDPA_FWD, HUB_FWD = "attn_fwd", "sdpa_fwd", "kernels_attn_fwd"  # the lessons' annotations
GEMM_OPS = ("aten::bmm", "aten::mm", "aten::baddbmm")


def forwards(trace: GpuTrace, name: str) -> list[dict]:
    """The annotated forward of every step (one per step)."""
    return [trace.one(step, name) for step in _steps(trace)]


def device_us_per_forward(trace: GpuTrace, name: str) -> float:
    """The device time of the kernels and copies a forward launched, averaged over the steps: the
    profiler table's CUDA time of the ``*_fwd`` row."""
    times = [sum(w["dur"] for w in trace.device_work_of(fwd)) for fwd in forwards(trace, name)]
    return sum(times) / len(times)


def cpu_us_per_forward(trace: GpuTrace, name: str) -> float:
    times = [fwd["dur"] for fwd in forwards(trace, name)]
    return sum(times) / len(times)


def _short(name: str, width: int = 70) -> str:
    # short_name folds a trailing "(...)" greedily: "(anonymous namespace)::" would swallow the whole name
    return trace_names.short_name(name.replace("(anonymous namespace)::", ""), width)


def _names(events: list[dict]) -> str:
    return ", ".join(_short(e["name"], 50) for e in events) or "none"


def _counts(values) -> str:
    return "/".join(str(v) for v in sorted(set(values)))


def _gemm_ops(trace: GpuTrace, fwd: dict) -> list[dict]:
    return [e for e in trace.inside(fwd) if e["name"] in GEMM_OPS]


def _naming(names) -> str:
    """Which family of kernel names a run shows: the posts' A100 (Ampere) or Hopper's."""
    low = " ".join(names).lower()
    if "nvjet" in low or "sm90" in low:
        return "Hopper names"
    if "ampere" in low or "sm80" in low:
        return "A100 (Ampere) names"
    return "names of neither the posts' A100 nor Hopper"


def gemm_math(name: str) -> tuple[str, bool, str]:
    """What a GEMM kernel's name says of its arithmetic: (dtype, on tensor cores, the part of the name
    that says so); dtype is '' when the name does not say.

    fp32 on CUDA cores: ``sgemm`` (``ampere_sgemm_*``, ``cutlass_80_simt_sgemm_*``), ``ffma``
    (``sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma_...``, which cuBLAS also runs on Hopper), ``simt``,
    nvjet's type code ``sss`` (Hopper's wgmma has no plain-fp32 form). TF32 on tensor cores: ``tf32``.
    bf16/fp16 on tensor cores: an MMA shape (``s16816``), ``wgmma``, ``tensorop``, ``xmma`` or nvjet's
    ``t``/``h`` type codes (``tst``).
    """
    low = name.lower()
    if "tf32" in low:
        return "tf32", True, "tf32"
    decoded = trace_names.decode_gemm(name) or {}
    code = decoded.get("types", "") if decoded.get("library") == "cuBLAS (nvjet)" else ""
    if code[:1] == "s":
        return "fp32", False, f"nvjet type code {code}"
    if code[:1] in ("t", "h"):
        return ("bf16" if code[0] == "t" else "fp16"), True, f"nvjet type code {code}"
    for sign in ("sgemm", "ffma", "simt"):
        if sign in low:
            return "fp32", False, sign
    if re.search(r"gemm_f32f32_f32f32", low):
        return "fp32", False, "f32f32_f32f32"
    m = re.search(r"[sh]?(16816|16832|1688|884)|wgmma|tensorop|hmma|xmma", low)
    if m:
        dtype = "bf16" if "bf16" in low else "fp16" if re.search(r"f16|fp16|half|h(16816|1688)", low) else ""
        return dtype, True, m.group(0)
    return "", False, ""


def _describe_gemm_math(name: str) -> str:
    dtype, tensor_cores, sign = gemm_math(name)
    where = "tensor cores" if tensor_cores else "CUDA cores"
    if not sign:
        return f"{_short(name, 60)} (no sign of its arithmetic)"
    return f"{_short(name, 60)} ({sign}: {dtype or 'dtype unknown'} on {where})"


@check("P3.1")
def naive_ops(trace: GpuTrace):
    """Naive attention: the ops directly under attn_fwd are the guessed five, in order: matmul, mul
    (the scale), masked_fill, softmax, matmul (views such as k.transpose(-2, -1) aside)."""
    guessed = ["aten::matmul", "aten::mul", "aten::masked_fill", "aten::softmax", "aten::matmul"]
    for fwd in forwards(trace, NAIVE_FWD):
        ops = [e["name"] for e in trace.children(fwd)
               if e["name"].startswith("aten::") and e["name"] not in trace_names.METADATA_OPS]
        need(ops == guessed, f"attn_fwd runs {', '.join(ops) or 'no op'}, expected {', '.join(guessed)}")
    return "attn_fwd -> matmul, mul, masked_fill, softmax, matmul in every step", f"{len(_steps(trace))} steps"


def _attention_work(trace: GpuTrace, fwd: dict, mask_op: str) -> dict:
    """The device work of a hand-written attention forward, by op: the two matmuls (their GEMMs, plus
    any split-K reduction), the scale, the mask, the softmax; nothing else may launch work."""
    matmuls = trace.inside(fwd, "aten::matmul")
    need(len(matmuls) == 2, f"{len(matmuls)} aten::matmul in attn_fwd, expected 2")
    gemm_work = [trace.device_work_of(m) for m in matmuls]
    need(all(gemm_work), "an aten::matmul launched no kernel")
    parts = {"mul": trace.device_work_of(trace.one(fwd, "aten::mul")),
             "mask": trace.device_work_of(trace.one(fwd, mask_op)),
             "softmax": trace.device_work_of(trace.one(fwd, "aten::softmax"))}
    for what in ("mul", "softmax"):
        need(len(parts[what]) == 1, f"aten::{what} launched {len(parts[what])} kernels, expected one")
    total = trace.device_work_of(fwd)
    counted = sum(map(len, gemm_work)) + sum(map(len, parts.values()))
    need(len(total) == counted, f"{len(total)} kernels in attn_fwd, but its ops launched {counted}: {_names(total)}")
    copies = [w for w in total if w.get("cat") in MEMCPY_CATS]
    return dict(total=len(total), copies=copies, split_k=sum(len(g) - 1 for g in gemm_work), mask=parts["mask"])


def _split_note(split_k: set) -> str:
    return "" if split_k == {0} else f" (GEMMs with a split-K reduction: {_counts(split_k)} extra kernels)"


@check("P3.2")
def naive_memcpy(trace: GpuTrace):
    """Naive attention: 6 kernels per attn_fwd (2 GEMMs, mul, a Memcpy, masked_fill, softmax); the
    Memcpy is the out-of-place masked_fill's copy: launched from aten::masked_fill -> aten::clone ->
    aten::copy_."""
    totals, splits, copies = set(), set(), set()
    for fwd in forwards(trace, NAIVE_FWD):
        found = [w for w in trace.device_work_of(fwd) if w.get("cat") in MEMCPY_CATS]
        need(len(found) == 1, f"{len(found)} Memcpy in attn_fwd, expected one (the out-of-place masked_fill's copy)")
        copy = found[0]
        chain = [e["name"] for e in trace.ancestors(trace.launch_of(copy))]
        at = [chain.index(n) if n in chain else -1 for n in ("aten::masked_fill", "aten::clone", "aten::copy_")]
        need(-1 not in at and at == sorted(at), f"the Memcpy was launched from {' -> '.join(chain)}, not from "
             "under aten::masked_fill -> aten::clone -> aten::copy_")
        work = _attention_work(trace, fwd, "aten::masked_fill")
        need(len(work["mask"]) == 2, f"aten::masked_fill launched {_names(work['mask'])}, expected the copy and one kernel")
        totals.add(work["total"])
        splits.add(work["split_k"])
        copies.add(copy["name"])
    size = copy.get("args", {}).get("bytes")
    return (f"{_counts(totals)} kernels per forward: 2 GEMMs, mul, {', '.join(sorted(copies))} (from aten::masked_fill "
            f"-> aten::clone -> aten::copy_), masked_fill, softmax{_split_note(splits)}",
            f"the copy moves {size / 1e6:.1f} MB" if size else "copy size not recorded")


@check("P3.3")
def inplace_no_copy(inplace: GpuTrace, naive: GpuTrace):
    """In-place masked_fill_: 5 kernels per attn_fwd, no Memcpy and no aten::clone/aten::masked_fill:
    one kernel fewer than the naive forward."""
    totals, splits = set(), set()
    for fwd in forwards(inplace, NAIVE_FWD):
        need(not inplace.inside(fwd, "aten::masked_fill"), "the in-place forward still calls the out-of-place aten::masked_fill")
        need(not inplace.inside(fwd, "aten::clone"), "an aten::clone in the in-place forward")
        work = _attention_work(inplace, fwd, "aten::masked_fill_")
        need(not work["copies"], f"{len(work['copies'])} Memcpy in the in-place forward: {_names(work['copies'])}")
        need(len(work["mask"]) == 1, f"aten::masked_fill_ launched {_names(work['mask'])}, expected one kernel")
        totals.add(work["total"])
        splits.add(work["split_k"])
    naive_totals = {len(naive.device_work_of(fwd)) for fwd in forwards(naive, NAIVE_FWD)}
    need(len(totals) == 1 and naive_totals == {min(totals) + 1},
         f"in-place {_counts(totals)} kernels per forward, naive {_counts(naive_totals)}: expected one fewer")
    return (f"{_counts(totals)} kernels per forward, no Memcpy (naive: {_counts(naive_totals)}){_split_note(splits)}",
            "no aten::clone under the mask")


@check("P3.4")
def math_slower(inplace: GpuTrace, math: GpuTrace):
    """SDPA math's device time per forward (the sdpa_fwd row's CUDA time) above the in-place attention's
    (attn_fwd): a ratio, not the A100's 1.955 vs 7.239 ms."""
    fast = device_us_per_forward(inplace, NAIVE_FWD)
    slow = device_us_per_forward(math, SDPA_FWD)
    evidence = f"math {slow / 1e3:.3f} ms vs in-place {fast / 1e3:.3f} ms device time per forward"
    need(fast > 0, "the in-place forward launched no device work")
    need(slow > fast, f"math is not slower: {evidence}")
    return f"math {slow / fast:.1f}x slower than the in-place attention (the posts' A100: 3.7x)", evidence


@check("P3.5")
def math_many_kernels(inplace: GpuTrace, math: GpuTrace):
    """SDPA math launches many more kernels per forward than the in-place attention: at least twice as
    many (the posts' A100: 20 vs 5)."""
    mine = [len(math.device_work_of(f)) for f in forwards(math, SDPA_FWD)]
    theirs = [len(inplace.device_work_of(f)) for f in forwards(inplace, NAIVE_FWD)]
    evidence = f"math {_counts(mine)} kernels per forward, in-place {_counts(theirs)}"
    need(min(mine) >= 2 * max(theirs), f"math does not launch twice as many: {evidence}")
    return f"{evidence} (the posts: 20 vs 5)", f"{min(mine) / max(theirs):.1f}x the kernels"


@check("P3.6")
def math_fp32_gemms(naive: GpuTrace, math: GpuTrace):
    """Math upcasts to fp32: its GEMMs (aten::bmm under sdpa_fwd) run fp32 on CUDA cores (sgemm, ffma,
    nvjet sss); the naive attention's run bf16 on tensor cores (s16816 on the A100, nvjet tst on Hopper)."""
    def gemms(trace, fwd_name):
        names = set()
        for fwd in forwards(trace, fwd_name):
            ops = _gemm_ops(trace, fwd)
            need(len(ops) == 2, f"{len(ops)} GEMM ops ({'/'.join(GEMM_OPS)}) in {fwd_name}, expected 2")
            names.update(gemm_of(trace, op)["name"] for op in ops)
        return sorted(names)

    bf16, fp32 = gemms(naive, NAIVE_FWD), gemms(math, SDPA_FWD)
    for name in bf16:
        dtype, tensor_cores, _ = gemm_math(name)
        need(dtype == "bf16" and tensor_cores, f"the naive GEMM is not bf16 on tensor cores: {_describe_gemm_math(name)}")
    for name in fp32:
        dtype, tensor_cores, sign = gemm_math(name)
        need(dtype in ("fp32", "tf32"), f"math's GEMM is not fp32 (no upcast?): {_describe_gemm_math(name)}")
        need(not tensor_cores, f"math's GEMM runs its fp32 on tensor cores ({sign}: TF32 allowed?): {_short(name)}")
    return (f"{math.gpu.describe()}, {_naming(bf16 + fp32)}: math {'; '.join(map(_describe_gemm_math, fp32))}; "
            f"naive {'; '.join(map(_describe_gemm_math, bf16))}"), "math leaves the tensor cores idle"


@check("P3.7")
def math_rebuilds_mask(math: GpuTrace):
    """Math builds the causal mask on every call: per sdpa_fwd aten::tril launches a triu_tril kernel
    and aten::where (outside _safe_softmax) where kernels; the add_ that applies it is reported."""
    where_counts, guard_counts, adds, mask_ops = set(), set(), set(), set()
    for fwd in forwards(math, SDPA_FWD):
        tril = math.one(fwd, "aten::tril")
        need(any("triu_tril" in k["name"] for k in math.kernels_of(tril)),
             f"aten::tril launched {_names(math.kernels_of(tril))}, no triu_tril kernel")
        wheres, guards = [], []
        for w in math.inside(fwd, "aten::where"):
            in_guard = "aten::_safe_softmax" in {a["name"] for a in math.ancestors(w)}
            (guards if in_guard else wheres).append(w)
        kernels = [k for w in wheres for k in math.kernels_of(w) if "where" in k["name"].lower()]
        need(kernels, "no where kernel launched by aten::where for the mask")
        where_counts.add(len(kernels))
        guard_counts.add(sum(len(math.kernels_of(w)) for w in guards))
        adds.add(sum(len(math.kernels_of(a)) for a in math.inside(fwd, "aten::add_")))
        mask_ops.update(n for n in ("aten::ones", "aten::scalar_tensor", "aten::logical_not") if math.inside(fwd, n))
    add = f", aten::add_ {_counts(adds)} kernel(s)" if adds != {0} else ", no aten::add_ kernel"
    guard = f" (+{_counts(guard_counts)} in _safe_softmax)" if guard_counts != {0} else ""
    return (f"every forward: aten::tril -> triu_tril kernel, aten::where -> {_counts(where_counts)} where kernel(s) for the "
            f"mask{guard}{add}",
            f"also {', '.join(sorted(mask_ops))}" if mask_ops else "")


@check("P3.8")
def math_safe_softmax(math: GpuTrace):
    """Math calls aten::_safe_softmax (one per forward, launching the softmax and its guard of fully
    masked rows), not a bare aten::softmax."""
    counts = set()
    for fwd in forwards(math, SDPA_FWD):
        safe = math.one(fwd, "aten::_safe_softmax")
        bare = [s for s in math.inside(fwd, "aten::softmax")
                if "aten::_safe_softmax" not in {a["name"] for a in math.ancestors(s)}]
        need(not bare, "an aten::softmax outside aten::_safe_softmax")
        kernels = math.kernels_of(safe)
        need(kernels, "aten::_safe_softmax launched no kernel")
        counts.add(len(kernels))
    more = "the softmax and the fully-masked-row guard" if min(counts) > 1 else "one fused kernel"
    return f"aten::_safe_softmax in every forward, {_counts(counts)} kernel(s) ({more})", ""


def _one_kernel(trace: GpuTrace, fwd_name: str, pattern: str, what: str) -> list[dict]:
    """The one kernel each forward launched, which must match ``pattern``: nothing else is launched."""
    found = []
    for fwd in forwards(trace, fwd_name):
        work = trace.device_work_of(fwd)
        hits = [w for w in work if w.get("cat") in KERNEL_CATS and re.search(pattern, w["name"])]
        need(len(hits) == 1, f"{len(hits)} {what} kernels in {fwd_name}, expected one (it launched: {_names(work)})")
        need(len(work) == 1, f"{fwd_name} launched {len(work)} kernels, expected the {what} one alone: {_names(work)}")
        found.append(hits[0])
    return found


EFFICIENT = re.compile(r"fmha_cutlass(?P<dir>[FB])_(?P<dtype>bf16|f16|f32)_(?P<align>aligned|notaligned)_"
                       r"(?P<q>\d+)x(?P<k>\d+)(?:_k(?P<kmax>\d+))?(?:_(?P<mem>rf|gmem))?(?:_dropout)?_sm(?P<sm>\d+)")
FLASH = r"pytorch_flash::flash_fwd_(?:splitkv_)?kernel"
CUDNN = re.compile(r"cudnn_generated_fort_native_sdpa_(?P<sm>sm\d+)_flash_fprop_(?P<mma>[a-z]+)_(?P<dtype>[a-z]*\d+)"
                   r"(?:_knob_(?P<knob>\d+))?(?:_(?P<tile>\d+x\d+x\d+))?")


@check("P3.9")
def efficient_kernel(trace: GpuTrace):
    """Efficient: one fmha_cutlassF kernel per forward, its name decoded: fused MHA, CUTLASS forward,
    bf16, aligned, tile, register file, arch (Hopper runs the sm80 build)."""
    names = {k["name"] for k in _one_kernel(trace, SDPA_FWD, EFFICIENT.pattern, "fmha_cutlassF")}
    parts = set()
    for name in names:
        m = EFFICIENT.search(name)
        need(m["dir"] == "F", f"{_short(name)} is a backward kernel")
        need(m["dtype"] == "bf16", f"{_short(name)} runs {m['dtype']}, not bf16")
        memory = {"rf": "register file (rf)", "gmem": "global memory (gmem)"}.get(m["mem"], "no rf/gmem part")
        parts.add(f"fused MHA, CUTLASS forward, bf16, {m['align']}, {m['q']}x{m['k']} tile, {memory}, sm{m['sm']}")
        built = f"sm{m['sm']}"
    gpu = trace.gpu
    where = (f"built for {built}, running on {gpu.describe()}" if gpu.sm and gpu.sm.replace("_", "") != built
             else f"on {gpu.describe()}")
    return (f"one {EFFICIENT.search(sorted(names)[0]).group(0)} per forward: {'; '.join(sorted(parts))} ({where})",
            _short(sorted(names)[0], 120))


@check("P3.10")
def flash_fastest(flash: GpuTrace, math: GpuTrace | None = None, efficient: GpuTrace | None = None,
                  cudnn: GpuTrace | None = None):
    """Flash: one pytorch_flash::flash_fwd_kernel per forward, faster than math. Whether it is also the
    fastest of the fused backends (the posts' A100: flash 146.8, cuDNN 186.3, efficient 277.9 µs) is
    reported, not required: on Hopper cuDNN's sm90 kernel may win."""
    names = {k["name"] for k in _one_kernel(flash, SDPA_FWD, FLASH, "pytorch_flash")}
    times = {"flash": device_us_per_forward(flash, SDPA_FWD)}
    for label, trace in (("efficient", efficient), ("cuDNN", cudnn), ("math", math)):
        if trace is not None:
            times[label] = device_us_per_forward(trace, SDPA_FWD)
    evidence = ", ".join(f"{k} {v:.1f} µs" for k, v in sorted(times.items(), key=lambda kv: kv[1]))
    if "math" in times:
        need(times["flash"] < times["math"], f"flash is not faster than math: {evidence}")
    fused = {k: v for k, v in times.items() if k != "math"}
    fastest = min(fused, key=fused.get)
    kernel = re.search(FLASH, sorted(names)[0]).group(0)
    if len(fused) == 1:
        return f"one {kernel} per forward (the other fused backends not run)", evidence
    if fastest == "flash":
        return f"one {kernel} per forward, the fastest of {len(times)} backends, as on the posts' A100", evidence
    return (f"one {kernel} per forward; here {fastest} is the fastest ({fused[fastest]:.1f} µs vs flash "
            f"{fused['flash']:.1f} µs) on {flash.gpu.describe()}: the posts' A100 ranking does not hold on this GPU"), evidence


# ----------------------------------------------------------------------------- occupancy from a kernel's footprint

def footprint(kernel: dict, props: dict) -> Footprint:
    """Resident blocks and warps per SM for a kernel event (:func:`common.report.facts.occupancy.footprint`)."""
    args = kernel.get("args", {})
    fp = occupancy_footprint(*(args.get(k) for k in ("registers per thread", "block", "shared memory", "grid")), props)
    need(not isinstance(fp, str), f"{_short(kernel['name'], 50)}: {fp}")
    return fp


def reported_occupancy(kernel: dict):
    return kernel.get("args", {}).get("est. achieved occupancy %")


LOW_OCCUPANCY = 25.0  # % of the SM's warps: "low" (the posts: flash 13 %, cuDNN 12.5 %)


@check("P3.11")
def flash_occupancy(trace: GpuTrace):
    """Flash's est. achieved occupancy is low, and its footprint explains it: registers per thread x
    threads per block and shared memory per block against the SM's limits (deviceProperties) leave room
    for few blocks (the posts' A100: 128 threads x 255 registers -> 2 blocks, 8 of 64 warps, ~13 %)."""
    kernels = _one_kernel(trace, SDPA_FWD, FLASH, "pytorch_flash")
    seen = {}
    for k in kernels:
        fp = footprint(k, trace.props_of(k))
        reported = reported_occupancy(k)
        need(fp.occupancy <= LOW_OCCUPANCY,
             f"the footprint leaves room for {fp.occupancy:.1f} % occupancy, not low: {fp.describe()}")
        need(isinstance(reported, (int, float)), "the flash kernel carries no 'est. achieved occupancy %'")
        if reported == 0 and fp.shared > fp.shared_per_block_limit:
            how = (f"the trace reads 0 %: {fp.shared:,} B shared memory per block is over the {fp.shared_per_block_limit:,} B "
                   "Kineto's estimate allows (it reads 0 for every such kernel)")
        else:
            need(abs(reported - fp.estimate) <= 2, f"the trace reads {reported} % but the footprint gives {fp.estimate:.1f} %: "
                 f"{fp.describe()}")
            how = f"the trace reads {reported} %, the footprint gives {fp.estimate:.1f} %"
        seen[(fp.describe(), fp.limit())] = how
    (described, limit), how = sorted(seen.items())[0]
    posts = " (the posts' A100 footprint)" if "255 registers x 128 threads" in described and "2 block(s)" in described else ""
    return f"low by design: {how}; {described}, limited by {limit}{posts}", trace.gpu.describe()


@check("P3.12")
def transposes(flash: GpuTrace | None, efficient: GpuTrace | None, cudnn: GpuTrace | None):
    """Flash and efficient run four aten::transpose (metadata only: no kernel) inside each forward to
    hand the kernel [B, S, H, D]; cuDNN none (it reads [B, H, S, D] as is)."""
    parts, done = [], 0
    for label, trace, expected in (("flash", flash, 4), ("efficient", efficient, 4), ("cuDNN", cudnn, 0)):
        if trace is None:
            continue
        splits = set()
        for fwd in forwards(trace, SDPA_FWD):
            ts = trace.inside(fwd, "aten::transpose")
            need(len(ts) == expected, f"{label}: {len(ts)} aten::transpose in a forward, expected {expected}")
            need(not any(trace.device_work_of(t) for t in ts), f"{label}: an aten::transpose launched device work")
            kernels = trace.kernels_of(fwd)
            if ts and kernels:
                launch = trace.launch_of(kernels[0])["ts"]
                splits.add(f"{sum(t['ts'] < launch for t in ts)} before the launch")
        parts.append(f"{label} {expected}" + (f" ({'/'.join(sorted(splits))})" if splits else ""))
        done += 1
    need(done, "no flash, efficient or cuDNN run to look at")
    return f"aten::transpose per forward: {', '.join(parts)}", "transposes launch no kernel"


@check("P3.13")
def cudnn_kernel(trace: GpuTrace):
    """cuDNN: one cudnn_generated_fort_native_sdpa_smXX_flash_fprop_... kernel per forward, launched
    through cuLaunchKernelEx (the driver's extended launch), not cudaLaunchKernel."""
    kernels = _one_kernel(trace, SDPA_FWD, CUDNN.pattern, "cudnn_generated sdpa flash_fprop")
    launches = {trace.launch_of(k)["name"] for k in kernels}
    need(all(n.startswith("cuLaunchKernelEx") for n in launches),
         f"launched by {', '.join(sorted(launches))}, not cuLaunchKernelEx")
    m = CUDNN.search(kernels[0]["name"])
    form = {"sm80": "the posts' A100 form", "sm90": "the Hopper form"}.get(m["sm"], f"a {m['sm']} build")
    knob = f", knob {m['knob']}" if m["knob"] else ""
    tile = f", tile {m['tile']}" if m["tile"] else ""
    return (f"one {m.group(0)} per forward via {', '.join(sorted(launches))} ({form}: {m['sm']}, {m['mma']} {m['dtype']}"
            f"{knob}{tile})"), _short(kernels[0]["name"], 120)


@check("P3.14")
def cudnn_occupancy(trace: GpuTrace):
    """cuDNN's kernel: the trace's est. achieved occupancy is a measurement gap (0 % in the posts), and the
    footprint tells the truth: about one block per SM (the posts' A100: 240 registers x 256 threads)."""
    kernels = _one_kernel(trace, SDPA_FWD, CUDNN.pattern, "cudnn_generated sdpa flash_fprop")
    k = kernels[0]
    fp = footprint(k, trace.props_of(k))
    need(fp.blocks <= 2 and fp.occupancy <= LOW_OCCUPANCY,
         f"the footprint leaves room for {fp.blocks} blocks ({fp.occupancy:.1f} %), not about one: {fp.describe()}")
    reported = {reported_occupancy(x) for x in kernels}
    launch = trace.launch_of(k)["name"]
    if reported <= {0, None}:
        if fp.shared > fp.shared_per_block_limit:
            why = (f"reads 0 %: its {fp.shared:,} B shared memory per block is over the {fp.shared_per_block_limit:,} B that "
                   f"Kineto's estimate allows, which reads 0 for every such kernel whatever launched it (a "
                   f"{launch} launch here)")
        else:
            why = f"reads 0 % for a {launch} launch, the posts' driver-API gap"
    else:
        why = f"reads {_counts(reported)} % here (the posts' A100 read 0 %)"
    return f"{why}; the footprint: {fp.describe()}", trace.gpu.describe()


CUDNN_LIBRARY_OPS = ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_cudnn_attention",
                     "aten::_cudnn_attention_forward")
# each backend's chain of SDPA ops: the dispatcher, the backend's op and its forward (whichever the torch version has)
SDPA_CHAIN = re.compile(r"aten::(scaled_dot_product_attention|_scaled_dot_product_\w+_attention|_\w+_attention_forward)$")
POSTS_CPU_US = {"cuDNN": 214, "flash": 138, "efficient": 117}  # the posts' A100, CPU time per forward


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def library_share(trace: GpuTrace, fwd: dict) -> float:
    """The share of a forward's CPU time that is the own (self) time of its SDPA op chain."""
    return sum(trace.self_us(op) for op in trace.inside(fwd) if SDPA_CHAIN.match(op["name"])) / fwd["dur"]


def _spread(values: list[float]) -> float:
    """The median absolute deviation: one wide step (the profiler's first) does not widen it."""
    middle = _median(values)
    return _median([abs(v - middle) for v in values])


def cpu_ranking(ranked: list[str], cpu: dict, spread: dict) -> str:
    """Which backend costs the most CPU per forward, and whether its lead is beyond the steps' spread."""
    first, second = ranked[0], ranked[1]
    lead, noise = cpu[first] - cpu[second], max(spread[first], spread[second])
    who = ("cuDNN the costliest on the CPU per forward" if first == "cuDNN" else
           f"here {first} is the costliest on the CPU per forward, not cuDNN")
    if lead <= noise:
        return (f"{who}, but by {lead:.0f} µs over {second}, inside the steps' own spread (±{noise:.0f} µs): "
                "this run cannot rank the backends' CPU cost")
    return who + (", as on the posts' A100" if first == "cuDNN" else ": the posts' A100 ranking does not hold on this run")


@check("P3.15")
def cudnn_cpu_cost(cudnn: GpuTrace, flash: GpuTrace, efficient: GpuTrace):
    """The work moved into the library: of the fused backends, cuDNN's forward spends the largest share of
    its CPU time in the SDPA ops' own time (aten::_cudnn_attention_forward and the ops above it). Whether
    it is also the costliest on the CPU per forward (the posts' A100: 214 µs vs flash 138, efficient 117)
    is reported, not required: medians over the steps, with each backend's range, since a few µs apart
    is inside one run's noise."""
    traces = {"cuDNN": cudnn, "flash": flash, "efficient": efficient}
    per_step = {k: [f["dur"] for f in forwards(t, SDPA_FWD)] for k, t in traces.items()}
    cpu = {k: _median(v) for k, v in per_step.items()}
    share = {k: _median([library_share(t, f) for f in forwards(t, SDPA_FWD)]) for k, t in traces.items()}
    shares = ", ".join(f"{k} {v:.0%}" for k, v in share.items())
    need(share["cuDNN"] > max(share["flash"], share["efficient"]),
         f"cuDNN's forward does not spend the largest share of its CPU time in the SDPA ops' own time: {shares}")
    names = {}
    for fwd in forwards(cudnn, SDPA_FWD):
        for op in (op for name in CUDNN_LIBRARY_OPS for op in cudnn.inside(fwd, name)):
            names[op["name"]] = names.get(op["name"], 0.0) + cudnn.self_us(op) / len(_steps(cudnn))
    ranked = sorted(cpu, key=lambda k: -cpu[k])
    times = ", ".join(f"{k} {cpu[k]:.0f} µs ({min(per_step[k]):.0f}-{max(per_step[k]):.0f})" for k in ranked)
    own = (f"{share['cuDNN']:.0%} of cuDNN's forward is the own time of "
           f"{', '.join(n.replace('aten::', '') for n in CUDNN_LIBRARY_OPS if n in names)} (flash {share['flash']:.0%}, "
           f"efficient {share['efficient']:.0%})")
    ranking = cpu_ranking(ranked, cpu, {k: _spread(v) for k, v in per_step.items()})
    posts = ", ".join(f"{k} {v}" for k, v in POSTS_CPU_US.items())
    return (f"{own}; {ranking} (median CPU µs per forward, range over {len(per_step['cuDNN'])} steps: {times}; "
            f"the posts' A100: {posts} µs)"), \
        "self time per forward: " + ", ".join(f"{n} {us:.0f} µs" for n, us in names.items())


@check("P3.16")
def hub_flash_kernel(trace: GpuTrace):
    """04_d_kernels_attention.py: one flash forward kernel per kernels_attn_fwd, the Hub's own build
    (not PyTorch's vendored pytorch_flash one)."""
    kernels = _one_kernel(trace, HUB_FWD, r"flash\w*fwd|fwd\w*flash", "flash forward")
    names = {k["name"] for k in kernels}
    need(not any("pytorch_flash" in n for n in names), f"the kernel is PyTorch's own: {_short(sorted(names)[0])}")
    launches = {trace.launch_of(k)["name"] for k in kernels}
    return f"one {_short(sorted(names)[0], 60)} per forward ({', '.join(sorted(launches))})", trace.gpu.describe()
