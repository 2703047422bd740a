"""The loader's cost against a bare ``json.load``, on a generated Kineto-like trace.

    uv run benchmarks/bench_load.py                # 4,000 steps' worth of events (about 150,000): the ratio
    uv run benchmarks/bench_load.py --steps 16000  # four times the trace: the ratio should stay put

:func:`write_trace` writes what ``torch.profiler`` writes for a training loop on one GPU, one event per
line: per step a ProfilerStep annotation, ops on the main thread (some with record_shapes' lists), a runtime
launch under each with its kernel (grid, block, registers, occupancy...) or memcpy on the GPU, the flow
arrows between them (``s``/``f``) and CPU instant events. :func:`time_ratio` times
:func:`common.report.load.reader.load` (read, decode, columns; one process) against ``json.load`` of the same
file, back to back in this process in a few rounds, and returns the median round's ratio: both meet the same
load on a shared machine, so the ratio holds where seconds do not. ``tests/test_load_speed.py`` runs it
whole and a slice at a time, and fails above :data:`MAX_RATIO`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from versus_json_load import ratio_to_json_load

REPO = Path(__file__).resolve().parents[1]
STEPS = 4000
MAX_RATIO = 1.0  # load / json.load: about 0.25-0.35 here; a loader three times slower, or quadratic, fails
OPS = ("aten::linear", "aten::mm", "aten::add", "aten::relu", "aten::copy_", "aten::sum")


def _step_events(step: int, t: int, corr: int) -> tuple[list, int, int]:
    """The events of one step starting at ``t`` (µs), correlation ids from ``corr``: (events, end, next corr)."""
    pid, tid = 4242, 4243
    events = []
    start = t
    for k, op in enumerate(OPS):
        args = {"External id": corr, "Record function id": 0, "Sequence number": step * 8 + k}
        if op == "aten::mm":
            args.update({"Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"],
                         "Input Strides": [[128, 1], [256, 1]], "Concrete Inputs": ["", ""]})
        events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": pid, "tid": tid, "ts": t, "dur": 20, "args": args})
        launch = "cudaMemcpyAsync" if op == "aten::copy_" else "cudaLaunchKernel"
        events.append({"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": pid, "tid": tid, "ts": t + 5, "dur": 8,
                       "args": {"External id": corr, "cbid": 211, "correlation": corr}})
        gpu = {"External id": corr, "device": 0, "context": 1, "stream": 7, "correlation": corr}
        if op == "aten::copy_":
            events.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7,
                           "ts": t + 30, "dur": 4, "args": {**gpu, "bytes": 1 << 20, "memory bandwidth (GB/s)": 300.5}})
        else:
            events.append({"ph": "X", "cat": "kernel", "name": f"void {op[6:]}_kernel<float, 4>(float*, float const*, int)",
                           "pid": 0, "tid": 7, "ts": t + 30, "dur": 12,
                           "args": {**gpu, "queued": 0, "registers per thread": 32, "shared memory": 4096,
                                    "blocks per SM": 1.5, "warps per SM": 6.0, "grid": [128 + k, 1, 1],
                                    "block": [256, 1, 1], "est. achieved occupancy %": 50}})
        events.append({"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": t + 5, "cat": "ac2g", "name": "ac2g"})
        events.append({"ph": "f", "id": corr, "pid": 0, "tid": 7, "ts": t + 30, "cat": "ac2g", "name": "ac2g", "bp": "e"})
        events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "record_param_comms", "pid": pid,
                       "tid": tid, "ts": t + 15, "args": {"Collective name": "", "dtype": "Float"}})
        t += 25
        corr += 1
    events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": pid, "tid": tid,
                   "ts": start, "dur": t - start, "args": {"External id": corr}})
    return events, t + 10, corr + 1


def write_trace(path: Path | str, steps: int = STEPS) -> Path:
    """A Kineto-like trace of ``steps`` steps (37 events each), one event per line as Kineto writes it."""
    events, t, corr = [], 1_700_000_000_000_000, 1
    for step in range(steps):
        more, t, corr = _step_events(step, t, corr)
        events += more
    head = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "a GPU", "totalGlobalMem": 80 << 30,
                                                      "numSms": 132}]}
    path = Path(path)
    with open(path, "w") as f:
        f.write("{\n" + "".join(f"{json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items()))
        f.write('"traceEvents": [\n' + ",\n".join(map(json.dumps, events)) + "\n]\n}\n")
    return path


def time_ratio(path: Path | str, rounds: int = 5) -> tuple[float, float, float]:
    """(load / json.load, load seconds, json.load seconds): per round the two back to back in this process,
    the median round's ratio and the best times."""
    from common.report.load.reader import load

    return ratio_to_json_load(path, load, rounds)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=STEPS, help=f"steps in the generated trace (default: {STEPS})")
    p.add_argument("--rounds", type=int, default=5, help="rounds of both, the median ratio is kept (default: 5)")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory() as tmp:
        path = write_trace(Path(tmp) / "load.json", args.steps)
        ratio, load_s, json_s = time_ratio(path, args.rounds)
        size = path.stat().st_size
    print(f"{args.steps:,} steps, {size / 1e6:.1f} MB: load {load_s:.2f} s, json.load {json_s:.2f} s, "
          f"ratio {ratio:.2f} (the suite fails above {MAX_RATIO})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
