"""The memory view's cost against a bare ``json.load``, on a generated trace with many annotation calls.

    uv run benchmarks/bench_memory.py                 # 16,000 calls, about 40,000 [memory] events: the ratio
    uv run benchmarks/bench_memory.py --calls 64000   # four times the trace: the ratio should stay put

:func:`write_trace` writes a Kineto-like trace: ProfilerSteps on two threads, each holding annotation calls
(``fwd`` with a nested ``attn``, ``bwd``, ``opt``), ops under them, and ``[memory]`` events (allocations and
their frees, with addresses and the allocator's totals) on the CPU and on GPU0. :func:`time_ratio` times the
report's whole analysis (load, model, tables, rules: :func:`common.report.analyze`) against ``json.load`` of
the same file, both in this process, back to back in a few rounds, and returns the median round's report / json.load. A view that
scans every memory event once per annotation call makes that ratio grow with the trace (events x calls);
a linear one keeps it flat. ``tests/test_memory_speed.py`` runs the small size and fails above
:data:`MAX_RATIO`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

from versus_json_load import ratio_to_json_load

REPO = Path(__file__).resolve().parents[1]
CALLS = 16000
MAX_RATIO = 3.0  # report / json.load: the vectorised view stays near 1; a scan per call goes far above
GPU_MEMORY = 80 << 30


def write_trace(path: Path | str, calls: int = CALLS, seed: int = 0, events_per_op: int = 1, ops_per_call: int = 1) -> Path:
    """A trace with ``calls`` annotation calls (some of them ``attn`` inside ``fwd``), ``ops_per_call`` ops per
    call and ``events_per_op`` allocations per op (each freed two ops later), at random on the CPU or GPU0."""
    rng = random.Random(seed)
    events = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}]
    totals = {0: 0, 1: 0}
    reserved = {0: 0, 1: 0}
    live: list = []  # (address, bytes, device type) waiting for their free
    next_addr = [1 << 32]
    ts = [1000]

    def memory(tid: int, t: int, device: int, nbytes: int, addr: int) -> None:
        totals[device] += nbytes
        reserved[device] = max(reserved[device], totals[device])
        events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": tid,
                       "ts": t, "args": {"Device Type": device, "Device Id": 0 if device else -1, "Addr": addr,
                                         "Bytes": nbytes, "Total Allocated": totals[device],
                                         "Total Reserved": reserved[device]}})

    def op(tid: int, name: str) -> None:
        start = ts[0]
        for k in range(events_per_op):
            device = rng.randrange(2)
            size = rng.choice((512, 4096, 1 << 20, 3 << 20))
            memory(tid, start + 1 + k, device, size, next_addr[0])
            live.append((next_addr[0], size, device))
            next_addr[0] += size
        while len(live) > 2 * events_per_op:
            addr, size, device = live.pop(0)
            memory(tid, start + 1 + events_per_op, device, -size, addr)
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": start,
                       "dur": events_per_op + 3, "args": {}})
        ts[0] = start + events_per_op + 5

    def annotation(tid: int, name: str, body) -> None:
        start = ts[0]
        ts[0] += 1
        body()
        events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": tid, "ts": start,
                       "dur": ts[0] - start, "args": {}})
        ts[0] += 1

    steps = max(1, calls // 40)
    made = 0
    for step in range(steps):
        start = ts[0]
        tid = 1 + step % 2
        while made < calls * (step + 1) // steps:
            kind = made % 4
            names = [("aten::linear", "aten::bmm", "aten::softmax", "aten::mm", "aten::add", "aten::empty")[
                (made + k) % 6] for k in range(ops_per_call)]
            if kind == 0:
                annotation(tid, "fwd", lambda: (op(tid, "aten::linear"),
                                                annotation(tid, "attn", lambda: [op(tid, n) for n in names])))
                made += 2
            else:
                annotation(tid, ("bwd", "opt", "bwd")[kind - 1], lambda: [op(tid, n) for n in names])
                made += 1
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step + 2}", "pid": 1, "tid": tid,
                       "ts": start, "dur": ts[0] - start, "args": {}})
        ts[0] += 10
    trace = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "a GPU", "totalGlobalMem": GPU_MEMORY}],
             "traceEvents": events}
    path = Path(path)
    path.write_text(json.dumps(trace, separators=(",", ":")))
    return path


def time_ratio(path: Path | str, rounds: int = 3) -> tuple[float, float, float]:
    """(report / json.load, report seconds, json.load seconds): per round the two back to back in this process
    (so that both meet the same load on a shared machine), the median round's ratio and the best times."""
    from common.report import analyze

    return ratio_to_json_load(path, analyze, rounds)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=CALLS, help=f"annotation calls in the generated trace (default: {CALLS})")
    p.add_argument("--rounds", type=int, default=3, help="rounds of both, the median ratio is kept (default: 3)")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(Path(tmp) / "memory.json", args.calls)
        ratio, report_s, load_s = time_ratio(path, args.rounds)
        size = path.stat().st_size
    print(f"{args.calls:,} calls, {size / 1e6:.1f} MB: report {report_s:.2f} s, json.load {load_s:.2f} s, "
          f"ratio {ratio:.2f} (the suite fails above {MAX_RATIO})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
