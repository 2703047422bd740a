"""Every reference the words make resolves against the tree (issue 39): a docstring's or comment's
``:mod:``, ``:func:``, ``:class:``, ``:meth:``, ``:data:``, ``:attr:`` target, every dotted name such as
``common.report.units``, and every code path that a docstring, a comment or a Markdown file of the tree (README.md,
docs/, the benchmarks' and the test data's notes) names. A module that moves or a name that changes takes its
references with it, or this fails.

**Targets, by Python's rules** (not Sphinx's, which would take ``.x`` as "any name ending in x"):

- ``~`` only shortens how the name is shown: dropped;
- leading dots are a relative import from the module that holds the reference, as ``from .x import y``
  reads them there: ``.judge`` in ``common/report/rules/gemm.py`` (or in ``rules/__init__.py``) is
  ``common.report.rules.judge``, ``..units`` is ``common.report.units``;
- without them, the first name is one the module's own code sees (defined or imported at its top level,
  or, for a reference inside a class, a name of that class), else a module by its absolute name;
- each further name is an attribute: a submodule, a name defined or imported at a module's top level, or a
  name of a class's body (methods, fields, ``self.x`` set in its methods), its bases' included.

The repository's modules are read, not imported (``common.*`` from the root; the files of ``tests/``,
``tests/gpu/`` and ``benchmarks/`` by their own names, as those folders run them); other modules
(``os``, ``secrets``) are imported.

**Code paths**: a word ending in ``.py`` (a ``:LINE`` after it must be a line of the file), or starting with
``common/``, ``tests/``, ``benchmarks/`` or ``docs/``, is a file or folder of the tree, found from the folder of
the file that names it or one of that folder's parents up to the root, else as the one path of the tree that ends
with it (``facts/tables.py`` from docs/; a file name two files share must say which folder). A few words name
another project's files, a placeholder or an output: :data:`NOT_OURS` lists each, with why; a path git
ignores (``traces/...``) or a file a run writes beside its trace (``<trace>.graph0.py``) is an output.
"""

from __future__ import annotations

import ast
import builtins
import fnmatch
import functools
import importlib
import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

TRACKED = [p for p in subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                                     capture_output=True, text=True, check=True).stdout.split() if (REPO / p).exists()]
PY_FILES = sorted(REPO / p for p in TRACKED if p.endswith(".py"))
DOC_FILES = sorted(REPO / p for p in TRACKED if p.endswith(".md"))  # README.md, docs/, the benchmarks' and the data's
SCRIPT_FOLDERS = ("tests", "tests/gpu", "benchmarks")  # each is on sys.path when its files run: files by stem


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO)
    if str(rel.parent) in SCRIPT_FOLDERS:
        return rel.stem
    parts = list(rel.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PY_FILES if not p.stem[0].isdigit()}  # the lessons are run, never imported
PARSED: dict = {}


def tree_of(path: Path) -> ast.Module:
    if path not in PARSED:
        PARSED[path] = ast.parse(path.read_text())
    return PARSED[path]


