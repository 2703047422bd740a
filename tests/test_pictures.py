"""Pictures: the report as an HTML page of plots, and the findings drawn onto a copy of the trace.

The page is checked as data (each plot present, its numbers the report's, nothing fetched from a
network) and in a real browser (headless Chromium: no console errors, SVGs with a size, a
screenshot that is not blank). The annotated trace reads back to the same report."""

from __future__ import annotations

import gzip
import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from common.commands import display_path  # paths as the commands print them (run from REPO)

from common.paths import parse_tag
from common.report import analyze
from common.report.render.json import to_json
from browser import find_browser
from conftest import CPU_DTYPE, REPO, command_env, run_module

TRACES = REPO / "tests" / "data" / "traces"
RESNET = TRACES / "kineto" / "v100_resnet50_train.json.gz"
BROWSER = find_browser()


def cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return run_module("common.report", *args, cwd=cwd, timeout=180, env=command_env(COLUMNS="100"))


def lesson_trace(run) -> Path:
    assert run.returncode == 0, run.stderr
    return next(p for p in run.trace_dir.glob("*.json") if ".annotated." not in p.name)


class Page(HTMLParser):
    """The page's figures (id -> plotted data), its SVG count, and every URL-bearing attribute."""

    def __init__(self, text: str):
        super().__init__()
        self.figures: dict[str, dict] = {}
        self.svgs = 0
        self.tags: set[str] = set()
        self.urls: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        if tag == "figure":
            self.figures[a["id"]] = json.loads(a["data-plot"])
        if tag == "svg":
            self.svgs += 1
        self.urls += [v for k, v in attrs if k in ("src", "href", "xlink:href", "action", "data") and v]


def figure_html(text: str, plot_id: str) -> str:
    """One figure of the page, its picture and what is printed under it (the verdicts), as HTML."""
    start = text.index(f'<figure id="{plot_id}"')
    return text[start:text.index("</figure>", start)]


def verdicts_under(text: str, plot_id: str) -> dict[str, str]:
    """The verdict lines printed under a plot: {rule: its text, unescaped}."""
    found = re.findall(r'<p class="verdict [a-z]+" data-rule="([^"]+)">(?:<b>[^<]*</b>: )?([^<]*)</p>',
                       figure_html(text, plot_id))
    return {rule: html.unescape(line) for rule, line in found}


def assert_offline(text: str, page: Page) -> None:
    assert "script" not in page.tags and "link" not in page.tags and "img" not in page.tags
    assert all(not re.match(r"^\w+://", u) and not u.startswith("//") for u in page.urls), page.urls
    assert not re.search(r"url\(\s*['\"]?(?!#)", text) and "@import" not in text  # only url(#local-id)


# ----------------------------------------------------------------------------- the page as data


def test_page_for_a_cpu_lesson_run(runs):
    run = runs["01_cold_sched"]
    html_path = run.trace_dir / f"64_{CPU_DTYPE}_cold_eager_sched-0-0-20.html"
    text = html_path.read_text()
    page = Page(text)
    assert_offline(text, page)
    assert {"breakdown", "ops", "spread"} <= set(page.figures) and page.svgs == len(page.figures)
    report = to_json(*analyze(lesson_trace(run)))
    parts = page.figures["breakdown"]["parts"]
    assert set(parts) == {"compute", "dispatch"}  # the CPU-only form
    walls = [s["wall_us"] for s in report["steps"]]
    assert page.figures["breakdown"]["totals_us"] == pytest.approx(walls, abs=0.01)
    ops = page.figures["ops"]
    top = max((o for o in report["ops"] if o["kind"] == "op"), key=lambda o: o["self_cpu_us"])
    assert ops["names"][0] == top["name"] and ops["values_us"][0] == pytest.approx(top["self_cpu_us"], abs=0.01)
    assert page.figures["spread"]["series"][0]["values_us"] == pytest.approx(walls, abs=1e-3)
    for f in report["findings"]:
        assert f'id="finding-{f["rule"]}"' in text
    assert "<h2>Annotations (per call)</h2>" in text and "<td>matmul_add</td><td class=\"num\">20</td>" in text
    assert parse_tag(html_path.name).variant("sched") == "0-0-20"
    assert f"wrote {display_path(html_path, start=REPO)}" in run.stdout.replace("\n", "")


