"""The per-operator memory table, on the definitions of the PyTorch TensorBoard profiler plugin's Memory view.

A reader compares it with the plugin's table (it was removed upstream; screenshots and habits stay), so
it follows the plugin's algorithm, written here from its definitions (``torch_tb_profiler`` 0.4.3,
``profiler/memory_parser.py``, ``op_tree.py``); ``tests/test_memory.py`` checks it against the plugin's
own parser on the plugin's ResNet-50 sample.

- **The op tree** (per thread): the CPU ops (``cpu_op``/``Operator`` events) and the ProfilerSteps (and
  ``nccl:``/``gloo:`` annotations) nest by time on their thread; other user annotations, runtime calls
  and Python frames are not in it (what they enclose hangs from the op around them). An op whose only
  child has its own name (``aten::to`` inside ``aten::to``) is one node: the child's children become its
  own.
- **Attribution**: a ``[memory]`` event (an allocation, Bytes > 0, or a free, Bytes < 0) belongs to the
  innermost node of its own thread with start <= ts < end. Only operators keep events: one that falls
  directly in a ProfilerStep, a DataLoader ``__next__``, an ``Optimizer.*`` frame or
  ``(Distributed)DataParallel.forward``, or outside every node, is in no row. Note that a free counts
  where it happens, like an allocation (the plugin pairs a free with its allocation's op only in its
  list of memory events, not in this table).
- **Devices**: Device Type 0 is ``CPU``, 1 is ``GPU<Device Id>``; other device types are left out.
- **Columns**, per device and op name, summed over the op's nodes:

  - *calls*: the nodes of that name the plugin walks: those whose parent is a thread's root or contains at
    least one memory event of its thread (the plugin does not descend below a node without any);
  - *self size increase*: the Bytes of its own events (allocations less frees);
  - *self allocation count* and *self allocation size*: its own allocations, how many and their Bytes
    (frees not subtracted);
  - *size increase*, *allocation count*, *allocation size*: the same over the node and every node below
    it (through non-operator nodes too).

  A name is a row on a device when any of the six figures is not zero there. The whole trace counts (the
  plugin's view with no time range selected), not only the ProfilerStep window.

Where the plugin and the model see a thread differently (events that end after their parent: the model
cuts them at the parent's end, the plugin drops them; ``nn.Module`` frames of ``with_stack`` traces,
which the plugin makes nodes that keep no events) the figures can differ; no lesson's trace has either.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from common.report.model.memory_devices import device_codes
from common.report.model.build import ANNOTATION, OP, Model

NOT_OPERATORS = frozenset({"DataParallel.forward", "DistributedDataParallel.forward"})
COMMUNICATION_ANNOTATIONS = frozenset(f"{lib}:{op}" for lib in ("nccl", "gloo")
                                      for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter"))


@dataclass(frozen=True)
class OpMemoryRow:
    """One op name's memory figures on one device (bytes), the plugin's Memory view's row."""

    device: str  # "CPU", "GPU0"...
    name: str
    calls: int
    size_increase_bytes: int
    self_size_increase_bytes: int
    allocation_count: int
    self_allocation_count: int
    allocation_bytes: int
    self_allocation_bytes: int


def op_memory_table(m: Model, devices: tuple | None = None) -> tuple[OpMemoryRow, ...]:
    """The plugin's per-operator memory rows, every device, by self allocation size (then name); ``devices``:
    :func:`~common.report.model.memory_devices.device_codes` of the memory events, where already known."""
    mem, cpu = m.mem, m.cpu
    if not mem.n or not cpu.n:
        return ()
    names = m.names
    is_step = m.name_mask(lambda s: s.startswith("ProfilerStep#"))[cpu.name]
    is_comm = m.name_mask(lambda s: s in COMMUNICATION_ANNOTATIONS)[cpu.name]
    node = (cpu.kind == OP) | ((cpu.kind == ANNOTATION) & (is_step | is_comm))
    operator_type = (cpu.kind == OP) & ~is_step
    not_operator = m.name_mask(lambda s: s in NOT_OPERATORS or s.startswith("Optimizer.")
                               or (s.startswith("enumerate(DataLoader)#") and s.endswith(".__next__"))
                               or s.startswith("enumerate(DataPipe)#"))[cpu.name]
    operator = operator_type & ~not_operator
    parent = _node_parents(cpu.parent, node, cpu.max_depth)
    rep = _merged(parent, node, operator_type, cpu.name, cpu.depth)
    innermost = _innermost_nodes(m, node, parent)
    processed = _with_ancestors(innermost[innermost >= 0], parent, cpu.n)
    owner = np.where((innermost >= 0) & operator[np.maximum(innermost, 0)], rep[np.maximum(innermost, 0)], -1)
    codes, device_names = devices or device_codes(mem.device_type, mem.device_id)
    tree = _merged_tree(parent, rep, node, cpu.depth)
    rows = []
    for code, device in enumerate(device_names):
        on_device = codes == code
        rows += _device_rows(device, owner[on_device], mem.bytes[on_device], tree, operator, processed, cpu.name,
                             names)
    return tuple(sorted(rows, key=lambda r: (r.device, -r.self_allocation_bytes, r.name)))


def present(values: np.ndarray) -> np.ndarray:
    """The distinct values of an array of small non-negative integers (indices, depths, threads), sorted: one
    pass (``np.unique`` hashes or sorts)."""
    return np.flatnonzero(np.bincount(values)) if values.size else values.astype(np.int64)


def by_depth(idx: np.ndarray, depth: np.ndarray) -> list[np.ndarray]:
    """``idx`` (ascending) in groups of one depth each, shallowest first, each group in ascending order."""
    idx = idx[np.argsort(small_ints(depth[idx]), kind="stable")]
    return np.split(idx, np.flatnonzero(np.diff(depth[idx])) + 1) if idx.size else []


