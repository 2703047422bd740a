"""Seeded fuzzing of what the suite writes and of the roofline's numbers (issue #27, items 2 and 3).

1. **Outputs never write through a symbolic link.** Every command that writes (the report's --html,
   --json -o, --annotate, --glance --json -o, --compare --html/-o; a lesson's table, trace, .json.gz,
   page and annotated copy; the benchmark's big input; the one writer itself) is pointed at a link of
   a seeded kind (to an unrelated file beside it, in another folder, through a second link, to a
   folder, to nothing): one ``error:`` line naming the link, exit 2, the link and the file it names
   byte-identical, nothing else written.
2. **The roofline prints no rate that cannot be.** The lessons' H100 traces and a CPU lesson trace
   made with --record-shapes are mutated (Input Dims, input dtypes, device names, kernel and op
   durations, the knobs' FLOPs): every run ends in exit 0 or 2 without a traceback, and on exit 0 no
   share of a datasheet peak or roof above 100 %, no rate beyond any device, no peak for a name that
   holds several GPUs, no 20-digit number; a row flagged impossible has no share, roof or bound, and
   the text, the JSON and the page say the same. ``FUZZ_ROOFLINE_CASES`` (default 24) sets the
   round's size and ``FUZZ_ROOFLINE_SEED`` its seed: the suite runs 24; a bigger round is run by hand
   (``FUZZ_ROOFLINE_CASES=1000 FUZZ_ROOFLINE_SEED=1 uv run pytest -q -s tests/test_fuzz_outputs.py -k round``).
"""

from __future__ import annotations

import contextlib
import copy
import gzip
import hashlib
import importlib.util
import io
import json
import os
import random
import re
import signal
from pathlib import Path

import pytest

from common.errors import BadInput
from common.report.__main__ import run
from common.report.facts.impossible import ANY_DEVICE_TFLOPS, gpus_named

from conftest import REPO
from h100 import RUN_NAMES, h100_trace

SEED = 27
ROOFLINE_CASES = int(os.environ.get("FUZZ_ROOFLINE_CASES", "24"))
ROOFLINE_SEED = int(os.environ.get("FUZZ_ROOFLINE_SEED", str(SEED)))
HTML_EVERY = 8
LINK_KINDS = ("file beside", "file elsewhere", "link to a link", "folder", "nothing")
SMALL_TRACE = h100_trace("p1_64")


def _run(run_main, argv: list[str]) -> tuple[int, str, str]:
    """A command in this process: (exit status, stdout, stderr); a signal handler it sets is undone."""
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace") for _ in range(2))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run_main(argv)
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    out.flush()
    err.flush()
    return code, *(f.buffer.getvalue().decode("utf-8", "backslashreplace") for f in (out, err))


def _one_error(code: int, err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, err)
    assert all(w in lines[0] for w in words), (words, lines[0])


# ----------------------------------------------------------------------------- 1. outputs


def _link(folder: Path, name: str, kind: str) -> tuple[Path, Path | None]:
    """A symbolic link ``folder/name`` of ``kind``; (the link, the file it finally names or None)."""
    link = folder / name
    other = folder.parent / f"elsewhere-{folder.name}"
    other.mkdir(exist_ok=True)
    target = {"file beside": folder / f"victim-{name}", "file elsewhere": other / "victim",
              "link to a link": other / "victim2", "folder": other, "nothing": None}[kind]
    if target is not None and kind != "folder":
        target.write_bytes(b"an unrelated file: " + name.encode() + bytes(range(256)))
    if kind == "link to a link":
        (other / "hop").symlink_to(target)
        link.symlink_to(other / "hop")
    elif kind == "nothing":
        link.symlink_to(folder / "no-such-file")
    else:
        link.symlink_to(target if kind != "file beside" else target.name)
    return link, target


def _snapshot(*folders: Path) -> dict:
    """Every name under the folders (links not followed) with its bytes or link text."""
    out = {}
    for folder in folders:
        for p in sorted(folder.rglob("*")):
            out[p] = (os.readlink(p) if p.is_symlink() else None if p.is_dir() else
                      hashlib.sha256(p.read_bytes()).digest())
    return out