def test_page_for_the_gpu_sample_trace(tmp_path):
    out = tmp_path / "resnet.html"
    proc = cli(RESNET, "--html", out, "--short")
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {display_path(out, start=REPO)}" in proc.stderr
    text = out.read_text()
    page = Page(text)
    assert_offline(text, page)
    assert {"breakdown", "categories", "kernels", "ops", "spread"} <= set(page.figures)
    report = to_json(*analyze(RESNET))
    parts = page.figures["breakdown"]["parts"]
    for key in ("kernel", "memcpy", "memset", "runtime", "dataloader", "cpu_exec", "other"):
        assert sum(parts[key]) == pytest.approx(report["breakdown"][key], abs=0.01)
    assert sum(page.figures["breakdown"]["totals_us"]) == pytest.approx(report["breakdown"]["total"], abs=0.01)
    kernels = page.figures["kernels"]
    assert kernels["names"] == [k["name"] for k in report["kernels"][:len(kernels["names"])]]
    assert kernels["values_us"][0] == pytest.approx(report["kernels"][0]["total_us"], abs=0.01)
    assert [c["label"] for c in report["categories"]] == page.figures["categories"]["labels"]
    # full names on hover: every kernel bar has a <title>
    assert all(f"<title>{name.replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')}" in text
               for name in kernels["names"][:3])
    assert len(text) < 400_000  # a page to mail or attach, not a trace


def test_compare_page(runs, tmp_path):
    a, b = lesson_trace(runs["01_default"]), lesson_trace(runs["01_warm"])
    out = tmp_path / "compare.html"
    proc = cli("--compare", a, b, "--html", out)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    page = Page(text)
    assert_offline(text, page)
    c = json.loads(cli("--compare", a, b, "--json").stdout)
    assert page.figures["compare-cpu"]["a_us"] == pytest.approx([s["a_cpu_us"] for s in c["steps"]], abs=1e-3)
    assert "compare-device" not in page.figures  # CPU-only traces
    assert "Ops whose calls changed, per step (median)" in text and "leave out the profiler's first step" in text
    assert verdicts_under(text, "compare-cpu") == {"compare": c["summary"]["cpu"]["verdict"]}  # the console's


@pytest.mark.parametrize("args", [
    ["--html", "SRC"],  # onto its own input
    ["--annotate", "SRC"],
    ["--html", "/nonexistent-dir/x.html"],
    ["--annotate", "OUT.txt"],
])
def test_bad_outputs_write_nothing(tmp_path, args):
    src = tmp_path / "t.json.gz"
    shutil.copy(RESNET, src)
    before = sorted(tmp_path.iterdir())
    args = [str(src) if a == "SRC" else str(tmp_path / "x.txt") if a == "OUT.txt" else a for a in args]
    proc = cli(src, *args)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert sorted(tmp_path.iterdir()) == before and src.read_bytes() == RESNET.read_bytes()


# ----------------------------------------------------------------------------- the annotated trace


def _comparable(report: dict) -> dict:
    report = dict(report)
    report["trace"] = {k: v for k, v in report["trace"].items() if k == "events"}
    report.pop("notes")
    return report


@pytest.mark.parametrize("name", ["kineto/v100_resnet50_train.json.gz", "hta/a100_alexnet_nosteps.json.gz",
                                  "hta/v100_ddp_rank1.json.gz"])
