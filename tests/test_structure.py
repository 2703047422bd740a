"""The report's layout holds (issue 19): renderers read tables and findings only, never the job's reader
(``ranks``) nor another module's private names; the rules' modules stay small."""

from __future__ import annotations

import ast
import re

import pytest

from conftest import REPO

REPORT = REPO / "common" / "report"
RENDERERS = sorted((REPORT / "render").glob("*.py"))


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
    assert not [m for m, _ in found if m == "common.report.job.ranks"], path.name
    private = [(m, n) for m, n in found if m.startswith("common.") and n.startswith("_") and n != "__future__"]
    assert not private, private


def test_rules_modules_stay_small():
    sizes = {p.name: len(p.read_text().splitlines()) for p in (REPORT / "rules").glob("*.py")}
    assert max(sizes.values()) <= 300, sizes


# Issue 29: the import graph of common/, counted the way Python imports it.
COMMON = REPO / "common"
RENDERER_NAMES = ("render/*.py",)


def _module_name(path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(COMMON.rglob("*.py"))}


def imported_modules(name: str) -> set:
    """The modules of common/ that module ``name`` imports: at the top, inside a function (a lazy import runs
    when the function does) and under ``if TYPE_CHECKING:`` (the import a type checker follows: a stage that
    names a later stage's type depends on it all the same). ``from P import x`` imports ``P.x`` when that is a
    module, else ``P`` itself (a package: its ``__init__.py``)."""
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return {m for m in out if m in MODULES and m != name}


def with_packages(modules: set) -> set:
    """``modules`` and the packages Python initialises on the way to each: ``import a.b.c`` runs
    ``a/__init__.py`` and ``a/b/__init__.py`` first."""
    parents = {".".join(m.split(".")[:k]) for m in modules for k in range(1, m.count(".") + 1)}
    return modules | {p for p in parents if p in MODULES}


GRAPH = {name: imported_modules(name) for name in MODULES}
# The import graph as Python runs it: an import also initialises the packages above the module it names. A
# package's __init__ that imports its own modules, one of which imports a sibling through the package, is a
# cycle here (``rules/__init__.py`` importing every theme, each theme importing ``common.report.rules.advice``).
RUN_GRAPH = {name: with_packages(GRAPH[name]) - {name} for name in MODULES}


def cycles(graph: dict) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), and modules that import themselves."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph[v]:
                out.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def reachable(graph: dict, start: str) -> set:
    seen, todo = set(), [start]
    while todo:
        for w in graph[todo.pop()] - seen:
            seen.add(w)
            todo.append(w)
    return seen


def test_no_import_cycle_in_common():
    """No cycle, counted through packages and with TYPE_CHECKING imports counted (issue 39)."""
    assert not cycles(RUN_GRAPH), cycles(RUN_GRAPH)


def test_cycle_finder_sees_a_package_init_cycle():
    """The check itself: a package whose __init__ defines what its modules import back is a cycle, and so is
    one whose __init__ imports its modules when one of them imports a sibling through the package."""
    graph = {"p": {"p.a"}, "p.a": {"p"}, "q": set()}
    assert cycles(graph) == [["p", "p.a"]]
    assert with_packages({"common.report.rules.advice"}) == \
        {"common", "common.report", "common.report.rules", "common.report.rules.advice"}


def test_the_graph_counts_type_checking_imports():
    """An import under ``if TYPE_CHECKING:`` is an edge: a type a module names is a module it depends on."""
    assert "torch" not in GRAPH["common.device"]  # (only modules of common/ are counted)
    assert "common.guess" in GRAPH["common.lesson"]  # imported under TYPE_CHECKING only


RENDERERS_ALL = sorted({p for pattern in RENDERER_NAMES for p in REPORT.glob(pattern)})


@pytest.mark.parametrize("path", RENDERERS_ALL, ids=lambda p: p.name)
def test_renderers_reach_no_rules_module(path):
    """A renderer shows findings (common.report.findings); it neither imports a rule nor reaches one
    through what it imports (the package common.report, whose analyze runs them, included)."""
    rules = {m for m in reachable(GRAPH, _module_name(path)) | GRAPH[_module_name(path)]
             if m == "common.report.rules" or m.startswith("common.report.rules.") or m == "common.report"}
    assert not rules, rules


