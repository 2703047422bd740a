"""Seeded fuzzing of the ``[memory]`` events' fields (#27): no traceback, and no number a trace cannot support.

Sources: a 04_a run with ``--profile-memory`` at a tiny shape (CPU allocations under ``attn_fwd``), and a
generated trace with a GPU whose ``deviceProperties`` give 80 GiB (``benchmarks/bench_memory.py``). Each case
sets ``Bytes``, ``Total Allocated``, ``Total Reserved``, ``Device Type``, ``Device Id`` or ``Addr`` of a few
events to a huge, negative, fractional or non-numeric value (or removes it), and runs the report in this
process (``common.report.__main__.run``).

- The cases of the issue, each in every mode (plain, ``--json``, ``--short``, ``--html``): exit 0, no
  traceback, the memory view left out with one note naming the field and the event (in the text, the JSON's
  ``notes``, the short report and the page alike), ``memory`` null in the JSON, no memory finding.
- The seeded round (``FUZZ_MEMORY_CASES``, default 24; ``FUZZ_MEMORY_SEED``): exit 0 or 2 (2: one ``error:``
  line), no traceback; on exit 0 either the view is left out with that note (in the text too), or every figure
  it shows is one the trace can support: allocated and reserved levels from 0 (recorded totals) to what the
  device holds, allocations and frees not negative.
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import os
import random
import re
import sys

import pytest

from common.report.__main__ import run

from conftest import REPO, run_script

sys.path.insert(0, str(REPO / "benchmarks"))
import bench_memory  # noqa: E402

SEED = int(os.environ.get("FUZZ_MEMORY_SEED", 27))
CASES = int(os.environ.get("FUZZ_MEMORY_CASES", 24))
FULL_EVERY = 5  # every 5th seeded case also runs the text, short and page modes
FIELDS = ("Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id", "Addr")
REMOVE = object()
VALUES = [1e308, -1e308, 1e30, -1e30, 10**30, 2**64 + 1, -(2**63), -1, -5, 0, 0.5, 3.25, 2**50, 1 << 40, 7,
          [1, 2, 3], {"a": 1}, "12", None, True, REMOVE]
LEFT_OUT = "memory view left out"
MAX_BYTES = 1 << 48
MEMORY_RULES = ("attention_scores_memory", "kv_cache_growth")


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("memory-sources")
    lesson = run_script("04_a_naive_attention.py", "--batch", "1", "--heads", "2", "--seq", "64", "--head_dim", "16",
                        "--profile-memory", "--schedule", "0,0,2", "--no-report", trace_dir=base / "lesson")
    assert lesson.returncode == 0, lesson.stderr
    gpu = bench_memory.write_trace(base / "gpu.json", calls=60)
    return {"lesson": json.loads(next((base / "lesson").glob("*.json")).read_text()),
            "gpu": json.loads(gpu.read_text())}


def _memory_events(doc: dict) -> list:
    return [e for e in doc["traceEvents"] if e.get("name") == "[memory]"]


def _write(tmp_path, name: str, doc: dict, changes) -> str:
    """``doc`` with ``changes`` [(event index, field, value)] applied to its memory events, written as JSON."""
    doc = json.loads(json.dumps(doc))
    events = _memory_events(doc)
    for i, field, value in changes:
        if value is REMOVE:
            events[i]["args"].pop(field, None)
        else:
            events[i]["args"][field] = value
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _report(argv: list[str]) -> tuple[int, str, str]:
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace") for _ in range(2))
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv)
    out.flush()
    err.flush()
    return code, out.buffer.getvalue().decode("utf-8", "replace"), err.buffer.getvalue().decode("utf-8", "replace")


def _flat(text: str) -> str:
    """Text as one line: the rich console wraps at 80 columns."""
    return re.sub(r"\s+", " ", text.replace("•", " "))


def _note_of(report: dict) -> str | None:
    return next((n for n in report["notes"] if n.startswith(LEFT_OUT)), None)


# the cases of #27: (name, source, changes)
ISSUE_CASES = [
    ("bytes_1e308", "lesson", [(i, "Bytes", 1e308) for i in range(3)]),
    ("bytes_1e308_no_totals", "lesson", [(i, "Bytes", 1e308) for i in range(3)] +
     [(i, "Total Allocated", REMOVE) for i in range(10_000)]),
    ("bytes_list", "lesson", [(0, "Bytes", [1, 2, 3])]),
    ("bytes_object", "lesson", [(5, "Bytes", {"a": 1})]),
    ("bytes_minus_1e30", "lesson", [(i, "Bytes", -1e30) for i in range(1, 10_000, 2)]),
    ("bytes_1e30", "lesson", [(i, "Bytes", 1e30) for i in range(0, 10_000, 2)]),
    ("total_allocated_negative", "lesson", [(i, "Total Allocated", -1) for i in range(10_000)]),
    ("total_reserved_negative", "lesson", [(i, "Total Reserved", -5) for i in range(10_000)]),
    ("gpu_bytes_over_device_memory", "gpu", [(4, "Bytes", 100 << 30)]),
    ("gpu_reserved_over_device_memory", "gpu", [(9, "Total Reserved", 81 << 30)]),
    ("gpu_id_huge", "gpu", [(3, "Device Id", 1e308)]),
]
FIELD_OF = {"bytes_1e308": "Bytes", "bytes_1e308_no_totals": "Bytes", "bytes_list": "Bytes", "bytes_object": "Bytes",
            "bytes_minus_1e30": "Bytes", "bytes_1e30": "Bytes", "total_allocated_negative": "Total Allocated",
            "total_reserved_negative": "Total Reserved", "gpu_bytes_over_device_memory": "Bytes",
            "gpu_reserved_over_device_memory": "Total Reserved", "gpu_id_huge": "Device Id"}


@pytest.mark.parametrize("name,source,changes", ISSUE_CASES, ids=[c[0] for c in ISSUE_CASES])
def test_impossible_memory_numbers_leave_the_view_out_in_every_mode(sources, tmp_path, name, source, changes):
    n = len(_memory_events(sources[source]))
    path = _write(tmp_path, name, sources[source], [c for c in changes if c[0] < n])
    page = tmp_path / "page.html"
    runs = {mode: _report([path, *extra]) for mode, extra in
            (("json", ["--json"]), ("text", []), ("short", ["--short"]), ("html", ["--html", str(page)]))}
    for mode, (code, out, err) in runs.items():
        assert code == 0 and "Traceback" not in out + err, f"{mode}: exit {code}\n{err[-3000:]}"
    report = json.loads(runs["json"][1])
    note = _note_of(report)
    assert report["memory"] is None and note, report["notes"]
    assert f"has {FIELD_OF[name]} " in note and "[memory] event at ts " in note, note
    assert not [f for f in report["findings"] if f["rule"] in MEMORY_RULES]
    for mode in ("text", "short"):
        assert note in _flat(runs[mode][1]), f"{mode}:\n{runs[mode][1]}"
    assert "peak allocated" not in runs["text"][1] and "memory: " not in runs["short"][1]
    assert html.escape(note) in page.read_text() and "memory-curve" not in page.read_text()


def _supported(memory: dict) -> list[str]:
    """What in the JSON's memory figures no trace can support (empty: all of them can be)."""
    wrong = []
    for d in memory["devices"]:
        low = 0 if d["totals"] == "recorded" else -MAX_BYTES
        levels = [d["peak_allocated_bytes"], *(level for _, level in d["curve"])] + \
            ([d["allocated_at_window_end_bytes"]] if d["allocated_at_window_end_bytes"] is not None else [])
        wrong += [f"{d['device']} level {v}" for v in levels if not low <= v <= MAX_BYTES]
        if d["peak_reserved_bytes"] is not None and not 0 <= d["peak_reserved_bytes"] <= MAX_BYTES:
            wrong.append(f"{d['device']} reserved {d['peak_reserved_bytes']}")
        wrong += [f"{d['device']} {k} {d[k]}" for k in ("allocated_bytes_in_window", "freed_bytes_in_window",
                                                         "allocations_in_window", "frees_in_window")
                  if not 0 <= d[k] <= MAX_BYTES * max(1, d["events"])]
    for a in memory["annotations"]:
        if not 0 < a["largest_allocation_bytes"] <= MAX_BYTES or a["allocated_bytes_per_call"] < 0:
            wrong.append(f"{a['name']} {a['largest_allocation_bytes']} {a['allocated_bytes_per_call']}")
    for r in memory["ops"]:
        if min(r["self_allocation_bytes"], r["allocation_bytes"], r["allocation_count"]) < 0:
            wrong.append(f"op {r['name']} {r}")
    return wrong


