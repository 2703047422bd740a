"""Benchmark of the trace report (``common.report``) on a big trace and on the 54 MB original.

    uv run benchmarks/bench_report.py            # build the big input if needed, then measure
    uv run benchmarks/bench_report.py --runs 5   # more runs per figure (the median is reported)

The big input is ``tests/data/traces/hta/v100_ddp_rank1.json.gz`` (a real 2-rank DDP trace: 5
ProfilerSteps, 216K events) repeated 12 times back to back: each copy's timestamps are shifted
past the previous copy's end, its correlation ids, ``External id`` and flow ``id`` past the
previous copy's range, and its ProfilerStep numbers continue (#2..#6, #7..#11, ...). About 511 MB
of JSON and 2.6 M events, written to ``benchmarks/data/`` (git-ignored).

Each figure is the median of several runs, each run in its own subprocess so that its peak RSS
can be read with ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``; the runs of the report and of
``json.load`` alternate, and "of json.load" is the median of each round's ratio (the machine is shared):
- ``report``: ``python -m common.report --json FILE -o /dev/null`` (load, model, rules, render);
- ``json.load``: a bare ``json.load`` of the same file (the floor a naive reader starts from).
The measured figures are in ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "tests" / "data" / "traces" / "hta" / "v100_ddp_rank1.json.gz"
DATA = REPO / "benchmarks" / "data"
BIG = DATA / "v100_ddp_rank1_x12.json"  # the default big input (--copies 12)

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
# events that describe the trace rather than happen in it: kept once, not repeated
_ONCE_PH = {"M"}


def _read(path: Path) -> dict:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return json.loads(data)


def repeat_trace(src: Path | str, copies: int, dst: Path | str) -> Path:
    """Write ``dst``: the trace ``src`` with its events repeated ``copies`` times back to back.

    Copy k (0-based) has every ``ts`` shifted by k times the original's extent (plus 1 ms), every
    ``args.correlation`` and flow ``id`` by k times (max correlation/id + 1), every
    ``External id`` (``external id`` in old traces) by k times (max + 1), and ``ProfilerStep#N``
    renamed ``ProfilerStep#(N + k * number of steps)``. Metadata (``ph: "M"``) events, the
    profiler's own span (``cat: "Trace"``) and global instant events are written once. With
    ``copies=1`` the output holds the same events as the input.
    """
    trace = _read(Path(src))
    events = trace["traceEvents"]
    once, repeated = [], []
    for e in events:
        if e.get("ph") in _ONCE_PH or e.get("cat") == "Trace" or e.get("s") == "g":
            once.append(e)
        else:
            repeated.append(e)

    t0 = min(e["ts"] for e in repeated if "ts" in e)
    t1 = max(e["ts"] + e.get("dur", 0) for e in repeated if "ts" in e)
    is_int = all(isinstance(e.get("ts", 0), int) for e in repeated)
    dt = (t1 - t0) + 1000
    corr_max = ext_max = 0
    steps = set()
    for e in repeated:
        a = e.get("args") or {}
        c = a.get("correlation")
        if isinstance(c, int):
            corr_max = max(corr_max, c)
        if isinstance(e.get("id"), int):
            corr_max = max(corr_max, e["id"])
        for k in ("External id", "external id"):
            if isinstance(a.get(k), int):
                ext_max = max(ext_max, a[k])
        m = _STEP.match(str(e.get("name", "")))
        if m:
            steps.add(int(m.group(1)))
    dcorr, dext = corr_max + 1, ext_max + 1
    nsteps = (max(steps) - min(steps) + 1) if steps else 0

    from common.output import writing  # the suite's one writer: whole or not at all, never through a link

    dst = Path(dst)
    enc = json.JSONEncoder(ensure_ascii=False)
    with writing([dst], what="the big input", make_folders=True) as (tmp,), open(tmp, "w", encoding="utf-8") as f:
        head = {k: v for k, v in trace.items() if k != "traceEvents"}
        f.write("{\n")
        for k, v in head.items():
            f.write(f"{json.dumps(k)}: {enc.encode(v)},\n")
        f.write('"traceEvents": [\n')
        first = True
        for e in once:
            f.write(("" if first else ",\n") + enc.encode(e))
            first = False
        for k in range(copies):
            for e in repeated:
                if k:
                    e = dict(e)
                    if "ts" in e:
                        e["ts"] = e["ts"] + k * dt if is_int else round(e["ts"] + k * dt, 3)
                    if isinstance(e.get("id"), int):
                        e["id"] += k * dcorr
                    a = e.get("args")
                    if a:
                        a = e["args"] = dict(a)
                        if isinstance(a.get("correlation"), int):
                            a["correlation"] += k * dcorr
                        for key in ("External id", "external id"):
                            if isinstance(a.get(key), int):
                                a[key] += k * dext
                    m = _STEP.match(str(e.get("name", "")))
                    if m:
                        e["name"] = f"ProfilerStep#{int(m.group(1)) + k * nsteps}"
                f.write(("" if first else ",\n") + enc.encode(e))
                first = False
        f.write("\n]\n}\n")
    return dst


# ----------------------------------------------------------------------------- measuring

_CHILD = r"""
import json, os, resource, subprocess, sys, tempfile, time
mode, path = sys.argv[1], sys.argv[2]
out = os.path.join(tempfile.mkdtemp(), "report.json")  # the report refuses to write to a device (/dev/null)
t = time.perf_counter()
if mode == "report":
    rc = subprocess.call([sys.executable, "-m", "common.report", "--json", path, "-o", out])
