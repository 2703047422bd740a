"""The model's two lanes: one numpy column per field, one row per event (``m.cpu.ts[i]``, ``m.dev.name[j]``).

:mod:`.build` fills every field of a lane at once, where it builds the lane (the step of each event
included); nothing writes into a lane after that. Times are microseconds relative to the window's
start; indices (``parent``, ``launch``, ``op``) point into the CPU lane, -1 where none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class CpuLane:
    """The CPU events, sorted by (thread, start, longest first), with their call tree."""

    n: int  # how many events
    kind: np.ndarray  # OP, ANNOTATION, RUNTIME or PYTHON (:mod:`.build`)
    ts: np.ndarray  # start
    dur: np.ndarray  # duration (cut at the parent's end where a clock glitch ran past it)
    end: np.ndarray  # ts + dur
    name: np.ndarray  # name id (into ``m.names``)
    thread: np.ndarray  # index into ``threads``
    corr: np.ndarray  # correlation id (-1: none)
    parent: np.ndarray  # the enclosing event on the same thread (-1: none)
    depth: np.ndarray  # how many events enclose it
    self_us: np.ndarray  # its duration less its children's
    threads: tuple  # distinct thread ids
    step: np.ndarray  # index of the step holding its start (-1: none)
    max_depth: int  # the deepest event's depth
    shapes: np.ndarray  # record_shapes' OpShapes (:mod:`~common.report.load.shapes`) of the roofline's and the memory ops


@dataclass(frozen=True, eq=False)
class DeviceLane:
    """The device events (kernels, memcpys, memsets) in trace order, with their launch, op and category."""

    n: int  # how many events
    kind: np.ndarray  # KERNEL, MEMCPY or MEMSET (:mod:`.build`)
    ts: np.ndarray  # start
    dur: np.ndarray  # duration
    end: np.ndarray  # ts + dur
    name: np.ndarray  # name id (into ``m.names``)
    corr: np.ndarray  # correlation id (-1: none)
    device: np.ndarray  # the device (the pid in Kineto traces)
    stream: tuple  # the stream (the tid)
    blocks: np.ndarray  # product of the grid dimensions (nan: not given)
    bps: np.ndarray  # the "blocks per SM" argument
    threads: np.ndarray  # threads per block (nan: not given)
    occ: np.ndarray  # the "est. achieved occupancy %" argument
    regs: np.ndarray  # registers per thread
    smem: np.ndarray  # shared memory
    bytes: np.ndarray  # bytes moved (memcpy, memset)
    launch: np.ndarray  # the CPU runtime call with the same correlation id (-1: none)
    op: np.ndarray  # the op (else annotation) around that launch (-1: none)
    category: np.ndarray  # code in ``model.CATEGORY_CODES``
    step: np.ndarray  # index of the step holding its launch (-1: none; its start's where the trace correlates nothing)
    outside: np.ndarray  # launched outside the trace: its correlation id matches none of the trace's runtime calls
    blocks_per_sm: np.ndarray  # grid blocks over the device's SM count, else the "blocks per SM" argument


@dataclass(frozen=True, eq=False)
class MemoryLane:
    """The ``[memory]`` instant events (``profile_memory=True``), sorted by time (stable): one allocation
    (``bytes`` > 0) or free (``bytes`` < 0) each. NaN where the trace lacks a field (traces before
    PyTorch 1.10 carry neither the totals nor the address)."""

    n: int  # how many events
    ts: np.ndarray  # when
    thread: np.ndarray  # index into the CPU lane's ``threads`` (-1: a thread with no CPU event)
    device_type: np.ndarray  # 0 CPU, 1 CUDA (the profiler's DeviceType; others are left out of every figure)
    device_id: np.ndarray  # -1 for the CPU, the GPU's index
    bytes: np.ndarray  # > 0 an allocation, < 0 a free
    total_allocated: np.ndarray  # the allocator's bytes in use after it
    total_reserved: np.ndarray  # the caching allocator's bytes reserved after it
    addr: np.ndarray  # the block's address