REPORT_WRITERS = {  # argv with OUT where the output goes
    "--html": [str(SMALL_TRACE), "--short", "--html", "OUT"],
    "--json -o": ["--json", str(SMALL_TRACE), "-o", "OUT"],
    "--annotate": [str(SMALL_TRACE), "--short", "--annotate", "OUT"],
    "--glance --json -o": ["--glance", "--json", "-o", "OUT", str(SMALL_TRACE)],
    "--compare --html": ["--compare", str(SMALL_TRACE), str(SMALL_TRACE), "--html", "OUT"],
    "--compare --json -o": ["--compare", str(SMALL_TRACE), str(SMALL_TRACE), "--json", "-o", "OUT"],
}


@pytest.mark.parametrize("kind", LINK_KINDS)
@pytest.mark.parametrize("writer", list(REPORT_WRITERS))
def test_report_never_writes_through_a_symbolic_link(tmp_path, writer, kind):
    folder = tmp_path / "out"
    folder.mkdir()
    link, _ = _link(folder, "out.file", kind)
    before = _snapshot(tmp_path)
    code, out, err = _run(run, [str(link) if a == "OUT" else a for a in REPORT_WRITERS[writer]])
    _one_error(code, err, str(link), "symbolic link")
    assert _snapshot(tmp_path) == before  # the link, the file it names, and nothing written beside them


def _lesson_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"lesson_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def lesson01():
    """01_matmul_add.py, imported here (torch once for every lesson case)."""
    return _lesson_module(REPO / "01_matmul_add.py")


def _lesson(module, argv: list[str]) -> tuple[int, str, str]:
    def main(args):
        return module.main(module.cli.parse_args(args))  # as the script does under __main__
    return _run(main, argv)


LESSON_OUTPUTS = {  # the output linked -> the flags that make the lesson write it
    "16_fp32_cold_eager.txt": [], "16_fp32_cold_eager.json": [], "16_fp32_cold_eager.json.gz": ["--gzip"],
    "16_fp32_cold_eager.html": ["--html"], "16_fp32_cold_eager.annotated.json": ["--annotate"],
}


@pytest.mark.parametrize("name", list(LESSON_OUTPUTS))
def test_lesson_never_writes_through_a_symbolic_link(tmp_path, lesson01, name):
    kind = random.Random(f"{SEED}-{name}").choice(LINK_KINDS)
    folder = tmp_path / "traces"
    folder.mkdir()
    link, _ = _link(folder, name, kind)
    before = _snapshot(tmp_path)
    code, out, err = _lesson(lesson01, ["--size", "16", "--dtype", "fp32", "--no-report",
                                        "--trace_dir", str(folder), *LESSON_OUTPUTS[name]])
    _one_error(code, err, name, "symbolic link")
    assert _snapshot(tmp_path) == before, kind


def test_every_other_writer_refuses_a_symbolic_link(tmp_path):
    """The one writer (common.output), its old name (common.paths.atomic_path) and the benchmark's big input."""
    from common.output import write_file
    from common.paths import atomic_path

    spec = importlib.util.spec_from_file_location("bench_report", REPO / "benchmarks" / "bench_report.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    writers = {"write_file": lambda p: write_file(p, b"new"),
               "atomic_path": lambda p: contextlib.ExitStack().enter_context(atomic_path(p)),
               "repeat_trace": lambda p: bench.repeat_trace(SMALL_TRACE, 1, p)}
    for n, (what, write) in enumerate(writers.items()):
        link, _ = _link(tmp_path, f"{what}.json", LINK_KINDS[n % 3])
        before = _snapshot(tmp_path)
        with pytest.raises(BadInput, match="symbolic link"):
            write(link)
        assert _snapshot(tmp_path) == before, what


# ----------------------------------------------------------------------------- 2. the roofline

GEMMS = ("aten::mm", "aten::addmm", "aten::bmm")
DTYPES = ["c10::BFloat16", "c10::Half", "float", "double", "c10::Float8_e4m3fn", "Scalar", "", None, 5]
MODELS = ["A100", "H100", "B200", "H200", "L4", "L40S", "T4", "V100", "RTX 4090", "MI300X"]
ODD_NAMES = [None, 5, "", "GPU", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "Tesla T4", "NVIDIA L40S",
             "\x1b[31mNVIDIA H100", "H100 " * 40, "NVIDIA GeForce RTX 4090", "NVIDIA H100 PCIe"]
