"""Events: the msgspec structs a trace's events decode into, the decoders of one decode, and the complete
and ``[memory]`` events picked out of a decoded list.

Complete events (``ph: "X"``, and ``B``/``E`` pairs turned into complete events) are kept with their name,
category, time, thread and a handful of ``args``; ``[memory]`` instant events (``ph: "i"``, written with
``profile_memory=True``) with bytes, totals, address and device; every other phase (flow arrows, metadata)
decodes into an empty struct whose fields msgspec skips. Nothing here reads bytes or makes columns.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import msgspec
from msgspec import Struct

MEMORY_EVENT_NAME = "[memory]"  # the instant events profile_memory=True writes

Number = Union[int, float, None]
IdOrText = Union[int, str, None]


class Args(Struct, gc=False):
    """The event ``args`` we read; unknown keys are skipped by the decoder."""

    correlation: IdOrText = None
    grid: Optional[list] = None
    block: Optional[list] = None
    registers: Number = msgspec.field(default=None, name="registers per thread")
    shared_memory: Number = msgspec.field(default=None, name="shared memory")
    blocks_per_sm: Number = msgspec.field(default=None, name="blocks per SM")
    occupancy: Number = msgspec.field(default=None, name="est. achieved occupancy %")
    bytes: Union[int, float, str, None] = None
    # record_shapes' lists (:mod:`.shapes`; the columns keep them only for the roofline's ops)
    input_dims: Any = msgspec.field(default=None, name="Input Dims")
    input_type: Any = msgspec.field(default=None, name="Input type")
    concrete_inputs: Any = msgspec.field(default=None, name="Concrete Inputs")
    # collectives (:func:`.columns._collective_events`): a CPU backend's event still running
    # when the profiler stopped (``finished: false``), and a NCCL kernel's message (elements, their dtype)
    finished: Any = None
    msg_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    msg_dtype: Any = msgspec.field(default=None, name="dtype")


class CompleteEvent(Struct, tag_field="ph", tag="X", gc=False):
    """A complete event (``ph: "X"``): the only kind the model reads."""

    name: str = ""
    cat: str = ""
    ts: float = 0.0
    dur: float = 0.0
    pid: Union[int, str] = 0
    tid: Union[int, str] = 0
    args: Optional[Args] = None


class MemoryArgs(Struct, gc=False):
    """The ``args`` of a ``[memory]`` instant event (``profile_memory=True``): what one allocation (Bytes > 0)
    or free (Bytes < 0) did, and, in traces since PyTorch 1.10, the allocator's totals after it and the address."""

    bytes: Number = msgspec.field(default=None, name="Bytes")
    total_allocated: Number = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Number = msgspec.field(default=None, name="Total Reserved")
    addr: Number = msgspec.field(default=None, name="Addr")
    device_type: Number = msgspec.field(default=None, name="Device Type")
    device_id: Number = msgspec.field(default=None, name="Device Id")


class InstantEvent(Struct, tag_field="ph", tag="i", gc=False):
    """An instant event (``ph: "i"``): the model reads those named ``[memory]``."""

    name: str = ""
    ts: float = 0.0
    tid: Union[int, str] = 0
    args: Optional[MemoryArgs] = None


class EndEvent(Struct, tag_field="ph", tag="E", gc=False):
    """The end of a ``B`` event on its thread."""

    ts: float = 0.0
    pid: Union[int, str] = 0
    tid: Union[int, str] = 0


_BEGIN_FIELDS = [("name", str, ""), ("cat", str, ""), ("ts", float, 0.0), ("pid", Union[int, str], 0),
                 ("tid", Union[int, str], 0), ("args", Optional[Args], None)]
# Every other phase of the Chrome trace format: decoded into an empty struct (fields skipped).
_OTHER_PHASES = ["I", "C", "b", "n", "e", "s", "t", "f", "P", "O", "N", "D", "M", "V", "v", "R",
                 "c", "(", ")", "T", "p", "S", "F"]
_OTHER_EVENTS = tuple(msgspec.defstruct(f"Phase{i}", [], tag_field="ph", tag=ph, gc=False)
                      for i, ph in enumerate(_OTHER_PHASES))
META_KEYS = ("schemaVersion", "deviceProperties", "distributedInfo", "cupti_version", "cuda_runtime_version",
             "cuda_driver_version", "hip_runtime_version", "rocm_version", "roctracer_version", "torch_version",
             "pytorch_version", "python_version", "cuda_version", "cudnn_version", "nccl_version", "trace_id",
             "host_name", "hostname", "displayTimeUnit", "baseTimeNanoseconds", "traceName", "record_shapes",
             "profile_memory", "with_stack", "with_flops", "with_modules",
             "lesson",  # the knobs a lesson of this project wrote (common/knobs.py)
             "report_findings")  # {"pid", "events"}: the Findings track the report drew (common/report/render/annotate.py)


class Schema:
    """The decoders of one decode. Its begin-event struct records, in this object and nowhere else,
    that the decode met a ``B`` event, so the common case (no B/E pairs) skips a second pass."""

    def __init__(self) -> None:
        seen = self.begins = []

        def note_begin(_event) -> None:
            if not seen:
                seen.append(True)

        self.begin_type = msgspec.defstruct("BeginEvent", _BEGIN_FIELDS, tag_field="ph", tag="B", gc=False,
                                            namespace={"__post_init__": note_begin})
        event = Union[(CompleteEvent, self.begin_type, EndEvent, InstantEvent) + _OTHER_EVENTS]  # type: ignore[valid-type]
        trace = msgspec.defstruct("Trace", [("traceEvents", list[event])] + [(k, Any, None) for k in META_KEYS])
        self.object_form = msgspec.json.Decoder(trace)
        self.array_form = msgspec.json.Decoder(list[event])

    @property
    def saw_begin(self) -> bool:
        return bool(self.begins)

    def decode(self, view, array_form: bool) -> tuple[list, dict]:
        """(the events, the trace-level metadata) of JSON text in either form; decode errors propagate."""
        if array_form:
            return self.array_form.decode(view), {}
        trace = self.object_form.decode(view)
        return trace.traceEvents, {k: getattr(trace, k) for k in META_KEYS if getattr(trace, k) is not None}


def complete_events(events: list, has_begin: bool, begin_type, whole: bool = True) -> Optional[list]:
    """Complete events only; with ``has_begin`` (the decode saw a ``B``), ``B``/``E`` pairs (per
    thread, a stack) become complete events too. Not ``whole`` (a slice of the events): None when a
    ``B`` is left open at the slice's end (its ``E`` may be in the next slice)."""
    complete = [e for e in events if e.__class__ is CompleteEvent]
    if has_begin:
        open_events: dict = {}
        for e in events:
            cls = e.__class__
            if cls is begin_type:
                open_events.setdefault((e.pid, e.tid), []).append(e)
            elif cls is EndEvent:
                stack = open_events.get((e.pid, e.tid))
                if stack:
                    begin = stack.pop()
                    complete.append(CompleteEvent(begin.name, begin.cat, begin.ts, max(0.0, e.ts - begin.ts),
                                                  begin.pid, begin.tid, begin.args))
        if not whole and any(open_events.values()):
            return None
    return complete


def memory_events(events: list) -> list:
    """The ``[memory]`` instant events among the decoded events, in trace order."""
    return [e for e in events if e.__class__ is InstantEvent and e.name == MEMORY_EVENT_NAME]
