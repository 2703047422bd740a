"""A seeded fuzzing round: a few hundred mutated traces from tests/data/traces, each read by the report.

Mutations: the text cut short, fields of other types, huge, negative and NaN numbers, keys missing,
events duplicated and reordered, control characters in names, events and lists nested wrongly, a
gzip stream corrupted. Each case runs the text report and ``--json``, and a subset ``--html``, in
this process (``common.report.__main__.run``: no interpreter start per case) under a time limit.
Each run must end in exit status 0 or 2 (2: one ``error:`` line), with no traceback, no raw control
character on standard output or error, its input unchanged, and the page written only on exit 0.
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import hashlib
import io
import json
import os
import random
import signal
from pathlib import Path

import pytest

from common.report.__main__ import run

from conftest import DATA_TRACES, event

SEED = 18
CASES_PER_TRACE = 50
HTML_EVERY = 12  # every 12th case also writes a page
GZIP_MAGIC = b"\x1f\x8b"
LIMIT_S = 30  # one run longer than this is a hang
SOURCES = ("hta/cpu_only_rank34.json.gz", "hta/a100_triton_example.json.gz", "hta/mi250_rocm_minitoy.json.gz")
CONTROLS = ["\x1b[2J", "\r", "\b", "\x07", "\u202e", "\n", "\x00", "\x9b", "[/]", "<script>", "\ud800"]
ODD_VALUES = [None, True, "x", "", [], [1, 2], {}, {"a": 1}, -5, 0, 2**70, 1e308, -1e308, 1.5, "12", "nan"]


class Hang(BaseException):
    """A run went past LIMIT_S."""


def _synthetic() -> dict:
    evs = [event("ProfilerStep#1", 0, 100, cat="user_annotation"), event("aten::mm", 10, 50),
           event("cudaLaunchKernel", 20, 5, cat="cuda_runtime", correlation=7),
           event("sgemm", 30, 20, cat="kernel", pid=0, tid=7, correlation=7, grid=[1, 2, 3]),
           event("ProfilerStep#2", 100, 100, cat="user_annotation"), event("aten::add", 110, 30)]
    return {"traceEvents": evs, "deviceProperties": [{"id": 0, "name": "GPU", "numSms": 80}],
            "distributedInfo": {"rank": 0, "world_size": 1, "backend": "nccl"}}


def _events(doc) -> list:
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _mutate_doc(doc: dict, rng: random.Random) -> str:
    """One structural mutation of a decoded trace, as JSON text."""
    doc = copy.deepcopy(doc)
    evs = _events(doc)
    kind = rng.randrange(8)
    pick = (lambda: rng.choice(evs)) if evs else (lambda: {})
    if kind == 0:  # a field of another type
        for _ in range(rng.randint(1, 5)):
            e = pick()
            e[rng.choice(["name", "cat", "ts", "dur", "pid", "tid", "ph", "args"])] = rng.choice(ODD_VALUES)
    elif kind == 1:  # huge, negative, NaN numbers (NaN and Infinity are Python's JSON, not JSON)
        for _ in range(rng.randint(1, 5)):
            pick()[rng.choice(["ts", "dur", "pid", "tid"])] = rng.choice(
                [1e308, -1e308, -1.0, -1e9, float("nan"), float("inf"), 2**63, 2**64 + 1, 1e-300])
    elif kind == 2:  # keys missing
        for _ in range(rng.randint(1, 10)):
            e = pick()
            if e:
                e.pop(rng.choice(list(e)), None)
    elif kind == 3:  # events duplicated and reordered
        if evs:
            evs.extend(rng.sample(evs, k=min(len(evs), rng.randint(1, 20))))
            rng.shuffle(evs)
    elif kind == 4:  # control characters, markup and surrogates in names
        for _ in range(rng.randint(1, 8)):
            e = pick()
            e["name"] = str(e.get("name", "")) + "".join(rng.sample(CONTROLS, 3))
    elif kind == 5:  # wrong nesting
        choice = rng.randrange(4)
        if choice == 0 and isinstance(doc, dict):
            doc["traceEvents"] = {"events": evs}
        elif choice == 1:
            pick()["args"] = [copy.deepcopy(pick())]
        elif choice == 2 and isinstance(doc, dict):
            doc["traceEvents"] = [evs]
        else:
            evs.append([[{"ph": "X"}]])
    elif kind == 6 and isinstance(doc, dict):  # metadata of the wrong shape
        doc[rng.choice(["deviceProperties", "distributedInfo", "lesson", "displayTimeUnit"])] = rng.choice(ODD_VALUES)
    else:  # ph of unknown or unmatched kinds
        for _ in range(rng.randint(1, 5)):
            pick()["ph"] = rng.choice(["B", "E", "i", "M", "Z", "b", "X"])
    text = json.dumps(doc)
    return text.replace("\\ud800", "\\udc00\\ud800") if rng.random() < 0.1 else text


def _cases(tmp: Path) -> list[Path]:
    """Every case's mutated trace, written under ``tmp``."""
    rng = random.Random(SEED)
    sources = [json.loads(gzip.decompress((DATA_TRACES / s).read_bytes())) for s in SOURCES] + [_synthetic()]
    cases = []
    for s, doc in enumerate(sources):
        text = json.dumps(doc)
        for i in range(CASES_PER_TRACE):
            kind = rng.random()
            if kind < 0.15:  # cut short
                data = text[:rng.randrange(len(text))].encode()
            elif kind < 0.25:  # a corrupted or cut gzip stream
                data = bytearray(gzip.compress(_mutate_doc(doc, rng).encode()))
                if rng.random() < 0.5:
                    for _ in range(rng.randint(1, 8)):
                        data[rng.randrange(10, len(data))] ^= 1 << rng.randrange(8)
                else:
                    data = data[:rng.randrange(2, len(data))]
                data = bytes(data)
            else:
                data = _mutate_doc(doc, rng).encode()
            suffix = ".json.gz" if data[:2] == GZIP_MAGIC else ".json"
            path = tmp / f"case{s}-{i}{suffix}"
            path.write_bytes(data)
            cases.append(path)
    return cases