def test_shared_modules_import_nothing_from_the_report():
    """The modules of common/ the report uses (output, errors, commands, ...) import nothing from
    common/report: the dependency runs report -> shared only. The lessons' helpers that print the
    report (common/lesson.py, common/distributed.py) are its callers, and the report imports none of them."""
    report = {m for m in MODULES if m == "common.report" or m.startswith("common.report.")}
    shared = set().union(*(GRAPH[m] for m in report)) - report
    assert shared >= {"common.output", "common.errors", "common.commands"}, shared
    wrong = {m: GRAPH[m] & report for m in shared if GRAPH[m] & report}
    assert not wrong, wrong
    callers = {m for m in MODULES if m not in report and GRAPH[m] & report}
    assert not callers & set().union(*(reachable(GRAPH, m) for m in report)), callers


# Issue 29: the folders are the stages, and each stage reads only the ones before it.
STAGES = ("load", "model", "facts", "rules", "compare", "job", "render")
ORDER = {"load": 0, "model": 1, "facts": 2, "rules": 3, "compare": 4, "job": 4, "render": 5}
BASE = {"common.report.findings", "common.report.units", "common.report.rates"}  # what every stage may use


def _stage(module: str):
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["common", "report"] and parts[2] in ORDER else None


ENTRY = ("cli", "pipeline.py")  # the ways in (issue 29): they call the stages, no stage calls them


def test_the_report_is_one_folder_per_stage_and_a_few_shared_modules():
    top = {p.name for p in REPORT.iterdir() if not p.name.startswith((".", "__pycache__"))}
    assert top == {*STAGES, *ENTRY, "__init__.py", "__main__.py", *(m.rsplit(".", 1)[1] + ".py" for m in BASE)}, top
    for stage in (*STAGES, "cli"):
        doc = ast.get_docstring(ast.parse((REPORT / stage / "__init__.py").read_text())) or ""
        assert "In:" in doc and "Out:" in doc, f"{stage}/__init__.py says what comes in and goes out"


def test_each_stage_imports_only_earlier_stages():
    back = sorted((m, w) for m in MODULES if _stage(m) for w in GRAPH[m]
                  if _stage(w) and ORDER[_stage(w)] > ORDER[_stage(m)])
    assert not back, back
    base = sorted((m, w) for m in BASE for w in GRAPH[m] if w.startswith("common.report."))
    assert not base, base


# Issue 29: every number of Tables is read, and each rules theme's own numbers sit in its record.
TABLES_NAMES = ("t", "tables")  # what the report's code calls a Tables
FACTS = REPORT / "facts"
READERS = {name: path for name, path in MODULES.items() if FACTS not in path.parents}  # common/ outside facts/


def tables_reads(path) -> set:
    """What one module reads off a Tables: ("gemm",) and ("gemm", "occupancy") for ``t.gemm.occupancy.queried``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if chain and isinstance(node, ast.Name) and node.id in TABLES_NAMES:
            chain.reverse()
            out |= {tuple(chain[:1]), tuple(chain[:2])}
    return out


READS = {name: tables_reads(path) for name, path in READERS.items()}


def _tables_fields() -> tuple[dict, dict]:
    """({general field: its type}, {theme record field: its class}): a theme's record is a ``...Facts`` class."""
    import dataclasses

    from common.report.facts import tables

    general, records = {}, {}
    for f in dataclasses.fields(tables.Tables):
        if str(f.type).endswith("Facts"):
            records[f.name] = getattr(tables, str(f.type))
        else:
            general[f.name] = f.type
    return general, records


GENERAL, RECORDS = _tables_fields()


def readers(*chain: str) -> set:
    return {name for name, reads in READS.items() if chain in reads}


def test_tables_reader_sees_what_rules_read():
    """The check itself: it finds the rules' reads (a nested attribute chain, a record's field)."""
    assert "common.report.rules.gemm" in readers("kernels")
    assert tables_reads(REPORT / "rules" / "trace.py") >= {("model",), ("numbers",)}


def test_every_tables_field_is_read_outside_the_facts():
    """No dead number: each field of Tables, and each field of a theme's record, is read by a module
    of common/ outside facts/ (a rule, a renderer, compare or job)."""
    import dataclasses

    dead = [name for name in [*GENERAL, *RECORDS] if not readers(name)]
    dead += [f"{name}.{f.name}" for name, record in RECORDS.items() for f in dataclasses.fields(record)
             if not readers(name, f.name)]
    assert not dead, dead


def _rules_module(name: str):
    return name.rpartition(".")[2] if name.startswith("common.report.rules.") else None


DESCRIBES_THE_RUN = {"gpu"}  # not a number of one theme: the device itself, which any theme may come to read