def _bound_names(target) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _top_statements(body: list) -> list:
    """The statements that run at this level: inside ``if``/``try``/``with`` blocks too (``if TYPE_CHECKING:``)."""
    out = []
    for node in body:
        out.append(node)
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody"):
                out += _top_statements(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                out += _top_statements(handler.body)
    return out


def namespace(body: list, module: str, is_package: bool) -> dict:
    """{name: ("def", node) | ("import", absolute dotted name)} of one scope's statements."""
    out: dict = {}
    for node in _top_statements(body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = ("def", node)
        elif isinstance(node, ast.Assign):
            out.update({n: ("def", node) for t in node.targets for n in _bound_names(t)})
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            out.update({n: ("def", node) for n in _bound_names(node.target)})
        elif isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = ("import", a.name if a.asname else a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            base = relative(node.module or "", node.level, module, is_package)
            out.update({a.asname or a.name: ("import", f"{base}.{a.name}") for a in node.names})
    return out


def relative(name: str, level: int, module: str, is_package: bool) -> str:
    """``name`` after ``level`` dots, read from ``module`` as Python reads ``from .name import``."""
    if not level:
        return name
    package = module.split(".") if is_package else module.split(".")[:-1]
    anchor = package[:len(package) - level + 1]
    return ".".join(anchor + ([name] if name else []))


def class_names(node: ast.ClassDef, module: str, is_package: bool) -> dict:
    out = namespace(node.body, module, is_package)
    for fn in node.body:
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(fn):
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "self" \
                        and isinstance(sub.ctx, ast.Store):
                    out.setdefault(sub.attr, ("def", sub))
    return out


def resolve(dotted: str, depth: int = 0) -> bool:
    """Whether an absolute dotted name is a module, or a name inside one, of the tree or of the environment."""
    if depth > 20:
        return False
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        head = ".".join(parts[:cut])
        if head in MODULES:
            return resolve_in_module(head, parts[cut:], depth)
    return resolve_elsewhere(dotted)


@functools.cache
def module_scope(module: str) -> dict:
    path = MODULES[module]
    return namespace(tree_of(path).body, module, path.name == "__init__.py")


def resolve_in_module(module: str, rest: list[str], depth: int) -> bool:
    if not rest:
        return True
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    scope = module_scope(module)
    found = scope.get(rest[0])
    if found is None:  # a name a module-level __getattr__ offers (the facade's): listed in its __all__
        return len(rest) == 1 and "__getattr__" in scope and rest[0] in _all_of(path)
    kind, what = found
    if kind == "import":
        return resolve(".".join([what, *rest[1:]]), depth + 1)
    return resolve_in_class(what, rest[1:], module, is_package, depth)


def _all_of(path: Path) -> list[str]:
    for node in tree_of(path).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
            value = node.value
            if isinstance(value, ast.Call) and value.args:  # __all__ = list(_HOME): that dict's keys
                value = namespace(tree_of(path).body, "", False).get(ast.unparse(value.args[0]), ("", None))[1].value
            return [ast.literal_eval(k) for k in getattr(value, "keys", None) or value.elts]
    return []


def resolve_in_class(node, rest: list[str], module: str, is_package: bool, depth: int) -> bool:
    if not rest:
        return True
    if not isinstance(node, ast.ClassDef):
        return False
    found = class_names(node, module, is_package).get(rest[0])
    if found is not None:
        kind, what = found
        return resolve_in_class(what, rest[1:], module, is_package, depth) if kind == "def" else \
            resolve(".".join([what, *rest[1:]]), depth + 1)
    scope = module_scope(module)
    for base in node.bases:  # an inherited name
        name = ast.unparse(base)
        first, _, more = name.partition(".")
        if first in scope:
            kind, what = scope[first]
            target = ".".join([what] + ([more] if more else []) + rest) if kind == "import" else \
                ".".join([module, name, *rest])
            if resolve(target, depth + 1):
                return True
    return False


def resolve_elsewhere(dotted: str) -> bool:
    """A module outside the tree (``os``, ``secrets``): imported, then its attributes read."""
    parts = dotted.split(".")
    if parts[0] in MODULES:  # the tree's own package: a name it does not hold
        return False
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


ROLE = re.compile(r":(mod|func|class|meth|data|attr):`([^`<]+?)`")


STRING_OR_COMMENT = re.compile(r"""[rRbBuUfF]{0,2}(\"\"\"|'''|"|')|#[^\n]*""")
STRING_END = {q: re.compile(r"(?:\\.|(?!%s)[^\\%s])*%s" % (re.escape(q), "" if len(q) == 3 else "\n", re.escape(q)), re.S)
              for q in ('"""', "'''", '"', "'")}


@functools.cache
def texts_of(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each comment of a Python file, and of each triple-quoted string that begins a line (its
    docstrings). A scan of the source, not a parse: the suite reads every file, and tokenizing them all costs
    seconds."""
    source, out, pos = path.read_text(), [], 0
    while m := STRING_OR_COMMENT.search(source, pos):
        quote = m.group(1)
        if quote is None:
            out.append((source.count("\n", 0, m.start()) + 1, m.group(0)))
            pos = m.end()
            continue
        end = STRING_END[quote].match(source, m.end())
        if end is None:  # not a string after all (an unmatched quote in odd code): move on
            pos = m.end()
            continue
        line_start = source.rfind("\n", 0, m.start()) + 1
        if len(quote) == 3 and not source[line_start:m.start()].strip():
            out.append((source.count("\n", 0, m.start()) + 1, source[m.end():end.end() - 3]))
        pos = end.end()
    return out


@functools.cache
def classes_of(path: Path) -> list[ast.ClassDef]:
    """Every class of a file, nested ones too, by the statements alone (no expression holds a class)."""
    out, todo = [], list(tree_of(path).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.ClassDef):
            out.append(node)
        for block in ("body", "orelse", "finalbody", "handlers"):
            todo += [n for n in getattr(node, block, []) if isinstance(n, ast.stmt) or isinstance(n, ast.excepthandler)]
    return out


def enclosing_classes(path: Path, line: int) -> list[ast.ClassDef]:
    """The classes whose lines hold ``line``, innermost first."""
    found = [n for n in classes_of(path) if n.lineno <= line <= n.end_lineno]
    return sorted(found, key=lambda n: n.lineno, reverse=True)


def resolves_from(path: Path, line: int, target: str) -> bool:
    """``target`` read by the rule of this module's docstring from the module at ``path``."""
    module = module_name(path)
    is_package = path.name == "__init__.py"
    target = target.strip().lstrip("~").removesuffix("()")
    dots = len(target) - len(target.lstrip("."))
    if dots:
        return resolve(relative(target[dots:], dots, module, is_package))
    first, _, rest = target.partition(".")
    rest_parts = rest.split(".") if rest else []
    for cls in enclosing_classes(path, line):
        found = class_names(cls, module, is_package).get(first)
        if found is not None:
            kind, what = found
            return resolve_in_class(what, rest_parts, module, is_package, 0) if kind == "def" else \
                resolve(".".join([what, *rest_parts]))
    scope = module_scope(module) if module in MODULES else namespace(tree_of(path).body, module, is_package)
    if first in scope:
        kind, what = scope[first]
        return resolve(".".join([what, *rest_parts])) if kind == "import" else \
            resolve_in_class(what, rest_parts, module, is_package, 0)
    return resolve(target) or (not rest and hasattr(builtins, first))


def role_references() -> list[tuple[Path, int, str, str]]:
    out = []
    for path in PY_FILES:
        for line, text in texts_of(path):
            for m in ROLE.finditer(text):
                out.append((path, line + text[:m.start()].count("\n"), m.group(1), m.group(2)))
    return out


REFERENCES = role_references()


def test_every_role_reference_resolves_by_pythons_rules():
    bad = [f"{p.relative_to(REPO)}:{line}: :{role}:`{target}`" for p, line, role, target in REFERENCES
           if not resolves_from(p, line, target)]
    assert not bad, "\n".join(bad)


def test_the_resolver_reads_relative_names_as_python_does():
    """The check itself: a name that resolves only by Sphinx's suffix search, or not at all, fails."""
    rules_init, registry = REPO / "common/report/rules/__init__.py", REPO / "common/report/rules/registry.py"
    gemm = REPO / "common/report/rules/gemm.py"
    assert len(REFERENCES) > 100
    assert resolves_from(rules_init, 1, ".trace") and resolves_from(gemm, 1, ".judge")
    assert resolves_from(gemm, 1, "..units") and resolves_from(gemm, 1, "~common.report.facts.tables.Tables")
    assert resolves_from(rules_init, 1, "~common.report.facts.tables.Tables.gemm")  # a dataclass field
    assert resolves_from(registry, 1, "RULES") and resolves_from(registry, 1, "os.fsdecode")
    assert not resolves_from(rules_init, 1, "RULES")
    assert not resolves_from(gemm, 1, ".tables")  # common.report.facts.tables: Sphinx finds it, Python does not
    assert not resolves_from(rules_init, 1, ".render_ranks") and not resolves_from(gemm, 1, "..rules.nothing")


# ---- code paths ----------------------------------------------------------------------------------

NOT_OURS = {
    "profiler/memory_parser.py": "the TensorBoard profiler plugin's file (facts/memory_ops.py follows it)",
    "op_tree.py": "the TensorBoard profiler plugin's file",
    "benchmarks/benchmark_flash_attention.py": "flash-attention's benchmark, whose FLOP count op_arithmetic.py follows",
    "04_llm.py": "the LLM lesson's name before Part 3 took the number (traces written then still carry it)",
    "my_model.py": "a reader's own script in your-workload.md",
    "SCRIPT.py": "a placeholder",
    "DIR/01_matmul_add.py": "a placeholder folder",
    "a/b/__init__.py": "an example package in the structure test's words",
    "a/__init__.py": "the same example's",
    "__init__.py": "any package's",
    "k.py": "the guide's name for a generated kernel's module, copied out to run it (docs/compiled-kernels.md)",
    "torch/_inductor/runtime/triton_heuristics.py": "torch's own file",
    "heuristics/triton_codegen/pointwise.py": "torch's own file (Inductor's heuristics)",
    "benchmarks/data/": "the benchmarks' output (git-ignored): it and what is under it",
}
PATH = re.compile(r"(?<![\w./<>*-])((?:common|tests|benchmarks|docs)/[\w./<>*-]*[\w/*>]|[\w./<>*-]*\w\.py)(?::(\d+))?(?!\w)")
IN_TREE = {Path(p) for p in TRACKED} | {parent for p in TRACKED for parent in Path(p).parents}
BY_NAME: dict = {}  # last part -> the tracked files and folders of that name
for _p in IN_TREE:
    BY_NAME.setdefault(_p.name, []).append(_p)


def code_paths(text: str) -> list[tuple[str, int | None]]:
    """(path, line or None) of each code path in ``text``; a URL's path is another site's."""
    out = []
    for m in PATH.finditer(text):
        word_start = max(text.rfind(c, 0, m.start()) for c in " \n\t(<`'\"") + 1
        if "://" not in text[word_start:m.end()]:
            out.append((m.group(1), int(m.group(2)) if m.group(2) else None))
    return out


def in_tree(path: str, named_in: Path) -> list[Path]:
    """The tracked files or folders ``path`` names from ``named_in``: from its folder or a parent, else the one
    path of the tree that ends with it (a name two files share must say which)."""
    pattern = re.sub(r"<[^>]*>", "*", path).rstrip("/")  # facts/<theme>.py, tests/gpu/*.py: a pattern
    last = Path(pattern).name
    candidates = [p for name, paths in BY_NAME.items() if fnmatch.fnmatchcase(name, last) for p in paths] \
        if "*" in last else BY_NAME.get(last, [])
    folder = named_in.parent.relative_to(REPO)
    for base in (folder, *folder.parents):
        found = sorted(p for p in candidates if p.match(pattern) and p.parent.parts[:len(base.parts)] == base.parts
                       and len(p.parts) == len(base.parts) + len(Path(pattern).parts))
        if found:
            return found
    ending = [p for p in candidates if p.match(pattern)]
    return ending if len(ending) == 1 or "*" in pattern else []


def path_resolves(path: str, line: int | None, named_in: Path) -> bool:
    if path in NOT_OURS or any(path.startswith(folder) for folder in NOT_OURS if folder.endswith("/")):
        return True
    if path.startswith(".") or path.rpartition("/")[2].startswith("<"):  # ".graph1.py", "<trace>.graph0.py": a
        return True  # suffix, or a file a run writes beside its trace, named after it
    found = in_tree(path, named_in)
    return bool(found) and (line is None or line <= len((REPO / found[0]).read_text().splitlines()))


def named_paths() -> list[tuple[Path, int, str, int | None]]:
    out = []
    for path in PY_FILES:
        for line, text in texts_of(path):
            out += [(path, line, p, n) for p, n in code_paths(text)]
    for doc in DOC_FILES:
        for i, text in enumerate(doc.read_text().splitlines(), 1):
            out += [(doc, i, p, n) for p, n in code_paths(text)]
    return out


NAMED = named_paths()


def outputs(paths: set) -> set:
    """The paths git ignores: what a run writes (``traces/...``, ``benchmarks/data/...``), not the tree's."""
    found = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=REPO, input="\n".join(sorted(paths)),
                           capture_output=True, text=True).stdout.split()
    return set(found)


def test_every_code_path_named_resolves():
    unresolved = [(where, line, p, n) for where, line, p, n in NAMED if not path_resolves(p, n, where)]
    ignored = outputs({p for _, _, p, _ in unresolved})
    bad = [f"{where.relative_to(REPO)}:{line}: {p}" + (f":{n}" if n else "") for where, line, p, n in unresolved
           if p not in ignored]
    assert not bad, "\n".join(bad)


def test_the_path_check_sees_a_stale_path():
    """The check itself: a path that moved, or a line past a file's end, fails; one named from inside its
    own folder resolves."""
    here = REPO / "common/report/rules/gemm.py"
    assert len(NAMED) > 100
    assert path_resolves("facts/tables.py", None, here) and path_resolves("common/report/units.py", None, here)
    assert path_resolves("facts/<theme>.py", None, here) and path_resolves("render/glance.py", None, REPO / "docs/report.md")
    assert path_resolves("judge.py", None, here)  # rules/judge.py, beside it (compare/judge.py is another)
    assert not path_resolves("common/report/rules.py", None, here)
    assert not path_resolves("judge.py", None, REPO / "docs/report.md")  # which one?
    assert outputs({"traces/01_matmul_add/64_bf16_cold_eager.json", "common/report/rules.py"}) == \
        {"traces/01_matmul_add/64_bf16_cold_eager.json"}
    assert not path_resolves("tests/conftest.py", 100_000, here)


@pytest.mark.parametrize("text, found", [
    ("see common/report/rules.py", [("common/report/rules.py", None)]),
    ("``tests/conftest.py:28`` still", [("tests/conftest.py", 28)]),
    ("https://github.com/x/y/blob/main/setup.py", []),
])
def test_code_paths_are_found_in_words(text, found):
    assert code_paths(text) == found


DOTTED = re.compile(r"(?<![\w.:~/])common(?:\.\w+)+")  # common.report.load.reader, written out in words


def test_every_dotted_module_name_resolves():
    """``common.report.job.ranks`` in a docstring, a comment or a doc is a module or a name in one."""
    texts = [(p, line, text) for p in PY_FILES for line, text in texts_of(p)]
    texts += [(doc, i, text) for doc in DOC_FILES for i, text in enumerate(doc.read_text().splitlines(), 1)]
    found = [(p, line, m.group(0)) for p, line, text in texts for m in DOTTED.finditer(text)]
    assert len(found) > 50
    bad = [f"{p.relative_to(REPO)}:{line}: {name}" for p, line, name in found if not resolve(name)]
    assert not bad, "\n".join(bad)
