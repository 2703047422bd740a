"""Columns: decoded events -> numpy arrays, the one shape both the loader and the model read.

The loader decodes complete events into small structs; :func:`extract` turns a list of them into
:class:`Columns` in a handful of C-level passes (no Python loop per event except to pull fields
out). A big file is extracted a slice at a time (in two processes on the command line) and
:func:`merge` joins the slices' columns.
This module holds the trace categories (the one vocabulary the report reads them by) and the
names of collectives' events; it knows nothing of steps, trees or rules.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from itertools import chain, compress, count, repeat
from operator import attrgetter, is_not
from types import SimpleNamespace
from typing import Optional

import numpy as np

from common.printable import printable
from common.report.load.shapes import OpShapes, message_bytes, nccl_message_bytes, wants_shapes

KERNEL_CATS = frozenset({"kernel", "Kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "Memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "Memset"})
RUNTIME_CATS = frozenset({"cuda_runtime", "Runtime", "cuda_driver", "Driver", "hip_runtime", "privateuse1_runtime"})
OP_CATS = frozenset({"cpu_op", "Operator"})
ANNOTATION_CATS = frozenset({"user_annotation"})
PYTHON_CATS = frozenset({"python_function", "Python"})
GPU_ANNOTATION_CATS = frozenset({"gpu_user_annotation", "GPU_USER_ANNOTATION"})
OVERHEAD_CATS = frozenset({"overhead", "Overhead"})

CPU_COLLECTIVE_PREFIXES = ("gloo:",)  # a CPU backend's collective, timed on the backend's worker thread
GPU_COLLECTIVE_PREFIXES = ("nccl:",)  # the CPU-side annotation around a NCCL collective's launch
NCCL_KERNEL_PREFIX = "nccl"  # ncclKernel_AllReduce_..., ncclDevKernel_...


class Group:
    """The category family of an event. CPU lanes are OP..PYTHON, device work KERNEL..MEMSET (in
    this order: the model relies on both ranges)."""

    OP, ANNOTATION, RUNTIME, PYTHON, KERNEL, MEMCPY, MEMSET, GPU_ANNOTATION, OVERHEAD, TRACE, OTHER = range(11)


@dataclass(frozen=True)
class CollectiveEvent:
    """A collective's CPU-side event: a CPU backend's own (``gloo:all_reduce``, on the backend's worker
    thread), or the annotation around a NCCL collective's launch (``nccl:all_reduce``)."""

    name: str
    ts: float  # µs, absolute
    dur: float  # µs (never negative)
    tid: object  # its thread, as the CPU events' ``threads`` hold it
    finished: bool  # False: still running when the profiler stopped (gloo says so), so its end is unknown
    bytes: Optional[int]  # the message, from record_shapes' Input Dims and Input type; None when not given


class _GroupOfCategory(dict):
    def __missing__(self, key):
        return Group.OTHER


GROUP_OF_CATEGORY = _GroupOfCategory()
for _cats, _group in ((OP_CATS, Group.OP), (ANNOTATION_CATS, Group.ANNOTATION), (RUNTIME_CATS, Group.RUNTIME),
                      (PYTHON_CATS, Group.PYTHON), (KERNEL_CATS, Group.KERNEL), (MEMCPY_CATS, Group.MEMCPY),
                      (MEMSET_CATS, Group.MEMSET), (GPU_ANNOTATION_CATS, Group.GPU_ANNOTATION),
                      (OVERHEAD_CATS, Group.OVERHEAD), ({"Trace"}, Group.TRACE)):
    for _cat in _cats:
        GROUP_OF_CATEGORY[_cat] = _group

MEMORY_FIELDS = ("ts", "device_type", "device_id", "bytes", "total_allocated", "total_reserved", "addr")
LAUNCH_ARGS = ("correlation", "grid", "block", "registers", "shared_memory", "blocks_per_sm", "occupancy", "bytes")
EXACT_ID_LIMIT = 2 ** 53  # ids beyond this are not exact in float64 (and no profiler writes them)