def small_ints(values: np.ndarray) -> np.ndarray:
    """Depths as int16 where they fit (numpy's stable sort of 16-bit integers is a radix sort, 5x faster)."""
    return values.astype(np.int16) if values.size and 0 <= values.min() and values.max() < 2**15 else values


def _node_parents(parent: np.ndarray, node: np.ndarray, max_depth: int) -> np.ndarray:
    """For each CPU event, its innermost ancestor that is a node of the op tree (-1: the thread's root)."""
    up = parent.copy()
    for _ in range(max_depth + 1):
        todo = (up >= 0) & ~node[np.maximum(up, 0)]
        if not todo.any():
            break
        up[todo] = parent[up[todo]]
    return up


def _merged(parent: np.ndarray, node: np.ndarray, operator_type: np.ndarray, name: np.ndarray,
            depth: np.ndarray) -> np.ndarray:
    """The node each node is one with: itself, or (an only child of its own name, both operators) its parent's."""
    rep = np.arange(parent.size)
    has_parent = node & (parent >= 0)
    children = np.bincount(parent[has_parent], minlength=parent.size)
    for c in by_depth(np.flatnonzero(has_parent), depth):  # parents before children
        p = parent[c]
        one = (children[p] == 1) & (name[c] == name[p]) & operator_type[c] & operator_type[p]
        rep[c[one]] = rep[p[one]]
    return rep


def _innermost_nodes(m: Model, node: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per memory event, the innermost node of its thread with start <= ts < end (-1: none)."""
    mem, cpu = m.mem, m.cpu
    out = np.full(mem.n, -1, dtype=np.int64)
    nodes = np.flatnonzero(node)  # in lane order: by thread, then start (longest first)
    for thread in present(mem.thread[mem.thread >= 0]).tolist():
        mine = nodes[cpu.thread[nodes] == thread]
        records = np.flatnonzero(mem.thread == thread)
        if not mine.size:
            continue
        at = np.searchsorted(cpu.ts[mine], mem.ts[records], side="right") - 1  # the last node starting by ts
        current = np.where(at >= 0, mine[np.maximum(at, 0)], -1)
        t = mem.ts[records]
        for _ in range(cpu.max_depth + 2):  # up while the node ended by ts
            todo = (current >= 0) & (cpu.end[np.maximum(current, 0)] <= t)
            if not todo.any():
                break
            current[todo] = parent[current[todo]]
        out[records] = current
    return out


def _with_ancestors(idx: np.ndarray, parent: np.ndarray, n: int) -> np.ndarray:
    """A mask of ``idx`` and every ancestor of theirs."""
    marked = np.zeros(n, dtype=bool)
    current = present(idx)
    while current.size:
        current = current[~marked[current]]
        marked[current] = True
        current = parent[current]
        current = current[current >= 0]
    return marked


@dataclass(frozen=True)
class _MergedTree:
    """The op tree once the only children of their name are merged: the same for every device."""

    standing: np.ndarray  # per CPU event: a node left once merged
    parent: np.ndarray  # per CPU event: its merged parent (-1: none)
    levels: list  # the standing nodes with a parent, one array per depth, deepest first


def _merged_tree(parent: np.ndarray, rep: np.ndarray, node: np.ndarray, depth: np.ndarray) -> _MergedTree:
    standing = node & (rep == np.arange(parent.size))
    merged_parent = np.where(parent >= 0, rep[np.maximum(parent, 0)], -1)
    return _MergedTree(standing, merged_parent, by_depth(np.flatnonzero(standing & (merged_parent >= 0)), depth)[::-1])


def _device_rows(device: str, owner: np.ndarray, nbytes: np.ndarray, tree: _MergedTree, operator: np.ndarray,
                 processed: np.ndarray, name: np.ndarray, names: tuple) -> list[OpMemoryRow]:
    """The device's rows. Only the nodes that hold an event or are above one carry figures (the others' are
    zero): they are numbered 0..k-1 in lane order (``held``), and every sum runs over them in that order."""
    merged_parent, standing = tree.parent, tree.standing
    kept = owner >= 0
    alloc = kept & (nbytes > 0)
    active = _with_ancestors(owner[kept], merged_parent, merged_parent.size)
    held = np.flatnonzero(active)
    at_owner = np.searchsorted(held, owner)
    own = np.stack([np.bincount(at_owner[kept], weights=nbytes[kept], minlength=held.size),
                    np.bincount(at_owner[alloc], minlength=held.size).astype(np.float64),
                    np.bincount(at_owner[alloc], weights=nbytes[alloc], minlength=held.size)])
    total = own.copy()
    for c in tree.levels:  # children, then parents
        c = c[active[c]]
        child, up = np.searchsorted(held, c), np.searchsorted(held, merged_parent[c])
        for figure in total:
            np.add.at(figure, up, figure[child])
    walked = standing & operator & ((merged_parent < 0) | processed[np.maximum(merged_parent, 0)])
    calls = np.bincount(name[walked], minlength=len(names))
    ops = np.flatnonzero(standing & operator & active)
    at_ops = np.searchsorted(held, ops)
    by_name = np.array([np.bincount(name[ops], weights=figure[at_ops], minlength=len(names))
                        for figure in (*own, *total)])  # self increase, count, size; the same with the children
    rows = []
    for k in np.flatnonzero((by_name != 0).any(axis=0)).tolist():
        inc, count, size, inc_all, count_all, size_all = by_name[:, k].tolist()
        rows.append(OpMemoryRow(device, names[k], int(calls[k]), int(inc_all), int(inc), int(count_all), int(count),
                                int(size_all), int(size)))
    return rows