def _alarm(signum, frame):
    raise Hang()


def _report(argv: list[str]) -> tuple[int, str, str]:
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace") for _ in range(2))
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, LIMIT_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = run(argv)
            except SystemExit as exc:  # argparse's own exit (never expected here)
                code = exc.code
    except Hang:
        pytest.fail(f"report {' '.join(argv)} ran past {LIMIT_S} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    out.flush()
    err.flush()
    return code, out.buffer.getvalue().decode("utf-8", "backslashreplace"), err.buffer.getvalue().decode("utf-8")


RAW = set(map(chr, range(0x20))) - {"\n"} | set(map(chr, range(0x7F, 0xA0))) | {"\u202e"}


def test_fuzzed_traces_end_in_a_report_or_one_error_line(tmp_path):
    cases = _cases(tmp_path)
    hashes = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in cases}
    runs, codes = 0, {0: 0, 2: 0}
    for n, path in enumerate(cases):
        modes = [[], ["--json"]] + ([["--short", "--html", str(tmp_path / f"page{n}.html")]] if n % HTML_EVERY == 0 else [])
        for extra in modes:
            code, out, err = _report([str(path), *extra])
            runs += 1
            where = f"{path.name} {' '.join(extra)}: exit {code}\n{err[-2000:]}"
            assert code in (0, 2), where
            codes[code] += 1
            assert "Traceback" not in out + err, where
            assert not RAW & set(out + err), where + repr(sorted(RAW & set(out + err)))
            if code == 2:
                lines = err.strip().splitlines()
                assert len(lines) == 1 and lines[0].startswith("error: "), where
            if "--html" in extra:
                assert (tmp_path / f"page{n}.html").exists() == (code == 0), where
        assert hashlib.sha256(path.read_bytes()).hexdigest() == hashes[path], f"{path.name} was changed"
    print(f"fuzzing: {len(cases)} mutated traces, {runs} report runs: {codes[0]} exit 0, {codes[2]} exit 2")
    assert len(cases) >= 200 and codes[0] and codes[2]  # both outcomes occur: the mutations bite


# ----------------------------------------------------------------------------- issue 38's recipes