def test_a_number_one_rules_theme_reads_is_in_its_record():
    """A general table is read by several modules; one that a single rules module alone reads belongs in
    that theme's record (facts/<theme>.py: docs/report.md, "Adding a rule")."""
    alone = {field: next(iter(readers(field))) for field in set(GENERAL) - DESCRIBES_THE_RUN if len(readers(field)) == 1}
    wrong = {field: who for field, who in alone.items() if _rules_module(who)}
    assert not wrong, wrong


def test_each_theme_record_is_its_themes_alone():
    """Each record is made in facts/<theme>.py for rules/<theme>.py, which reads it; no other rules
    module reads it (a renderer may show it)."""
    rules = {p.stem for p in (REPORT / "rules").glob("*.py")}
    for field, record in RECORDS.items():
        theme = record.__module__.rpartition(".")[2]
        assert record.__module__ == f"common.report.facts.{theme}" and theme in rules, (field, record.__module__)
        by_rules = {_rules_module(name) for name in readers(field)} - {None}
        assert by_rules == {theme}, (field, by_rules)


def test_facts_modules_stay_under_450_lines():
    sizes = {p.name: len(p.read_text().splitlines()) for p in FACTS.glob("*.py")}
    assert max(sizes.values()) <= 450, {name: n for name, n in sizes.items() if n > 450}


# Issue 29: the entry layer one way. The command line (__main__, cli/) and the pipeline call the package; the
# package's own modules never call back into them, nor go through the facade (common/report/__init__.py).
def _is_entry(module: str) -> bool:
    return module in ("common.report", "common.report.__main__", "common.report.pipeline") or \
        module.startswith("common.report.cli")


def test_nothing_in_the_report_imports_the_facade_or_the_command_line():
    report = [m for m in MODULES if m.startswith("common.report.")]
    back = sorted((m, w) for m in report for w in GRAPH[m] & {"common.report", "common.report.__main__"})
    assert not back, back


def test_no_stage_imports_the_entry_layer():
    stages = [m for m in MODULES if _stage(m) or m in BASE]
    back = sorted((m, w) for m in stages for w in GRAPH[m] if _is_entry(w))
    assert not back, back
    assert not {w for w in GRAPH.get("common.report.pipeline", ()) if w.startswith("common.report.cli")}


def test_the_facade_names_resolve_and_import_stays_cheap():
    """Every name common/report/__init__.py offers is a function of the module it names, loaded on first use."""
    import importlib
    import subprocess
    import sys

    report = importlib.import_module("common.report")
    for name in report.__all__:
        assert callable(getattr(report, name)), name
    code = "import sys, common.report; print(sorted(m for m in sys.modules if m.startswith('common.report.')))"
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert p.stdout.strip() == "[]", p.stdout + p.stderr


@pytest.mark.parametrize("path", RENDERERS_ALL, ids=lambda p: p.name)
def test_renderers_reach_no_verdict_of_a_comparison(path):
    """A renderer shows a comparison's verdict (compare.judge's dict, compare.variants' versus); it neither
    judges one (compare.control) nor makes one: of the compare stage it reads only the names (compare.rows)."""
    judging = {m for m in reachable(GRAPH, _module_name(path)) | GRAPH[_module_name(path)]
               if m.startswith("common.report.compare.") and m != "common.report.compare.rows"}
    assert not judging, judging


def test_no_module_in_common_over_450_lines():
    """Issue 29: modules of one job and a few hundred lines, everywhere in common/ (the lessons' helpers too)."""
    sizes = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in COMMON.rglob("*.py")}
    assert len(sizes) > 100
    assert not {name: n for name, n in sizes.items() if n > 450}


LESSON_NAME = re.compile(r"\b0[1-6]_[a-z]")  # 01_matmul_add, 04_a_..., 05_llm: a lesson's file name
TRANSLATION = REPO / "common" / "report" / "facts" / "knob_work.py"