elif mode == "report-rich":
    with open(os.devnull, "w") as null:
        rc = subprocess.call([sys.executable, "-m", "common.report", path], stdout=null, env={**os.environ, "COLUMNS": "200"})
else:
    import gzip
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        json.load(f)
    rc = 0
wall = time.perf_counter() - t
who = resource.RUSAGE_CHILDREN if mode.startswith("report") else resource.RUSAGE_SELF
print(json.dumps({"rc": rc, "wall_s": wall, "peak_rss_mib": resource.getrusage(who).ru_maxrss / 1024}))
"""


def measure(mode: str, path: Path, code: Path = REPO) -> dict:
    """One run in a fresh process: wall seconds and peak RSS (MiB) of the process doing the work; ``code``:
    the checkout whose report runs (another commit's, unpacked with ``git archive``, to compare)."""
    out = subprocess.run([sys.executable, "-c", _CHILD, mode, str(path.resolve())], cwd=code, capture_output=True,
                         text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if r["rc"] != 0:
        raise SystemExit(f"error: the report failed on {path} (exit {r['rc']})")
    return r


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="runs per figure; the median is reported (default: 3)")
    p.add_argument("--copies", type=int, default=12, help="copies of the original in the big input (default: 12)")
    p.add_argument("--rebuild", action="store_true", help="rebuild the big input even if it exists")
    p.add_argument("--skip-json-load", action="store_true", help="do not measure the bare json.load baseline")
    p.add_argument("--big-only", action="store_true", help="measure the big input only, report --json and json.load")
    p.add_argument("--baseline", type=Path, action="append", default=[], help="also run the report of this checkout "
                   "(another commit, unpacked with git archive) on the same input, in the same minutes (repeatable)")
    args = p.parse_args(argv)
    if not SOURCE.exists():
        print(f"error: {SOURCE} not found", file=sys.stderr)
        return 2
    big = DATA / f"v100_ddp_rank1_x{args.copies}.json"
    if args.rebuild or not big.exists():
        t = time.perf_counter()
        print(f"building {big.relative_to(REPO)} ({args.copies} copies of {SOURCE.name}) ...", flush=True)
        repeat_trace(SOURCE, args.copies, big)
        print(f"  {big.stat().st_size / 1e6:,.0f} MB in {time.perf_counter() - t:.0f} s", flush=True)

    from rich.console import Console
    from rich.table import Table

    print(f"load average at the start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)", flush=True)
    modes = ("report",) + (("report-rich",) if not args.big_only else ()) + \
        (() if args.skip_json_load else ("json.load",))
    rows = []
    for label, path in ((f"big ({args.copies}x)", big),) + ((("original", SOURCE),) if not args.big_only else ()):
        size = big.stat().st_size if path == big else len(gzip.decompress(path.read_bytes()))
        runs = [(m, REPO) for m in modes] + [("report", b) for b in args.baseline]
        # the runs interleaved (report, json.load, report, json.load...): each ratio is of two runs minutes apart
        walls: dict = {run: [] for run in runs}
        for _ in range(args.runs):
            for run in runs:
                walls[run].append(measure(run[0], path, run[1]))
        for (mode, code), rs in walls.items():
            r = dict(wall_s=statistics.median(x["wall_s"] for x in rs),
                     peak_rss_mib=statistics.median(x["peak_rss_mib"] for x in rs), runs=[round(x["wall_s"], 2) for x in rs])
            load = walls.get(("json.load", REPO))
            r["share"] = statistics.median(x["wall_s"] / j["wall_s"] for x, j in zip(rs, load)) if load else None
            what = {"report": "report --json", "report-rich": "report (rich)", "json.load": "bare json.load"}[mode]
            what += f" ({code.name})" if code != REPO else ""
            rows.append((label, f"{size / 1e6:,.0f} MB", what, r))
            print(f"{label:10} {what:24} wall {r['wall_s']:.2f} s  peak RSS {r['peak_rss_mib']:,.0f} MiB  runs {r['runs']}"
                  + (f"  of json.load {r['share']:.3f}" if r["share"] is not None else ""), flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}", flush=True)
    t = Table(title=f"common.report benchmark (median of {args.runs} runs, {os.cpu_count()} CPUs)")
    for col in ("input", "JSON size", "what", "wall (s)", "of json.load", "peak RSS (MiB)"):
        t.add_column(col, justify="left" if col in ("input", "what") else "right")
    for label, size, what, r in rows:
        share = f"{r['share']:.3f}" if r["share"] is not None else "-"
        t.add_row(label, size, what, f"{r['wall_s']:.2f}", share, f"{r['peak_rss_mib']:,.0f}")
    Console().print(t)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