def _seeded_cases(sources: dict) -> list:
    rng = random.Random(SEED)
    cases = []
    for k in range(CASES):
        source = ("lesson", "gpu")[k % 2]
        n = len(_memory_events(sources[source]))
        changes = []
        for _ in range(rng.randint(1, 3)):
            field, value = rng.choice(FIELDS), rng.choice(VALUES)
            every = rng.random() < 0.3  # the field on every event, else on one to three
            events = range(n) if every else rng.sample(range(n), rng.randint(1, 3))
            changes += [(i, field, value) for i in events]
        cases.append((f"case{k}", source, changes))
    return cases


def test_seeded_memory_fields_end_in_a_report_the_trace_supports(sources, tmp_path):
    codes, left_out = {0: 0, 2: 0}, 0
    for k, (name, source, changes) in enumerate(_seeded_cases(sources)):
        path = _write(tmp_path, name, sources[source], changes)
        shown = sorted({(f, repr(v)) for _, f, v in changes})[:6]
        code, out, err = _report([path, "--json"])
        where = f"{name} ({source}: {shown}): exit {code}\n{err[-3000:]}"
        assert code in (0, 2) and "Traceback" not in out + err, where
        codes[code] += 1
        if code == 2:
            assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), where
            continue
        report = json.loads(out)
        note = _note_of(report)
        if note:
            left_out += 1
            assert report["memory"] is None, where
        elif report["memory"] is not None:
            assert not _supported(report["memory"]), where + str(_supported(report["memory"]))
        if k % FULL_EVERY == 0:
            page = tmp_path / f"{name}.html"
            for extra in ([], ["--short"], ["--html", str(page)]):
                code, text, err = _report([path, *extra])
                assert code == 0 and "Traceback" not in text + err, where + f" {extra}"
                assert (note is not None) == (LEFT_OUT in _flat(text)), where + f" {extra}\n{text}"
            assert (note is not None) == (LEFT_OUT in page.read_text()), where
            assert note is None or html.escape(note) in page.read_text(), where
    print(f"memory fuzzing (seed {SEED}): {CASES} cases, {codes[0]} exit 0 ({left_out} with the view left out), "
          f"{codes[2]} exit 2")
    assert left_out and codes[0] > left_out  # both outcomes occur: the mutations bite, and some are harmless