@dataclass
class Columns:
    """Every decoded complete event, as columns.

    ``group``, ``ts``, ``dur`` and ``name`` have one row per event. ``thread`` and ``corr`` have one
    row per CPU event (group OP..PYTHON, in event order); the ``dev_*`` columns one row per device
    event (KERNEL..MEMSET, in event order). NaN (or -1 for ids) where an event lacks the field.
    """

    group: np.ndarray  # int8, a Group per event
    ts: np.ndarray  # µs, absolute
    dur: np.ndarray  # µs
    name: np.ndarray  # index into names
    names: list  # distinct event names, in order of first appearance
    thread: np.ndarray  # CPU events: index into threads
    threads: list  # distinct CPU thread ids (OS thread ids are unique across the processes of one trace)
    corr: np.ndarray  # CPU events: the correlation id of runtime calls, -1 for the others
    op_shapes: np.ndarray  # CPU events: record_shapes' OpShapes of the roofline's and memory ops (:mod:`.shapes`)
    dev_corr: np.ndarray  # device events: correlation id (-1: none)
    dev_device: np.ndarray  # device events: the pid (the device index in Kineto traces)
    dev_stream: list  # device events: the tid (the stream)
    dev_blocks: np.ndarray  # product of the grid dimensions
    dev_blocks_per_sm: np.ndarray  # the "blocks per SM" argument
    dev_threads: np.ndarray  # threads per block: product of the block dimensions
    dev_occupancy: np.ndarray  # the "est. achieved occupancy %" argument
    dev_registers: np.ndarray
    dev_shared_memory: np.ndarray
    dev_bytes: np.ndarray
    gpu_annotations: list  # (name, ts, dur) of GPU-lane annotations
    overheads: list  # (name, ts, dur, pid, tid) of the profiler's own overhead events
    memory: np.ndarray  # per [memory] instant event, in trace order, its MEMORY_FIELDS as floats (NaN where absent)
    memory_tids: list  # per [memory] instant event, its tid as written
    collectives: list  # CollectiveEvent per collective's CPU-side event (gloo:*, nccl:*), in trace order
    dev_msg_bytes: np.ndarray  # device events: a NCCL kernel's message bytes from its own args (NaN: not given)
    ids_out_of_range: int = 0  # correlation ids or pids that are not integers below EXACT_ID_LIMIT

    @property
    def cpu_rows(self) -> np.ndarray:
        """Indices (into the per-event columns) of the CPU events."""
        return np.flatnonzero(self.group <= Group.PYTHON)

    @property
    def device_rows(self) -> np.ndarray:
        """Indices (into the per-event columns) of the device events."""
        return np.flatnonzero((self.group >= Group.KERNEL) & (self.group <= Group.MEMSET))


def factorize(values, size: Optional[int] = None) -> tuple[np.ndarray, list]:
    """(ids, uniques): ``uniques[ids[i]] == values[i]``, uniques in order of first appearance. One pass
    over ``values`` (a sequence, or an iterable of ``size`` values): each value's first position, then those
    positions made dense."""
    size = len(values) if size is None else size
    index: dict = {}
    first = np.fromiter(map(index.setdefault, values, count()), np.int64, size)
    dense = np.empty(size, dtype=np.int64)
    dense[np.fromiter(index.values(), np.int64, len(index))] = np.arange(len(index))
    return dense[first], list(index)


def printable_keys(ids: np.ndarray, uniques: list) -> tuple[np.ndarray, list]:
    """``factorize``'s result with every string key :func:`~common.printable.printable` (names are data:
    a control character in one is shown escaped by every renderer); keys that become equal merge."""
    shown = [_printable_id(key) for key in uniques]
    if shown == uniques:
        return ids, uniques
    where, merged = factorize(shown)
    return where[ids] if ids.size else ids, merged


def _printable_id(value):
    return printable(value) if isinstance(value, str) else value


def id_array(values, default: int = -1) -> tuple[np.ndarray, int]:
    """Integer ids from a list that may hold None, strings or odd values (-> ``default``), and how
    many were numbers too large to be ids (beyond ``EXACT_ID_LIMIT``, also -> ``default``)."""
    if set(map(type, values)) <= {int}:  # the common case: integers, read as such (faster than as floats)
        try:
            as_int = np.fromiter(values, np.int64, len(values))
        except OverflowError:
            as_int = None
        if as_int is not None:
            usable = (as_int > -EXACT_ID_LIMIT) & (as_int < EXACT_ID_LIMIT)  # (np.abs of int64's least is negative)
            return np.where(usable, as_int, default), int((~usable).sum())
    as_float = float_array(values)  # None -> NaN
    usable = np.isfinite(as_float) & (np.abs(as_float) < EXACT_ID_LIMIT)
    too_large = int((np.isinf(as_float) | (np.isfinite(as_float) & ~usable)).sum())
    ids = np.full(as_float.size, default, dtype=np.int64)
    ids[usable] = as_float[usable].astype(np.int64)
    return ids, too_large


