"""Which of the project's files a module can import: a static ``ast`` scan of ``import`` statements (module level
and inside functions; ``if TYPE_CHECKING:`` bodies do not run and do not count), transitively from an entry
module over our packages (``PACKAGES``), and the ``sha256sum`` lines of those files (``fingerprint``).

Two more kinds of edge than ``import`` statements, both strings that name a module, ``"package.module:attr"``:

* a name table (``seed_core.registries``: ``ENVS = Registry("environment", {"sokoban":
  "seed_core.envs.sokoban:SokobanEnv", ...})``) is no edge by itself: a ``ENVS.get(<name>)`` call is. A call
  with a literal name reaches that entry; any other call reaches the entries ``select`` allows for that table
  (``{"ENVS": {"sokoban"}}``: what the stage's config can choose, ``seed_core.lineage.stage_code``), every entry when
  ``select`` says nothing about it. So a stage whose config names sokoban does not depend on webshop's code.
* any other string that is exactly such a reference (``"seed_core.x:y"``) reaches its module.

One owner for two users that must agree: ``scripts/dvc_deps.py`` writes each DVC stage's code dependency
``data/code/<stage>.sha256`` from it, and ``seed_core.lineage.resume.rl_fingerprint`` hashes the same lines for the rl
stage, so finished RL rounds are reused only by the code that made them (an edit DVC sees is an edit resume sees).
Nothing is imported; the scan reads the files. Parsed files are cached by (path, mtime, size), so an edited file
is parsed again even in a long-lived process.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The project root: the folder that holds ``seed_core`` and the other ``PACKAGES``."""

PACKAGES = ("seed_core", "tasks", "flows", "seed_app")

DATA_FILES = {"seed_core/rollout/vllm_engine.py": ["seed_core/rollout/vllm_worker.py"]}
"""Code a module uses without importing it: vllm_engine copies vllm_worker.py into every engine process."""

REF = re.compile(r"(?P<module>[A-Za-z_]\w*(?:\.\w+)*):[A-Za-z_][\w.]*")
"""A ``"package.module:attr"`` reference (``seed_core.registry.load_ref``), matched against a whole string."""

Select = Mapping[str, Collection[str]]
"""Table name (``ENVS``) -> the entry names a stage can select; a table not named: all of its entries."""


@dataclass(frozen=True)
class Scan:
    """What one file can load: the dotted names it imports, the modules its reference strings name, the name
    tables it defines (table -> entry -> module) and the table lookups it makes ((table, literal name or None))."""

    imports: frozenset[str]
    refs: frozenset[str]
    tables: dict[str, dict[str, str]]
    lookups: frozenset[tuple[str, str | None]]


_PARSED: dict[tuple[Path, int, int], Scan] = {}


def module_file(name: str, root: Path = ROOT) -> Path | None:
    """``seed_core.envs.alfworld`` -> its .py file (a package -> its __init__.py); None if not ours."""
    if name.split(".")[0] not in PACKAGES:
        return None
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _runtime_nodes(tree: ast.AST):
    """Every node except the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
            else:
                stack.append(child)


def _ref_module(node: ast.AST) -> str | None:
    """The module a string constant names when it is exactly a reference to one of ours."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and (match := REF.fullmatch(node.value)):
        module = match.group("module")
        return module if module.split(".")[0] in PACKAGES else None
    return None


def _table(node: ast.AST) -> tuple[str, dict[str, str]] | None:
    """``NAME = Registry(kind, {name: "module:attr" or Entry("module:attr", ...), ...})`` (annotated or not) ->
    (NAME, {name: module})."""
    single = isinstance(node, ast.Assign) and len(node.targets) == 1
    target = node.targets[0] if single else getattr(node, "target", None)
    call = getattr(node, "value", None)
    if not (isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(target, ast.Name)
            and isinstance(call, ast.Call)):
        return None
    func = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
    literal = [a for a in [*call.args[1:2], *(k.value for k in call.keywords if k.arg == "table")]
               if isinstance(a, ast.Dict)]
    if func != "Registry" or not literal:
        return None
    entries = {}
    for key, value in zip(literal[0].keys, literal[0].values):
        if isinstance(value, ast.Call) and value.args:  # an ``Entry("module:attr", ...)`` (or a subclass)
            value = value.args[0]
        module = _ref_module(value)
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and module:
            entries[key.value] = module
    return target.id, entries


