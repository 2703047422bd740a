"""Where a report's time goes, stage by stage, in one process (issue 30).

``uv run benchmarks/profile_stages.py TRACE`` loads the trace as the command line does (two processes for a
big plain-JSON file, freed memory kept: :mod:`common.report.load.heap`), then runs the model, the tables, the
rules and the JSON one at a time and prints each one's CPU seconds (``time.process_time``, this process) and,
for the model and the tables, the CPU seconds of each of their steps. ``--profile`` adds cProfile's top
functions per stage (CPU time; the profiler's overhead inflates the Python-heavy ones)."""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import common.report.facts.tables as tables
import common.report.model.build as model
from common.report.load.reader import load
from common.report.render.json import to_json
from common.report.rules.registry import run_rules

MODEL_STEPS = ("drop_impossible", "drop_impossible_shapes", "_host_steps", "_cpu_lane", "_device_lane", "_memory_lane",
               "drop_impossible_memory")
TABLE_STEPS = ("gpu_union", "align_steps", "step_breakdown", "step_rows", "op_table", "phase_table", "build_roofline",
               "numbers_of", "category_table", "kernel_table", "_cpu_work", "compile_frames", "kernel_sources",
               "memory_of", "regime_of", "launched_outside", "overhead_facts", "timeline_facts", "first_step_facts",
               "gemm_facts", "copies_facts", "phases_facts", "attention_facts")


def _timed(module, name: str, seconds: dict) -> None:
    """Wrap ``module.name`` so that its CPU seconds add up in ``seconds[name]``."""
    inner = getattr(module, name)

    def wrapper(*args, **kwargs):
        start = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            seconds[name] = seconds.get(name, 0.0) + time.process_time() - start

    setattr(module, name, wrapper)


def _stage(label: str, profile: bool, call, *args):
    start = time.process_time()
    profiler = cProfile.Profile(time.process_time) if profile else None
    result = profiler.runcall(call, *args) if profiler else call(*args)
    print(f"{label:14s} {time.process_time() - start:6.2f} CPU s")
    if profiler:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
        print(out.getvalue())
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace")
    p.add_argument("--profile", action="store_true", help="cProfile's top 25 functions of each stage")
    args = p.parse_args(argv)
    seconds: dict = {}
    for name in MODEL_STEPS:
        _timed(model, name, seconds)
    for name in TABLE_STEPS:
        _timed(tables, name, seconds)
    loaded = _stage("load", False, lambda: load(args.trace, parallel=True))
    m = _stage("model", args.profile, model.build, loaded)
    t = _stage("tables", args.profile, tables.build_tables, m)
    findings = _stage("rules", args.profile, run_rules, t)
    _stage("JSON", args.profile, to_json, t, findings)
    for name, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        if s >= 0.01:
            print(f"  {name:24s} {s:6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
