"""The report's layout holds (issue 19): renderers read tables and findings only, never the job's reader
(``ranks``) nor another module's private names; the rules' modules stay small."""

from __future__ import annotations

import ast

import pytest

from conftest import REPO

REPORT = REPO / "common" / "report"
RENDERERS = sorted([*REPORT.glob("render*.py"), REPORT / "html.py", REPORT / "annotate.py", REPORT / "glance.py"])


def imports(path) -> list[tuple[str, str]]:
    """(module, name) of every ``from MODULE import NAME`` in the file, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            out += [(alias.name, "") for alias in node.names]
    return out


@pytest.mark.parametrize("path", RENDERERS, ids=lambda p: p.name)
def test_renderers_import_no_private_name_and_not_ranks(path):
    found = imports(path)
    assert not [m for m, _ in found if m == "common.report.ranks"], path.name
    private = [(m, n) for m, n in found if m.startswith("common.") and n.startswith("_") and n != "__future__"]
    assert not private, private


def test_rules_modules_stay_small():
    sizes = {p.name: len(p.read_text().splitlines()) for p in (REPORT / "rules").glob("*.py")}
    assert max(sizes.values()) <= 300, sizes