SEED_38 = 38
CASES_38 = 24
FLOAT_LIMITS = [1e308, -1e308, 1.7976931348623157e308, 5e-324, 2**63, 2**64, -1, 0, 0.5]
DEVICE_FIELDS = ["maxThreadsPerMultiprocessor", "warpSize", "numSms", "regsPerMultiprocessor", "totalGlobalMem",
                 "sharedMemPerMultiprocessor", "maxThreadsPerBlock", "computeMajor", "name"]
ABSURD = [0, 1, 16, 31, -1, 2**70, 1e308, "", None, "80GB"]


def _recipe_38(doc: dict, rng: random.Random, tmp: Path, i: int) -> tuple[Path, list[str]]:
    """One case of the new recipes: (its file, extra arguments for the report)."""
    doc = copy.deepcopy(doc)
    kind = i % 6
    extra: list[str] = []
    if kind == 0:  # absurd device properties
        for _ in range(rng.randint(1, 4)):
            doc["deviceProperties"][0][rng.choice(DEVICE_FIELDS)] = rng.choice(ABSURD)
    elif kind == 1:  # sub-microsecond kernels
        for e in doc["traceEvents"]:
            if e.get("cat") == "kernel" and rng.random() < 0.8:
                e["dur"] = rng.choice([0.001, 0.3, 0.5, 0.999])
    elif kind == 2:  # the lesson's numbers at a float's limits
        lesson = json.loads(doc["lesson"]) if isinstance(doc.get("lesson"), str) else dict(doc.get("lesson") or {})
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(["shape", "matmul_flops_per_step", "warmup_calls", "schedule"])
            value = rng.choice(FLOAT_LIMITS)
            lesson[key] = [value] if key == "shape" else {"active": value} if key == "schedule" else value
        doc["lesson"] = json.dumps(lesson)
    text = json.dumps(doc).encode()
    name = f"c38-{i}.json"
    if kind == 3:  # a gzip member, then bytes that are not gzip
        text = gzip.compress(text) + bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
        name += ".gz"
        extra = ["--short", "--html", str(tmp / f"p38-{i}.html"), "--annotate", str(tmp / f"a38-{i}.json")]
    elif kind == 4:  # a gzip bomb: more than --max-size once decompressed
        text = gzip.compress(b'{"traceEvents": [' + b" " * (8 << 20) + b"]}")
        name += ".gz"
        extra = ["--max-size", str(rng.choice([1 << 20, 4 << 20]))]
    elif kind == 5:  # a name that is not UTF-8
        name = os.fsdecode(b"\xff\xfe" + bytes([rng.randrange(0x80, 0x100)]) + f"-{i}.json".encode())
    path = tmp / name
    path.write_bytes(text)
    return path, extra


def test_issue_38_recipes_end_in_a_report_or_one_error_line(tmp_path):
    """Absurd device properties, sub-µs kernels, lesson numbers at a float's limits, gzip with junk after it,
    gzip bombs, names that are not UTF-8: each read in the text and JSON modes (and its own), with the checks
    of the round above, no page left by exit 2, and --glance over all of them at once."""
    from h100 import h100_trace

    rng = random.Random(SEED_38)
    sources = [json.loads(gzip.decompress(h100_trace(run).read_bytes())) for run in ("p1_4096_compile", "attn_naive")]
    runs, codes = 0, {0: 0, 2: 0}
    for i in range(CASES_38):
        path, extra = _recipe_38(sources[i % 2], rng, tmp_path, i)
        for mode in ([], ["--json"], extra) if extra else ([], ["--json"]):
            code, out, err = _report([str(path), *mode])
            runs += 1
            where = f"{path.name!a} {' '.join(mode)}: exit {code}\n{err[-2000:]}"
            assert code in (0, 2) and "Traceback" not in out + err, where
            assert not RAW & set(out + err), where
            if code == 2:
                assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), where
            if "--html" in mode:
                assert Path(mode[mode.index("--html") + 1]).exists() == (code == 0), where
            codes[code] += 1
    code, out, err = _report(["--glance", str(tmp_path), "--json"])
    assert code == 0 and "Traceback" not in err, err
    print(f"issue 38 recipes (seed {SEED_38}): {CASES_38} cases, {runs} runs: {codes[0]} exit 0, {codes[2]} exit 2")
    assert codes[0] and codes[2]