def test_annotated_trace_reads_back_the_same(tmp_path, name):
    src = TRACES / name
    out = tmp_path / "annotated.json"
    proc = cli(src, "--annotate", out, "--json")
    assert proc.returncode == 0, proc.stderr
    original = json.loads(proc.stdout)
    again = json.loads(cli(out, "--json").stdout)
    assert _comparable(again) == _comparable(original)
    assert any("Findings track" in n for n in again["notes"])
    doc = json.loads(out.read_text())
    with gzip.open(src, "rt") as f:
        events = json.load(f)["traceEvents"]
    drawn = [e for e in doc["traceEvents"] if e.get("pid") == doc["report_findings"]["pid"]]
    assert doc["traceEvents"][len(drawn):] == events  # every original event, unchanged and in order
    assert doc["report_findings"]["events"] == len(drawn)
    assert {"process_name", "thread_name"} <= {e["name"] for e in drawn if e["ph"] == "M"}


def test_annotated_lesson_trace_marks_the_findings_where_they_happen(runs):
    run = runs["01_cold_sched"]
    trace = lesson_trace(run)
    annotated = run.trace_dir / f"64_{CPU_DTYPE}_cold_eager_sched-0-0-20.annotated.json"
    assert parse_tag(annotated.name).variant("sched") == "0-0-20"
    doc = json.loads(annotated.read_text())
    slices = {e["name"]: e for e in doc["traceEvents"] if e.get("cat") == "finding" and e["ph"] == "X"}
    steps = sorted((e for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    # which findings fire depends on the machine's load (a busy machine hides the cold step in its noise):
    # every finding of this very trace that points somewhere is marked, and each where it happens
    tables, findings = analyze(trace)
    assert set(slices) == {f.rule for f in findings if f.spans} and slices, sorted(slices)
    if "cold_first_step" in slices:
        cold = slices["cold_first_step"]
        assert (cold["ts"], cold["dur"]) == pytest.approx((steps[0]["ts"], steps[0]["dur"]), abs=1e-2)
        assert "--warmup" in cold["args"]["hint"] and cold["args"]["evidence"]["first_step"] == "ProfilerStep#0"
    if "annotation_gap" in slices:
        ann = min((e for e in doc["traceEvents"] if e.get("name") == "matmul_add"), key=lambda e: e["ts"])
        assert slices["annotation_gap"]["ts"] == pytest.approx(ann["ts"], abs=1e-2)
    window = (steps[0]["ts"], steps[-1]["ts"] + steps[-1]["dur"])
    for e in slices.values():
        assert window[0] - 1e-2 <= e["ts"] and e["ts"] + e["dur"] <= window[1] + 1e-2
    report = to_json(tables, findings)
    assert to_json(*analyze(annotated))["findings"] == report["findings"]


# ----------------------------------------------------------------------------- in a real browser


# Each SVG's size, and where each verdict line is drawn: [its figure's id (null: in none), its height, how far
# under what is right above it it starts (the figure's picture for its first verdict, the verdict before
# for the next ones), whether it lies inside its figure, its text].
HARNESS = """<!doctype html><html><body><iframe id="f" src="{page}" width="1100" height="900"></iframe>
<pre id="out">pending</pre><script>
const placed = v => {{
  const f = v.closest("figure"), r = v.getBoundingClientRect();
  if (!f) return [null, Math.round(r.height), null, false, v.textContent];
  const before = v.previousElementSibling, box = f.getBoundingClientRect();
  const above = (before && before.matches("p.verdict") ? before : f.querySelector("svg")).getBoundingClientRect();
  return [f.id, Math.round(r.height), Math.round(r.top - above.bottom),
          r.top >= box.top - 0.5 && r.bottom <= box.bottom + 0.5, v.textContent];
}};
document.getElementById("f").onload = () => {{
  const d = document.getElementById("f").contentDocument;
  const sizes = [...d.querySelectorAll("svg")].map(s => {{ const r = s.getBoundingClientRect();
                                                          return [Math.round(r.width), Math.round(r.height)]; }});
  const verdicts = [...d.querySelectorAll("p.verdict")].map(placed);
  document.getElementById("out").textContent = "SIZES " + JSON.stringify(sizes) + " VERDICTS " + JSON.stringify(verdicts);
}};
</script></body></html>"""


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--enable-logging=stderr",
                           "--v=0", *args], capture_output=True, text=True, timeout=90)