def _lookup(node: ast.AST) -> tuple[str, str | None] | None:
    """``NAME.get(arg)`` -> (NAME, arg when a string literal, else None)."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name) and node.func.value.id.isupper() and node.args):
        arg = node.args[0]
        return node.func.value.id, arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None
    return None


def scan(path: Path, root: Path = ROOT) -> Scan:
    """The ``Scan`` of ``path`` (relative imports resolved), cached while the file is unchanged."""
    stat = path.stat()
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        rel = path.relative_to(root).with_suffix("")
        package = list(rel.parts[:-1])
        names: set[str] = set()
        refs: set[str] = set()
        tables: dict[str, dict[str, str]] = {}
        lookups: set[tuple[str, str | None]] = set()
        in_table: set[int] = set()
        for node in _runtime_nodes(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package[: len(package) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                names.add(base)
                names |= {f"{base}.{alias.name}" for alias in node.names}  # `from pkg import submodule`
            elif (table := _table(node)) is not None:
                tables[table[0]] = table[1]
                in_table |= {id(n) for n in ast.walk(node)}
            elif (lookup := _lookup(node)) is not None:
                lookups.add(lookup)
            if id(node) not in in_table and (module := _ref_module(node)):
                refs.add(module)
        _PARSED[key] = Scan(frozenset(names), frozenset(refs), tables, frozenset(lookups))
    return _PARSED[key]


def _with_parents(names: Collection[str], root: Path) -> set[Path]:
    """The files of ``names`` and of their parent packages (importing a.b.c runs a/__init__, a/b/__init__)."""
    found: set[Path] = set()
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            file = module_file(".".join(parts[:i]), root)
            if file is not None:
                found.add(file)
    return found


def imported_files(path: Path, root: Path = ROOT) -> frozenset[Path]:
    """Our module files that ``path``'s ``import`` statements load, with their parent packages' __init__.py (the
    import graph: tests/unit/test_layering.py finds circles in it)."""
    return frozenset(_with_parents(scan(path, root).imports, root) - {path})


def tables(root: Path = ROOT) -> dict[str, dict[str, str]]:
    """Every name table in our packages: table name (``ENVS``) -> entry -> module; a name defined twice is an
    error (a lookup names its table by that name)."""
    found: dict[str, dict[str, str]] = {}
    where: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for name, entries in scan(path, root).tables.items():
                if name in found:
                    raise ValueError(f"two name tables called {name}: {where[name]} and {path}")
                found[name], where[name] = entries, path
    return found


def direct_imports(path: Path, root: Path = ROOT, select: Select | None = None,
                   known: dict[str, dict[str, str]] | None = None) -> frozenset[Path]:
    """Our module files that ``path`` can load: its imports (``imported_files``), the modules its reference
    strings name, and the entries of the tables it looks up that ``select`` allows (module docstring)."""
    file_scan = scan(path, root)
    known = tables(root) if known is None else known
    names = set(file_scan.imports) | file_scan.refs
    for table, name in file_scan.lookups:
        entries = known.get(table, {})  # no table: a registry filled in code, its objects live with it
        if name is not None:
            chosen = [name]
        elif select is None or table not in select:
            chosen = list(entries)
        else:
            chosen = list(select[table])
        names |= {entries[n] for n in chosen if n in entries}
    return frozenset(_with_parents(names, root) - {path})


def reachable(entry: str, root: Path = ROOT, select: Select | None = None) -> set[Path]:
    """Every file of ours that running module ``entry`` can load (itself and ``DATA_FILES`` included), with the
    table entries ``select`` allows."""
    start = module_file(entry, root)
    if start is None:
        raise FileNotFoundError(f"no module {entry} under {root}")
    known = tables(root)
    seen, todo = {start}, [start]
    while todo:
        current = todo.pop()
        extra = {root / f for f in DATA_FILES.get(current.relative_to(root).as_posix(), [])}
        for dep in direct_imports(current, root, select, known) | extra:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def sha256_lines(files: Collection[Path], root: Path = ROOT) -> str:
    """``sha256sum`` lines of ``files``, sorted by path under ``root`` (``sha256sum -c`` checks them)."""
    return "".join(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.relative_to(root).as_posix()}\n"
                   for f in sorted(files, key=lambda p: p.relative_to(root).as_posix()))


def fingerprint(entry: str, root: Path = ROOT, select: Select | None = None) -> str:
    """``sha256sum`` lines of every file ``entry`` can load (``seed_core.lineage.inputs`` asks per stage)."""
    return sha256_lines(reachable(entry, root, select), root)