SIZES = [0, 1, 7, 64, 4096, 10 ** 6, 2 ** 31, 2 ** 62, 2 ** 63, 2 ** 64, 10 ** 30, -1, 1.5, "64", None, True]


@pytest.fixture(scope="module")
def cpu_shapes_trace(tmp_path_factory, lesson01) -> Path:
    """A CPU lesson trace with record_shapes (01 --size 16 --record-shapes), made in this process."""
    folder = tmp_path_factory.mktemp("cpu-shapes")
    code, out, err = _lesson(lesson01, ["--size", "16", "--dtype", "fp32", "--record-shapes", "--schedule", "0,0,2",
                                        "--no-report", "--trace_dir", str(folder)])
    assert code == 0, err
    (trace,) = folder.glob("*.json")
    return trace


def _load(path: Path) -> dict:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def _dims(e: dict, rng: random.Random, knobs: dict | None) -> None:
    """Input Dims (and types) for a GEMM: the lesson's size scaled, or an odd size."""
    n = (knobs or {}).get("shape", [64])[-1] if isinstance(knobs, dict) else 64
    args = e.setdefault("args", {})
    if rng.random() < 0.5:
        f = rng.choice([1, 2, 10, 100, 1000])
        m, k = n * f, n * rng.choice([1, f])
    else:
        m, k = rng.choice(SIZES), rng.choice(SIZES)
    args["Input Dims"] = [[m, k], [k, n]] if e["name"] != "aten::addmm" else [[n], [m, k], [k, n]]
    args["Input type"] = [rng.choice(DTYPES[:3])] * len(args["Input Dims"])


def _mutate(doc: dict, rng: random.Random) -> dict:
    doc = copy.deepcopy(doc)
    evs = doc["traceEvents"]
    knobs = doc.get("lesson")
    gemms = [e for e in evs if e.get("name") in GEMMS]
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(6)
        if kind == 0 and gemms:  # Input Dims
            for e in rng.sample(gemms, rng.randint(1, len(gemms))):
                _dims(e, rng, knobs)
        elif kind == 1 and gemms:  # input dtypes
            for e in gemms:
                e.setdefault("args", {})["Input type"] = [rng.choice(DTYPES)] * 3
        elif kind == 2:  # device names: several GPUs in one, or odd ones
            name = " ".join(rng.sample(MODELS, rng.randint(2, 3))) if rng.random() < 0.5 else rng.choice(ODD_NAMES)
            for p in doc.get("deviceProperties") or [{"id": 0}]:
                p["name"] = name
            doc.setdefault("deviceProperties", [{"id": 0, "name": name}])
        elif kind == 3:  # kernel and op durations
            cat = rng.choice(["kernel", "cpu_op"])
            factor = rng.choice([0.0, 1e-9, 1e-3, 0.1, 10.0, -1.0, 1e30, float("nan")])
            for e in evs:
                if e.get("cat") == cat and isinstance(e.get("dur"), (int, float)) and rng.random() < 0.7:
                    e["dur"] = e["dur"] * factor
        elif kind == 4 and isinstance(knobs, dict):  # the knobs' FLOPs per step
            flops = knobs.get("matmul_flops_per_step")
            if type(flops) is not int or flops <= 0:  # noqa: E721 - an earlier mutation's odd value
                flops = 10 ** 9
            knobs["matmul_flops_per_step"] = rng.choice([flops * 10, flops * 1000, -flops, 0, 10 ** 30, 2 ** 63,
                                                         1.5, "x", None, True, flops])
        elif isinstance(knobs, dict):  # the knobs' dtype
            knobs["dtype"] = rng.choice(["bf16", "fp16", "fp32", "fp8", "", 5])
    return doc


BIG_NUMBER = re.compile(r"\d[\d,]{19,}")  # 20 digits or more: a number nobody can read, printed as fact