def lesson_names_in_code(path) -> list[str]:
    """Each string of ``path``'s code (docstrings aside) that spells a lesson's name: a comparison with a script
    name, or a message that names a lesson."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [f"{path.name}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and LESSON_NAME.search(node.value)]


def test_only_the_translation_module_knows_a_lesson_by_name():
    """The report reads the workload's own count, never which script wrote the trace: one module translates the
    knobs of traces written before the count (and keeps the posts' order); no other module's code names a
    lesson (docstrings and --help examples may)."""
    modules = [p for p in (REPO / "common" / "report").rglob("*.py") if p != TRANSLATION and p.name != "args.py"]
    assert not [hit for p in modules for hit in lesson_names_in_code(p)]
    assert lesson_names_in_code(TRANSLATION)  # the check sees a name where there is one


def test_args_names_lessons_in_its_help_examples_only():
    """cli/args.py's lesson names are its --help text's examples (the module's docstring and the epilog)."""
    path = REPO / "common" / "report" / "cli" / "args.py"
    hits = lesson_names_in_code(path)
    assert all("uv run -m common.report" in hit for hit in hits), hits


def inflected_pairs(stems) -> list[tuple[str, str]]:
    """Module names where one is the other with a few letters more: one word in two forms (read, reader;
    guess, guessed), which says two modules hold one idea, or two ideas share a name."""
    return sorted((a, b) for a in set(stems) for b in set(stems)
                  if a != b and b.startswith(a) and b[len(a):].isalpha() and len(b) - len(a) <= 3)


def test_no_two_modules_are_one_word_in_two_forms():
    """Issue 39: a loader module named ``read`` beside one named ``reader``, the guess's facts in ``guessed`` beside
    the rules' ``guess``. The
    same name in several stage folders is one theme through the stages (``facts/guess.py``, ``rules/guess.py``,
    ``render/guess.py``) and fine."""
    assert inflected_pairs(["read", "reader", "guess", "guessed", "memory", "memory_ops"]) == \
        [("guess", "guessed"), ("read", "reader")]
    assert not inflected_pairs(p.stem for p in COMMON.rglob("*.py"))


SCALED_BYTES = re.compile(r"^\s*[kMGTP]i?B\b")  # a size or rate written with a unit prefix: kB, MB, GiB, GB/s


def inline_byte_formats(path) -> list[str]:
    """Each f-string of a module that writes a number followed by a prefixed byte unit (``f"{b / 1e6:.1f} MB"``,
    ``f"{gbs:.0f} GB/s"``): a byte formatter of its own."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.JoinedStr):
            pairs = zip(node.values, node.values[1:])
            out += [f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}" for a, b in pairs
                    if isinstance(a, ast.FormattedValue) and isinstance(b, ast.Constant) and SCALED_BYTES.match(b.value)
                    and "named" not in ast.unparse(a)]
    return out


BYTE_FORMATTERS = {COMMON / "amounts.py": ["fmt_bytes_binary", "fmt_bytes_decimal", "fmt_bytes_exact"],
                   REPORT / "rates.py": ["fmt_gbs"]}  # sizes in bytes; bytes per second


def test_the_suite_writes_bytes_with_its_formatters():
    """Issue 39: one formatter per unit, named for it (amounts.fmt_bytes_decimal, fmt_bytes_binary, fmt_bytes_exact;
    rates.fmt_gbs); no module of the report, the lessons' console or the viewer writes a size in MB or GiB, or a
    rate in GB/s, its own way (the size a device's name says, "80 GB", is quoted, not formatted)."""
    modules = [p for p in (*COMMON.rglob("*.py"), *REPO.glob("[0-9]*.py")) if p not in BYTE_FORMATTERS]
    found = [hit for p in modules for hit in inline_byte_formats(p)]
    found += [f"{p.name}: def {n.name}" for p in modules for n in ast.walk(ast.parse(p.read_text()))
              if isinstance(n, ast.FunctionDef) and ("bytes" in n.name or "gbs" in n.name)
              and n.name.startswith(("fmt", "_fmt"))]
    assert not found, found
    for path, names in BYTE_FORMATTERS.items():
        tree = ast.parse(path.read_text())
        assert sorted(n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names) == names


def lazy_imports_without_a_reason(path) -> list[str]:
    """The imports inside a function of ``path`` whose line holds no ``# lazy:`` comment."""
    text = path.read_text()
    lines = text.splitlines()
    return [f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}" for fn in ast.walk(ast.parse(text))
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) for node in ast.walk(fn)
            if isinstance(node, (ast.Import, ast.ImportFrom)) and "# lazy:" not in lines[node.end_lineno - 1]]


def test_an_import_inside_a_function_says_what_it_saves():
    """Issue 39: imports sit at the top of their module; one inside a function is kept only where it saves a
    measured start-up cost (torch before a lesson's --help, matplotlib until a page is drawn, numpy and the
    report's stages before the report's --help, rich that --json never loads, a renderer only one flag needs),
    and says so: ``# lazy: torch, 3.7 s: ...``."""
    assert lazy_imports_without_a_reason(COMMON / "report" / "render" / "plots.py") == []
    found = sorted({hit for p in COMMON.rglob("*.py") for hit in lazy_imports_without_a_reason(p)})
    assert not found, found
