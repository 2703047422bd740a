"""Fill the "seen on" column of docs/gpu-claims.md from a GPU run's results.

A row's check column names what decides it: a pytest test (`` `test_p1_3_...` ``), whose verdict
comes from the claims log (one JSON line per verdict, see ``claims.record``) or, when the test never
reached a verdict, from its JUnit outcome; or a report rule on a run (`` `kernel_gap` on
`p1_64_active20` ``), read from that run's report JSON.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

TEST_RE = re.compile(r"`(test_\w+)`")
RULE_RE = re.compile(r"`(\w+)` on `(\w+)`")
CELL_CHARS = 300


def read_verdicts(log: Path) -> dict[str, dict]:
    """The last verdict per claim id from a claims log (JSON lines)."""
    out = {}
    if log.exists():
        for line in log.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                out[row["claim"]] = row
    return out


def read_outcomes(junit: Path) -> dict[str, str]:
    """Test name -> 'passed' | 'failed: ...' | 'skipped: ...' from a JUnit XML file."""
    out = {}
    if not junit.exists():
        return out
    for case in ET.parse(junit).iter("testcase"):
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                word = "skipped" if tag == "skipped" else "failed"
                outcome = f"{word}: {(el.get('message') or '').splitlines()[0] if el.get('message') else tag}"
                break
        out[case.get("name", "")] = outcome
    return out


def read_reports(runs: Path) -> dict[str, dict]:
    """Run key -> its report JSON (``runs/<key>/report.json``)."""
    out = {}
    for path in sorted(Path(runs).glob("*/report.json")):
        try:
            out[path.parent.name] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return out


def seen(check_cell: str, claim: str, verdicts: dict, outcomes: dict, reports: dict) -> str:
    """What the run showed for one row, in words (without the machine), or '' when nothing decided it."""
    verdict = verdicts.get(claim)
    if verdict is not None:
        if verdict["holds"]:
            return f"holds: {verdict['variant']}" + (f" ({verdict['evidence']})" if verdict["evidence"] else "")
        return f"DOES NOT HOLD: {verdict['evidence']}"
    for test in TEST_RE.findall(check_cell):
        if test in outcomes:
            return outcomes[test]
    parts = []
    for rule, key in RULE_RE.findall(check_cell):
        report = reports.get(key)
        if report is None:
            parts.append(f"no report for {key}")
            continue
        found = [f for f in report.get("findings", []) if f.get("rule") == rule]
        parts.append(f"{rule} on {key}: {found[0]['message']}" if found else f"{rule} did not fire on {key}")
    return "; ".join(parts)


def fill(doc: str, machine: str, verdicts: dict, outcomes: dict, reports: dict) -> str:
    """``doc`` with each claim row's last cell ("seen on") set to ``machine: what the run showed``, or emptied
    where the run decided nothing (the committed doc's column is another machine's)."""
    lines = []
    for line in doc.splitlines():
        cells = line.split("|")
        if len(cells) >= 5 and re.fullmatch(r"\s*[PG]\d\.\d+\s*", cells[1]):  # the posts' claims, the guides' (G)
            what = seen(cells[-3], cells[1].strip(), verdicts, outcomes, reports)
            text = f"{machine}: {what}".replace("|", "/").replace("\n", " ") if what else ""
            cells[-2] = f" {text[:CELL_CHARS]}{'…' if len(text) > CELL_CHARS else ''} "  # another GPU's words go
            line = "|".join(cells)
        lines.append(line)
    return "\n".join(lines) + "\n"