def _check_roofline(doc: dict, text: str, page: str | None, where: str) -> None:
    """What must hold of one run's roofline: in the JSON, and the same in the text and the page."""
    r = doc.get("roofline")
    finding = next((f for f in doc["findings"] if f["rule"] == "roofline"), None)
    if r is None:
        return
    if len(gpus_named(r["device"])) > 1:
        assert r["peak"] is None and "several GPUs" in r["note"], where
    flagged = False
    for row in r["rows"]:
        if row.get("impossible"):
            flagged = True
            assert row["pct_of_peak"] is row["bound"] is row["roof_tflops"] is row["pct_of_roof"] is None, where
            continue
        assert row["pct_of_peak"] is None or 0 <= row["pct_of_peak"] <= 100, where
        assert row["pct_of_roof"] is None or row["pct_of_roof"] <= 100, where
        assert row["tflops"] is None or 0 <= row["tflops"] <= ANY_DEVICE_TFLOPS, where
        assert row["flops"] >= 0 and (row["bytes"] is None or row["bytes"] >= 0), where
    assert r["step_tflops"] is None or 0 <= r["step_tflops"] <= ANY_DEVICE_TFLOPS, where
    flat = " ".join(text.split())
    assert ("impossible" in flat) == ("flagged impossible" in r["note"]), where
    if finding is not None:
        assert not BIG_NUMBER.search(finding["message"]), where
        assert " ".join(finding["message"].split()) in flat, where  # the text says what the JSON says
        if r["rows"][0].get("impossible"):
            assert finding["level"] == "warn" and "cannot be true" in finding["message"], where
    if page is not None:
        assert ("flagged impossible" in page) == flagged, where  # the table's caption holds the note


def _roofline_seeds(cpu_trace: Path) -> list[tuple[str, dict]]:
    seeds = [(name, _load(h100_trace(name))) for name in RUN_NAMES] + [("cpu-shapes", _load(cpu_trace))]
    for name in ("p1_4096", "p1_64"):  # a GPU trace with record_shapes: the lesson's GEMM shapes on its aten::mm
        doc = _load(h100_trace(name))
        n = doc["lesson"]["shape"][-1]
        for e in doc["traceEvents"]:
            if e.get("name") == "aten::mm":
                e["args"].update({"Input Dims": [[n, n], [n, n]], "Input type": ["c10::BFloat16"] * 2})
        seeds.append((f"{name}+shapes", doc))
    return seeds


def _fuzz_roofline(tmp: Path, cpu_trace: Path, cases: int, seed: int) -> dict:
    rng = random.Random(seed)
    seeds = _roofline_seeds(cpu_trace)
    counts = {"cases": 0, "runs": 0, 0: 0, 2: 0, "flagged": 0, "ambiguous": 0, "errors": {}}
    for n in range(cases):
        name, doc = seeds[n % len(seeds)]
        path = tmp / f"case{n}.json"
        path.write_text(json.dumps(_mutate(doc, rng)))
        page = tmp / f"page{n}.html" if n % HTML_EVERY == 0 else None
        results = []
        for extra in ([], ["--json"]) + ((["--short", "--html", str(page)],) if page else ()):
            code, out, err = _run(run, [str(path), *extra])
            where = f"case {n} (seed {name}) {' '.join(extra)}: exit {code}\n{err[-1500:]}"
            assert code in (0, 2) and "Traceback" not in out + err, where
            if code == 2:
                _one_error(code, err)
                why = re.sub(r"\(byte \d+\)", "(byte N)", re.sub(r"/\S+", "PATH", err.strip()))[:90]
                counts["errors"][why] = counts["errors"].get(why, 0) + 1
            counts["runs"] += 1
            counts[code] += 1
            results.append((code, out))
        (c_text, text), (c_json, raw) = results[:2]
        assert c_text == c_json, f"case {n}: text exit {c_text}, JSON exit {c_json}"
        if c_json == 0:
            doc_out = json.loads(raw)
            html = page.read_text() if page and page.exists() else None
            _check_roofline(doc_out, text, html, f"case {n} (seed {name})")
            rows = (doc_out.get("roofline") or {}).get("rows", [])
            counts["flagged"] += any(row.get("impossible") for row in rows)
            counts["ambiguous"] += bool(doc_out.get("roofline")) and "several GPUs" in doc_out["roofline"]["note"]
        counts["cases"] += 1
        path.unlink()
    return counts


def test_roofline_fuzzing_round(tmp_path, cpu_shapes_trace):
    counts = _fuzz_roofline(tmp_path, cpu_shapes_trace, ROOFLINE_CASES, ROOFLINE_SEED)
    print(f"roofline fuzzing: {counts}")
    assert counts["flagged"] and counts[0]  # the mutations reach the guard


