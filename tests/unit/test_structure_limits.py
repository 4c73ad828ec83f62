"""The house rules on size (CONTRIBUTING.md, issue 31): no function over ``MAX_FUNCTION_LINES`` and no module over
``MAX_FILE_LINES`` in the project's packages (``PACKAGES``, those of tests/unit/test_layering.py). A failure names
each function (file:line, name, length) or file; split it into named helpers or modules instead of raising the
limit. A function counts from its ``def`` line to its last line (docstring and nested functions included,
decorators not); methods and nested functions are checked on their own too."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_layering import PACKAGES

ROOT = Path(__file__).resolve().parents[2]

MAX_FUNCTION_LINES = 100
MAX_FILE_LINES = 500

LONG_FILES_ALLOWED: frozenset[str] = frozenset()
"""Modules allowed over ``MAX_FILE_LINES`` for now. Only one that is being split may stand here, with a comment."""


def package_files(root: Path = ROOT) -> list[Path]:
    return [path for package in PACKAGES for path in sorted((root / package).rglob("*.py"))]


def long_functions(path: Path, root: Path = ROOT, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``file:line name (N lines)`` for every function or method of ``path`` longer than ``limit`` lines."""
    functions = sorted((node for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
                        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))), key=lambda node: node.lineno)
    return [f"{path.relative_to(root).as_posix()}:{node.lineno} {node.name} ({length} lines)" for node in functions
            if (length := node.end_lineno - node.lineno + 1) > limit]  # type: ignore[operator]


def file_lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_function_is_over_the_limit() -> None:
    found = [line for path in package_files() for line in long_functions(path)]
    assert not found, f"functions over {MAX_FUNCTION_LINES} lines (split each into named helpers):\n" + \
        "\n".join(found)


def test_no_module_is_over_the_limit() -> None:
    found = [f"{rel} ({n} lines)" for path in package_files()
             if (rel := path.relative_to(ROOT).as_posix()) not in LONG_FILES_ALLOWED
             and (n := file_lines(path)) > MAX_FILE_LINES]
    assert not found, f"modules over {MAX_FILE_LINES} lines (split each into modules of one concern):\n" + \
        "\n".join(found)


def test_the_allow_list_holds_only_files_still_over_the_limit() -> None:
    stale = [rel for rel in sorted(LONG_FILES_ALLOWED)
             if not (ROOT / rel).is_file() or file_lines(ROOT / rel) <= MAX_FILE_LINES]
    assert not stale, f"remove from LONG_FILES_ALLOWED in {Path(__file__).relative_to(ROOT)} (gone or now at most " \
                      f"{MAX_FILE_LINES} lines): {', '.join(stale)}"


def _function(name: str, lines: int, indent: str = "") -> str:
    """The source of a function ``lines`` lines long, its ``def`` line included."""
    return f"{indent}def {name}():\n" + "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 1))


def test_the_checks_see_a_long_function_and_a_long_method_and_only_those(tmp_path: Path) -> None:
    source = "\n\n".join([_function("short", 3), _function("at_the_limit", MAX_FUNCTION_LINES),
                           "class C:\n" + _function("over", MAX_FUNCTION_LINES + 1, "    "),
                           _function("outer", 5) + _function("nested_over", MAX_FUNCTION_LINES + 1, "    ")])
    path = tmp_path / "seed_core" / "mod.py"
    path.parent.mkdir()
    path.write_text(source)
    lines = source.splitlines()
    over, outer = lines.index("    def over():") + 1, lines.index("def outer():") + 1
    assert long_functions(path, tmp_path) == [
        f"seed_core/mod.py:{over} over ({MAX_FUNCTION_LINES + 1} lines)",
        f"seed_core/mod.py:{outer} outer ({MAX_FUNCTION_LINES + 6} lines)",
        f"seed_core/mod.py:{outer + 5} nested_over ({MAX_FUNCTION_LINES + 1} lines)"]
    assert file_lines(path) == len(lines)
