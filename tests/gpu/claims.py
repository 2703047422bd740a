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

from common.report import names as trace_names
from common.report.gpus import gpu_of

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
        def run(*args) -> Verdict:
            try:
                variant, evidence = fn(*args)
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
        device = self.kernels[0].get("args", {}).get("device") if self.kernels else None
        self.gpu = gpu_of(doc.get("deviceProperties"), device)

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