# ----------------------------------------------------------------------------- 2b. the issue's own cases


def _with_shapes(tmp: Path, dims, device: str | None = None) -> Path:
    doc = _load(h100_trace("p1_4096"))
    for e in doc["traceEvents"]:
        if e.get("name") == "aten::mm":
            e["args"].update({"Input Dims": dims, "Input type": ["c10::BFloat16"] * 2})
    if device:
        doc["deviceProperties"][0]["name"] = device
    path = tmp / "t.json"
    path.write_text(json.dumps(doc))
    return path


def _all_three(tmp: Path, path: Path) -> tuple[dict, str, str]:
    code, text, _ = _run(run, [str(path)])
    code_json, raw, _ = _run(run, ["--json", str(path)])
    code_page, _, err = _run(run, [str(path), "--short", "--html", str(tmp / "p.html")])
    assert code == code_json == code_page == 0, err
    return json.loads(raw), text, (tmp / "p.html").read_text()


@pytest.mark.parametrize("case", ["10x the real size", "10**30", "A100 H100 B200"])
def test_issue_27_roofline_cases(tmp_path, case):
    """#27: dims 10x the real size printed "782.7 % of the bf16 peak ... under the compute roof"; dims of
    10**30 printed a 73-digit TFLOP/s; "NVIDIA A100 H100 B200" got the A100's peak and "248.2 %"."""
    dims = {"10x the real size": [[40960, 4096], [4096, 4096]], "10**30": [[10 ** 30, 4096], [4096, 10 ** 30]],
            "A100 H100 B200": [[4096, 4096], [4096, 4096]]}[case]
    path = _with_shapes(tmp_path, dims, "NVIDIA A100 H100 B200" if "B200" in case else None)
    doc, text, page = _all_three(tmp_path, path)
    r = doc["roofline"]
    finding = next(f for f in doc["findings"] if f["rule"] == "roofline")
    _check_roofline(doc, text, page, case)
    if case == "10x the real size":
        assert r["rows"][0].get("impossible") and "782.7% of the bf16 peak" in r["rows"][0].get("impossible")
        assert "under the compute roof" not in finding["message"] and "wrong" in text and ">wrong</td>" in page
    elif case == "10**30":  # no tensor has a size past int64: those calls' shapes are ignored, and said so
        assert r["source"] == "knobs" and "ignored the Input Dims of 3 op call(s) (aten::mm)" in " ".join(text.split())
        assert any("ignored the Input Dims" in n for n in doc["notes"])
    else:
        assert r["peak"] is None and r["rows"][0]["pct_of_peak"] is None and "248.2" not in text
        assert "several GPUs (B200, H100, A100)" in r["note"] and "cannot tell" in finding["message"]


def test_cpu_matmul_rate_beyond_any_cpu_is_no_verdict(tmp_path, cpu_shapes_trace):
    """The lesson's knobs say a 2^20-square matmul (2^61 FLOPs a call: its shape fits in int64, but no CPU
    runs it in microseconds): no finding prints that rate as the CPU's, and the roofline flags its row."""
    doc = _load(cpu_shapes_trace)
    doc["lesson"]["shape"] = [2 ** 20]  # the roofline's knobs row counts the GEMMs from the lesson's shape
    doc["lesson"]["matmul_flops_per_step"] = 2 * (2 ** 20) ** 3
    for row in doc["lesson"].get("work", {}).get("ops", []):  # and the lesson's own count says the same
        if row["op"] == "aten::mm":
            row.update(shapes=[[2 ** 20, 2 ** 20]] * 2, flops=2 * (2 ** 20) ** 3, read=2 * 4 * 2 ** 40, written=4 * 2 ** 40)
    for e in doc["traceEvents"]:
        e.get("args", {}).pop("Input Dims", None)  # the knobs' row, not record_shapes'
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    out, text, page = _all_three(tmp_path, path)
    _check_roofline(out, text, page, "a 2^20-square matmul")
    assert out["roofline"]["rows"][0]["impossible"] and "beyond any CPU" in out["roofline"]["rows"][0]["impossible"]
    for f in out["findings"]:
        if f["rule"] != "roofline":  # the CPU rules (overhead, busy machine) read no rate beyond any CPU
            assert f["evidence"].get("matmul_gflops") is None and "GFLOP/s" not in f["message"], f
