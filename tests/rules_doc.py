"""docs/report.md's table of the rules, made from the rules themselves: a rule's words live in its docstring.

    uv run python tests/rules_doc.py            # exit 1, and the rows that differ, if the table is stale
    uv run python tests/rules_doc.py --write    # write the table anew into docs/report.md

One row per rule of :data:`common.report.rules.registry.RULES`, in the report's order: its name, its theme (the
module it lives in) and its docstring's first paragraph, its reST literals and cross-references written as
Markdown code. tests/test_docs_commands.py checks that the table is this one.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "report.md"
HEAD = "| rule | theme | what it recognises |\n|---|---|---|\n"


def markdown(text: str) -> str:
    """A docstring paragraph as one line of Markdown."""
    text = re.sub(r":[a-z]+:`~?\.?([^`]+)`", lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text)
    text = re.sub(r"``docs/([\w-]+\.md)``", r"[\1](\1)", text)  # another page of the docs: a link to it
    return " ".join(text.replace("``", "`").split())


def row(rule) -> str:
    first = inspect.getdoc(rule).split("\n\n")[0]
    return f"| `{rule.__name__}` | {rule.__module__.rsplit('.', 1)[-1]} | {markdown(first)} |"


def table() -> str:
    from common.report.rules.registry import RULES

    return HEAD + "".join(row(rule) + "\n" for rule in RULES)


def in_doc(text: str) -> str:
    """The table as docs/report.md holds it (from its header to the first line that is no row)."""
    start = text.index(HEAD)
    end = start + len(HEAD)
    while text.startswith("| `", end):
        end = text.index("\n", end) + 1
    return text[start:end]


def main(argv: list[str]) -> int:
    text = DOC.read_text()
    now, want = in_doc(text), table()
    if "--write" in argv:
        DOC.write_text(text.replace(now, want))
        return 0
    stale = sorted(set(want.splitlines()) ^ set(now.splitlines()))
    print("\n".join(stale) or "docs/report.md's table of rules is up to date")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main(sys.argv[1:]))
