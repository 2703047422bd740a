"""Run the TensorBoard profiler plugin's own memory parser on traces; print its figures as JSON.

    uv run --no-project --with torch-tb-profiler==0.4.3 python tests/tb_plugin_memory.py TRACE [TRACE ...]

For each trace: the plugin's Memory view table (``MemorySnapshot.get_memory_statistics``, whole trace),
per device and op name: [self size increase, self allocation size, self allocation count, size increase,
allocation size, allocation count, calls] in bytes; its peaks (``get_peak_memory``: Total Allocated only)
and how many memory records it read. tests/test_memory.py runs it (when uv can install the plugin) and
kept its output for the ResNet-50 sample in data/traces/kineto/v100_resnet50_train.tb_memory.json.
"""

import json
import sys
import tempfile

from torch_tb_profiler.profiler.data import RunProfileData


def figures(path: str) -> dict:
    data = RunProfileData.parse("worker", "span", path, tempfile.mkdtemp())
    snapshot = data.memory_snapshot
    if snapshot is None:
        return dict(records=0, peaks={}, stats={})
    stats = snapshot.get_memory_statistics(data.tid2tree)
    return dict(records=len(snapshot.memory_records),
                peaks={("CPU" if t == 0 else f"GPU{i}"): v for (t, i), v in snapshot.get_peak_memory().items()},
                stats={device: dict(ops) for device, ops in stats.items()})


if __name__ == "__main__":
    print(json.dumps({p: figures(p) for p in sys.argv[1:]}))