def _not_blank(png: Path) -> bool:
    from PIL import Image

    image = Image.open(png).convert("RGB").reduce(4)
    colours = image.getcolors(maxcolors=1 << 20) or []
    inked = sum(n for n, c in colours if sum(c) < 600)  # not white or near-white
    return len(colours) > 20 and inked > 0.01 * image.width * image.height


def measured(page: Path, tmp_path: Path) -> tuple[list, list]:
    """``page`` in a real browser (in HARNESS's frame): each SVG's size and where each verdict is drawn."""
    harness = tmp_path / "harness.html"
    harness.write_text(HARNESS.format(page=page.name))
    proc = _chromium("--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom",
                     harness.as_uri(), profile=tmp_path / "p2")
    sizes = json.loads(re.search(r"SIZES (\[.*?\]) VERDICTS", proc.stdout).group(1))
    return sizes, json.loads(html.unescape(re.search(r"VERDICTS (\[.*?\])</pre>", proc.stdout).group(1)))


def misplaced(verdicts: list) -> list:
    """The verdicts (as ``measured``) not printed under their plot: each must be in a figure, drawn (a line
    high at least), start less than 60 px under what is right above it, and lie inside its figure."""
    return [v for v in verdicts if not (v[0] and v[1] >= 10 and 0 <= v[2] < 60 and v[3])]


@pytest.mark.usefixtures("chromium")  # skips without Chromium, fails in CI
@pytest.mark.parametrize("which", ["cpu", "gpu", "compare"])
def test_pages_in_a_real_browser(runs, tmp_path, which):
    page = tmp_path / f"{which}.html"
    if which == "cpu":
        shutil.copy(runs["01_cold_sched"].trace_dir / f"64_{CPU_DTYPE}_cold_eager_sched-0-0-20.html", page)
    elif which == "gpu":
        assert cli(RESNET, "--html", page).returncode == 0
    else:
        a, b = lesson_trace(runs["01_default"]), lesson_trace(runs["02_eager"])
        assert cli("--compare", a, b, "--html", page).returncode == 0
    shot = tmp_path / "shot.png"
    proc = _chromium(f"--screenshot={shot}", "--window-size=1100,1400", page.as_uri(), profile=tmp_path / "p1")
    assert shot.exists(), proc.stderr
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line or "Failed to load" in line]
    assert console == [], console
    assert _not_blank(shot)
    sizes, verdicts = measured(page, tmp_path)
    assert sizes and all(w > 100 and h > 50 for w, h in sizes), sizes
    assert misplaced(verdicts) == [], verdicts
    if which == "compare":
        assert [(plot, text.split(":")[0]) for plot, *_, text in verdicts] == [("compare-cpu", "CPU per step")]


@pytest.mark.usefixtures("chromium")
def test_stacked_verdicts_in_a_real_browser(tmp_path):
    """A plot's verdict printed twice: the copy, under the first and so well below the picture, passes;
    a verdict moved far from its plot is caught (the page as the report writes it, those lines added)."""
    page = tmp_path / "gpu.html"
    assert cli(RESNET, "--html", page).returncode == 0
    text = page.read_text()
    line = re.search(r'<p class="verdict .*?</p>', figure_html(text, "breakdown"))[0]
    text = text.replace(line, line * 2, 1)
    far = '<p class="verdict note" data-rule="far" style="position: relative; top: 400px">far</p>'
    end = text.index("</figure>", text.index('<figure id="kernels"'))
    page.write_text(text[:end] + far + text[end:])
    _, verdicts = measured(page, tmp_path)
    first, again = [v for v in verdicts if v[0] == "breakdown"][:2]
    assert first[4] == again[4] and first[2] + first[1] + again[2] >= 60, verdicts  # the copy: far under the svg
    assert [(plot, line) for plot, *_, line in misplaced(verdicts)] == [("kernels", "far")], verdicts
