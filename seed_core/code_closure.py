"""Which of the project's files a module can import: a static ``ast`` scan of ``import`` statements (module level
and inside functions; ``if TYPE_CHECKING:`` bodies do not run and do not count), transitively from an entry
module over our packages (``PACKAGES``), and the ``sha256sum`` lines of those files (``fingerprint``).

One owner for two users that must agree: ``scripts/dvc_deps.py`` writes each DVC stage's code dependency
``data/code/<stage>.sha256`` from it, and ``seed_core.resume.rl_fingerprint`` hashes the same lines for the rl
stage, so finished RL rounds are reused only by the code that made them (an edit DVC sees is an edit resume sees).
Nothing is imported; the scan reads the files. Parsed files are cached by (path, mtime, size), so an edited file
is parsed again even in a long-lived process.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The project root: the folder that holds ``seed_core`` and the other ``PACKAGES``."""

PACKAGES = ("seed_core", "tasks", "flows", "seed_app")

DATA_FILES = {"seed_core/rollout/vllm_engine.py": ["seed_core/rollout/vllm_worker.py"]}
"""Code a module uses without importing it: vllm_engine copies vllm_worker.py into every engine process."""

_PARSED: dict[tuple[Path, int, int], frozenset[str]] = {}


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


def _imported_names(path: Path, root: Path) -> frozenset[str]:
    """Dotted names ``path`` imports (relative imports resolved), cached while the file is unchanged."""
    stat = path.stat()
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        rel = path.relative_to(root).with_suffix("")
        package = list(rel.parts[:-1])
        names: set[str] = set()
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
        _PARSED[key] = frozenset(names)
    return _PARSED[key]


def direct_imports(path: Path, root: Path = ROOT) -> frozenset[Path]:
    """Our module files that ``path`` imports anywhere in its body, with their parent packages' __init__.py."""
    found: set[Path] = set()
    for name in _imported_names(path, root):
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            file = module_file(".".join(parts[:i]), root)
            if file is not None:
                found.add(file)
    return frozenset(found - {path})


def reachable(entry: str, root: Path = ROOT) -> set[Path]:
    """Every file of ours that running module ``entry`` can import (itself and ``DATA_FILES`` included)."""
    start = module_file(entry, root)
    if start is None:
        raise FileNotFoundError(f"no module {entry} under {root}")
    seen, todo = {start}, [start]
    while todo:
        current = todo.pop()
        extra = {root / f for f in DATA_FILES.get(current.relative_to(root).as_posix(), [])}
        for dep in direct_imports(current, root) | extra:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def fingerprint(entry: str, root: Path = ROOT) -> str:
    """``sha256sum`` lines of every file ``entry`` can import, sorted by path (``sha256sum -c`` checks them)."""
    files = sorted(reachable(entry, root), key=lambda p: p.relative_to(root).as_posix())
    return "".join(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.relative_to(root).as_posix()}\n"
                   for f in files)