def float_array(values) -> np.ndarray:
    """Floats from a sequence that may hold None or odd values (both -> NaN)."""
    try:
        return np.fromiter(values, np.float64, len(values))  # None -> NaN, as np.array does
    except (TypeError, ValueError, OverflowError):
        return np.array([_number_or_nan(v) for v in values], dtype=np.float64)


def _number_or_nan(value) -> float:
    """A number, or a string that spells one, as a float; NaN for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return float("nan")
    try:
        return float(value)
    except OverflowError:  # an integer too large for a float
        return float("inf")
    except ValueError:  # a string that is not a number
        return float("nan")


def grid_product(values) -> np.ndarray:
    """Product of grid dimensions ([x, y, z]) per event: the blocks launched; NaN where absent or odd."""
    kinds = set(map(type, values))
    if kinds <= {list, type(None)}:  # the common case, in a few C passes: triples of numbers, or None
        given = np.fromiter(map(is_not, values, repeat(None)), bool, len(values)) if type(None) in kinds else None
        triples = values if given is None else list(compress(values, given))
        product = _triples_product(triples)
        if product is not None:
            if given is None:
                return product
            out = np.full(len(values), np.nan)
            out[given] = product
            return out
    return _grid_product_slowly(values)


def _triples_product(values: list) -> Optional[np.ndarray]:
    """x * y * z of each [x, y, z] of integers; None where one is not a triple of integers, or a product is
    beyond exact floats (the general path then says what each is)."""
    if not set(map(len, values)) <= {3}:
        return None
    flat = list(chain.from_iterable(values))
    if not set(map(type, flat)) <= {int}:
        return None
    try:
        dims = np.fromiter(flat, np.int64, len(flat)).reshape(-1, 3).astype(np.float64)  # (from ints: fast)
    except OverflowError:
        return None
    product = dims[:, 0] * dims[:, 1] * dims[:, 2]
    exact = (np.abs(dims) < EXACT_ID_LIMIT).all() and (np.abs(product) < EXACT_ID_LIMIT).all()
    return product if exact else None


def _grid_product_slowly(values) -> np.ndarray:
    try:
        return np.array([(v[0] * v[1] * v[2] if v.__class__ is list and len(v) == 3 else None) for v in values],
                        dtype=np.float64)
    except (TypeError, ValueError, IndexError, OverflowError):
        out = np.full(len(values), np.nan)
        for i, dims in enumerate(values):
            if isinstance(dims, list) and dims and all(not isinstance(d, bool) and isinstance(d, (int, float))
                                                       for d in dims):
                out[i] = float(np.prod(np.array(dims, dtype=np.float64)))
        return out


def extract(events: list, memory: list = ()) -> Columns:
    """Columns from decoded complete events (structs with name, cat, ts, dur, pid, tid, args) and
    ``[memory]`` instant events (ts, tid, args with bytes, totals, addr, device)."""
    n = len(events)
    group = np.fromiter(map(GROUP_OF_CATEGORY.__getitem__, map(attrgetter("cat"), events)), np.int8, n)
    name, names = printable_keys(*factorize(map(attrgetter("name"), events), n))
    on_cpu = group <= Group.PYTHON
    on_device = (group >= Group.KERNEL) & (group <= Group.MEMSET)
    cpu = _cpu_columns(_pick(events, on_cpu), group[on_cpu], name[on_cpu], names)
    device_events = _pick(events, on_device)
    device = _device_columns(device_events)
    bad_ids = cpu.pop("bad_ids") + device.pop("bad_ids")
    return Columns(
        group=group, ts=np.fromiter(map(attrgetter("ts"), events), np.float64, n),
        dur=np.fromiter(map(attrgetter("dur"), events), np.float64, n), name=name, names=names,
        **cpu, **device,
        gpu_annotations=[(printable(e.name), e.ts, e.dur) for e in _pick(events, group == Group.GPU_ANNOTATION)],
        overheads=[(printable(e.name), e.ts, e.dur, _printable_id(e.pid), _printable_id(e.tid))
                   for e in _pick(events, group == Group.OVERHEAD)],
        **_memory_columns(memory),
        collectives=_collective_events(events, group, name, names),
        dev_msg_bytes=_nccl_kernel_bytes(device_events, group[on_device], name[on_device], names),
        ids_out_of_range=bad_ids,
    )


def _pick(events: list, rows: np.ndarray) -> list:
    """The events where the boolean ``rows`` holds, in order (a few: by index; many: in one C pass)."""
    where = np.flatnonzero(rows)
    if where.size < len(events) // 16:
        return list(map(events.__getitem__, where.tolist()))
    return list(compress(events, rows.tolist()))


def _cpu_columns(cpu_events: list, group: np.ndarray, name: np.ndarray, names: list) -> dict:
    """The columns of the CPU events: thread, corr (runtime calls'), op_shapes; ``bad_ids``: ids out of range."""
    thread, threads = printable_keys(*factorize(map(attrgetter("tid"), cpu_events), len(cpu_events)))
    corr = np.full(len(cpu_events), -1, dtype=np.int64)
    runtime = group == Group.RUNTIME
    corr[runtime], bad_ids = id_array(_args_field(_pick(cpu_events, runtime), "correlation"))
    return dict(thread=thread, threads=threads, corr=corr, op_shapes=_op_shapes(cpu_events, name, group, names),
                bad_ids=bad_ids)


def _device_columns(device_events: list) -> dict:
    """The ``dev_*`` columns but dev_msg_bytes, from the events' pid, tid and launch arguments, a pass per field."""
    args = list(map(attrgetter("args"), device_events))
    if type(None) in set(map(type, args)):
        args = [_NO_ARGS if a is None else a for a in args]

    def arg(field: str) -> list:
        return list(map(attrgetter(field), args))

    dev_corr, bad_corr = id_array(arg("correlation"))
    dev_device, bad_device = id_array(list(map(attrgetter("pid"), device_events)))
    streams = list(map(attrgetter("tid"), device_events))
    return dict(
        dev_corr=dev_corr, dev_device=dev_device,
        dev_stream=streams if set(map(type, streams)) <= {int} else list(map(_printable_id, streams)),
        dev_blocks=grid_product(arg("grid")), dev_blocks_per_sm=float_array(arg("blocks_per_sm")),
        dev_threads=grid_product(arg("block")), dev_occupancy=float_array(arg("occupancy")),
        dev_registers=float_array(arg("registers")), dev_shared_memory=float_array(arg("shared_memory")),
        dev_bytes=float_array(arg("bytes")), bad_ids=bad_corr + bad_device)


_NAN = float("nan")


def _memory_columns(memory: list) -> dict:
    """``memory``: the [memory] events' MEMORY_FIELDS, an (events, fields) array of floats (NaN where absent),
    read in a pass per field; ``memory_tids``: their tids as written."""
    args = list(map(attrgetter("args"), memory))
    if args.count(None):
        args = [_NO_MEMORY_ARGS if a is None else a for a in args]
    table = np.empty((len(memory), len(MEMORY_FIELDS)))
    table[:, 0] = _floats(memory, "ts")
    for j, field in enumerate(MEMORY_FIELDS[1:], start=1):
        table[:, j] = _floats(args, field)
    return dict(memory=table, memory_tids=list(map(attrgetter("tid"), memory)))


_NO_MEMORY_ARGS = SimpleNamespace(**dict.fromkeys(MEMORY_FIELDS[1:]))


def _floats(items: list, field: str) -> np.ndarray:
    """The ``field`` of each item as a float (None: NaN; an integer beyond every float: an infinity of its sign)."""
    try:
        return np.fromiter(map(attrgetter(field), items), np.float64, len(items))
    except (TypeError, OverflowError):  # a None, or an integer beyond every float
        values = list(map(attrgetter(field), items))
    try:
        return np.array(values, dtype=np.float64)
    except OverflowError:
        return np.array([_NAN if v is None else float(v) if abs(v) < 1e308 else float("inf") * (1 if v > 0 else -1)
                         for v in values], dtype=np.float64)


def _named(names: list, prefixes) -> np.ndarray:
    """Per distinct name, whether it starts with one of ``prefixes``."""
    return np.fromiter((n.startswith(prefixes) for n in names), bool, len(names))


def _collective_events(events: list, group: np.ndarray, name: np.ndarray, names: list) -> list:
    """The CollectiveEvent of every event named ``gloo:*`` (any category) and of every ``nccl:*``
    annotation with args (not a kernel's or a runtime call's name)."""
    out = []
    for i in np.flatnonzero(_named(names, CPU_COLLECTIVE_PREFIXES + GPU_COLLECTIVE_PREFIXES)[name]).tolist():
        e, a = events[i], events[i].args
        on_cpu_backend = e.name.startswith(CPU_COLLECTIVE_PREFIXES)
        if not on_cpu_backend and (a is None or group[i] in (Group.KERNEL, Group.RUNTIME)):
            continue
        out.append(CollectiveEvent(names[name[i]], e.ts, max(e.dur, 0.0), _printable_id(e.tid),
                                   not (a is not None and a.finished is False),
                                   message_bytes(a.input_dims, a.input_type) if a is not None else None))
    return out


def _nccl_kernel_bytes(device_events: list, group: np.ndarray, name: np.ndarray, names: list) -> np.ndarray:
    """Per device event, a NCCL kernel's message bytes from its ``In msg nelems`` and ``dtype`` (NaN elsewhere)."""
    out = np.full(len(device_events), np.nan)
    for i in np.flatnonzero(_named(names, NCCL_KERNEL_PREFIX)[name] & (group == Group.KERNEL)).tolist():
        a = device_events[i].args
        size = nccl_message_bytes(a.msg_nelems, a.msg_dtype) if a is not None else None
        if size is not None:
            out[i] = size
    return out


def _op_shapes(cpu_events: list, name: np.ndarray, group: np.ndarray, names: list) -> np.ndarray:
    """Per CPU event, the OpShapes of an op the roofline counts or a memory op (None for every other event)."""
    out = np.full(len(cpu_events), None, dtype=object)
    wanted = np.fromiter((wants_shapes(n) for n in names), bool, len(names))
    for i in np.flatnonzero(wanted[name] & (group == Group.OP)).tolist() if len(names) else ():
        args = cpu_events[i].args
        if args is not None:
            out[i] = OpShapes.of(args.input_dims, args.input_type, args.concrete_inputs)
    return out


def _args_field(events, keys) -> list:
    """Per event, its ``args``' field ``keys`` (a name: the value; a tuple of names: a tuple); None where the
    event has no args."""
    args = list(map(attrgetter("args"), events))
    if args.count(None):
        args = [_NO_ARGS if a is None else a for a in args]
    return list(map(attrgetter(*keys) if isinstance(keys, tuple) else attrgetter(keys), args))


_NO_ARGS = SimpleNamespace(**dict.fromkeys(LAUNCH_ARGS))


def _remap(keys: list, index: dict, more: list) -> np.ndarray:
    """Append to ``keys`` (``index``: key -> its place) the keys of ``more`` it lacks; where each of
    ``more``'s keys went."""
    where = np.empty(len(more), dtype=np.int64)
    for j, key in enumerate(more):
        i = index.get(key)
        if i is None:
            i = index[key] = len(keys)
            keys.append(key)
        where[j] = i
    return where


def merge(*parts: Columns) -> Columns:
    """Columns of consecutive slices of one trace, as if extracted at once (each column joined once)."""
    names, threads, name_index, thread_index = [], [], {}, {}
    pieces = {f.name: [] for f in fields(Columns)}
    for part in parts:
        name_of = _remap(names, name_index, part.names)
        thread_of = _remap(threads, thread_index, part.threads)
        for f in fields(Columns):
            value = getattr(part, f.name)
            if f.name == "name" and value.size:
                value = name_of[value]
            elif f.name == "thread" and value.size:
                value = thread_of[value]
            pieces[f.name].append(value)
    joined = {}
    for name, values in pieces.items():
        if isinstance(values[0], np.ndarray):
            joined[name] = np.concatenate(values)
        elif isinstance(values[0], list):
            joined[name] = list(chain.from_iterable(values))
        else:
            joined[name] = sum(values)  # the counts
    joined["names"], joined["threads"] = names, threads
    return Columns(**joined)
