"""Calls go one way (DESIGN §2): the top-level packages import downwards only (``PACKAGES``: seed_core <
tasks < flows < seed_app); seed_core never imports prefect or dvc and touches mlflow only in tracking.py and tracing.py;
tasks/, flows/ and seed_app/ never import torch (stage modules are imported inside task bodies); inside
seed_core there is no import circle and no import against the layer order (``LAYERS``), function-local
imports included."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from seed_core.lineage import code_closure  # the import scanner of the DVC code deps: TYPE_CHECKING bodies do not count

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    """Top-level package of every import statement in the file, wherever it appears."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


PACKAGES = ("seed_core", "tasks", "flows", "seed_app")
"""Top-level packages, lowest first: the engine, the Prefect tasks around it, the flows DVC runs, and the
application that runs DVC (the ``seed`` command)."""


def test_top_level_packages_import_only_lower_ones() -> None:
    upward = [f"{path.relative_to(ROOT)} imports {name}" for rank, package in enumerate(PACKAGES)
              for path in sorted((ROOT / package).rglob("*.py"))
              for name in sorted(_imports(path) & set(PACKAGES[rank + 1:]))]
    assert not upward, "imports against the package order (lowest first: " + " < ".join(PACKAGES) + \
        ", function-local imports included):\n" + "\n".join(upward)


def test_seed_core_has_no_orchestration_imports_and_mlflow_only_in_tracking() -> None:
    for path in sorted((ROOT / "seed_core").rglob("*.py")):
        found = _imports(path)
        rel = path.relative_to(ROOT).as_posix()
        assert not found & {"prefect", "dvc"}, f"{rel} imports {found & {'prefect', 'dvc'}}"
        if rel not in ("seed_core/tracking.py", "seed_core/tracing.py"):
            assert "mlflow" not in found, f"{rel} imports mlflow (only seed_core/tracking.py and tracing.py may)"


def _orchestration_files() -> list[Path]:
    return [path for package in PACKAGES[1:] for path in sorted((ROOT / package).glob("*.py"))]


def test_flows_and_tasks_never_import_torch() -> None:
    files = _orchestration_files()
    assert files
    for path in files:
        assert "torch" not in _imports(path), f"{path.relative_to(ROOT)} imports torch"


def test_importing_every_flow_and_task_module_loads_no_torch() -> None:
    """Indirect imports count too: a flow importing a seed_core stage module at import time would pull torch."""
    modules = [p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".") for p in _orchestration_files()]
    code = f"import sys\nfor m in {modules!r}: __import__(m)\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "False"


# --- inside seed_core: no import circle, no upward arrow (issue 12) -------------------------------------------

LAYERS = (  # lowest first; a module may import its own layer or lower ones, never a higher one
    ("base", ("registry", "registries", "types", "config_base", "config_envs", "config", "stats", "lineage",
              "lineage.code_closure",
              "runtime", "repro", "repro.numerics", "repro.reference", "skills",
              "skills.insert", "modeling")),
    ("engines", ("alfworld", "webshop", "retrieval", "data_gen")),
    ("envs", ("envs",)),
    ("models", ("modeling.models", "losses", "algorithms", "methods", "skills.contexts", "skills.static",
                "data_gen.task_sets", "lineage.stage_params", "lineage.stage_code", "lineage.inputs", "lineage.resume",
                "tracking", "tracing")),
    ("rollout", ("rollout",)),
    ("trainer", ("trainer",)),
    ("analyzer", ("analyzer",)),
    ("builders", ("modeling.builders", "modeling.testbed")),
    ("loader", ("loader", "data_gen.generate", "analyzer.mechanism", "lineage.side_tables")),
    ("stages", ("stages",)),
    ("pipeline", ("sweep", "repro.golden", "repro.golden_build")),
)


def _module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def seed_core_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """seed_core module -> the seed_core modules it imports, at module level or inside a function, relative imports
    included; importing ``seed_core.envs.base`` also imports the packages above it (``seed_core.envs``: its
    ``__init__`` runs first), so a package whose ``__init__`` re-exports a module that imports a sibling is a circle.
    ``root``: the tree that holds ``seed_core`` (a planted package in a test)."""
    return {_module_name(path, root): {_module_name(dep, root) for dep in code_closure.imported_files(path, root)}
            for path in (root / "seed_core").rglob("*.py")}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a path ``[a, b, ..., a]``, or None (depth-first search, white/grey/black)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def layer_of(module: str) -> int:
    if module == "seed_core":  # the package itself: its __init__ imports nothing (runs before any submodule)
        return -1
    parts = module.split(".")[1:]
    for name in (".".join(parts[:2]), parts[0]):  # a package's module may sit in its own layer (lineage.stage_code)
        for rank, (_, names) in enumerate(LAYERS):
            if name in names:
                return rank
    raise AssertionError(f"{module} is in no layer: add seed_core.{parts[0]} to LAYERS in tests/unit/test_layering.py")


def test_seed_core_has_no_import_cycle() -> None:
    cycle = find_cycle(seed_core_imports())
    assert cycle is None, "import circle (function-local imports count): " + " -> ".join(cycle)


def _every_import(path: Path, root: Path) -> set[str]:
    """Every module name ``path``'s import statements name, ``if TYPE_CHECKING:`` bodies included (relative
    imports resolved; ``from a import b`` names ``a`` and ``a.b``)."""
    package = list(path.relative_to(root).with_suffix("").parts[:-1])
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - (node.level - 1)], *([base] if base else [])])
            names |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
    return names


def seed_core_type_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """``seed_core_imports`` with type-only imports counted too: an annotation that needs a module is an edge."""
    graph = {}
    for path in (root / "seed_core").rglob("*.py"):
        files = code_closure._with_parents(_every_import(path, root), root) - {path}
        graph[_module_name(path, root)] = {_module_name(f, root) for f in files}
    return graph


def test_seed_core_has_no_import_cycle_even_through_type_only_imports() -> None:
    """Issue 40: the type-only circles (``registries`` <-> ``envs.base``, ``retrieval.bm25`` <-> ``methods``) are
    gone, and a new one fails here."""
    cycle = find_cycle(seed_core_type_imports())
    assert cycle is None, "import circle (type-only and package __init__ imports count): " + " -> ".join(cycle)


def _plant(root: Path, files: dict[str, str]) -> Path:
    """A planted ``seed_core/pkg`` under ``root`` with the given module sources (``seed_core/__init__.py`` empty)."""
    package = root / "seed_core" / "pkg"
    package.mkdir(parents=True, exist_ok=True)
    (root / "seed_core" / "__init__.py").write_text("")
    for name, source in files.items():
        (package / name).write_text(source)
    return package


def test_a_type_only_import_closes_a_circle(tmp_path: Path) -> None:
    _plant(tmp_path, {"__init__.py": "", "a.py": "from seed_core.pkg.b import B\n",
                      "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import A\nB = 1\n"})
    assert find_cycle(seed_core_imports(tmp_path)) is None  # the run-time graph has no circle
    assert find_cycle(seed_core_type_imports(tmp_path)) == ["seed_core.pkg.a", "seed_core.pkg.b", "seed_core.pkg.a"]


def test_find_cycle_sees_a_circle_and_only_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_a_package_init_that_re_exports_a_module_importing_a_sibling_is_a_circle(tmp_path: Path) -> None:
    """The circle of issue 28 (``envs``, ``retrieval``, ``losses``), planted: ``pkg/__init__`` re-exports ``pkg.a``,
    which imports ``pkg.base``, so importing ``pkg.a`` (or any module of ``pkg``) runs ``pkg/__init__`` again."""
    package = _plant(tmp_path, {"base.py": "BASE = 1\n", "a.py": "from seed_core.pkg.base import BASE\n\nA = BASE\n",
                                "__init__.py": "from seed_core.pkg.base import BASE\n"})
    assert find_cycle(seed_core_imports(tmp_path)) is None  # re-exporting a module that imports no sibling is fine
    (package / "__init__.py").write_text("from seed_core.pkg.a import A  # re-export\n")
    assert find_cycle(seed_core_imports(tmp_path)) == ["seed_core.pkg", "seed_core.pkg.a", "seed_core.pkg"]
    (package / "a.py").write_text("from .base import BASE\n\nA = BASE\n")  # relative imports count the same
    assert find_cycle(seed_core_imports(tmp_path)) == ["seed_core.pkg", "seed_core.pkg.a", "seed_core.pkg"]


def test_the_golden_check_module_loads_no_torch_before_it_pins_the_numerics() -> None:
    """``python -m seed_core.repro.golden`` pins the CPU numerics in ``main``, which works only while importing the
    module leaves torch unloaded (``golden_build`` imports its torch-loading modules inside ``build``)."""
    code = "import sys, seed_core.repro.golden\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "False"


def test_importing_an_environment_module_loads_no_other_environment() -> None:
    """The circles of issue 28 gone: ``seed_core.envs.base`` loaded ~35 seed_core modules through
    ``seed_core/envs/__init__`` (every environment and its engines)."""
    code = ("import sys, seed_core.envs.base\n"
            "print(sorted(m for m in sys.modules if m.startswith('seed_core.')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = set(eval(result.stdout))
    assert loaded <= {"seed_core.envs", "seed_core.envs.base", "seed_core.config", "seed_core.runtime",
                      "seed_core.runtime.endpoints", "seed_core.runtime.vllm_flags", "seed_core.config_base",
                      "seed_core.config_envs",
                      "seed_core.registries", "seed_core.registry", "seed_core.types"}, sorted(loaded)


def test_seed_core_has_no_upward_arrow() -> None:
    upward = [f"{src} ({LAYERS[layer_of(src)][0]}) -> {dst} ({LAYERS[layer_of(dst)][0]})"
              for src, targets in seed_core_imports().items() if src != "seed_core"
              for dst in sorted(targets) if layer_of(dst) > layer_of(src)]
    assert not upward, "imports against the layer order (lowest first: " + ", ".join(n for n, _ in LAYERS) + \
        "):\n" + "\n".join(upward)


def test_config_imports_nothing_but_pydantic_and_io() -> None:
    assert seed_core_imports()["seed_core.config"] <= {"seed_core", "seed_core.runtime", "seed_core.runtime.io",
                                                       "seed_core.runtime.endpoints", "seed_core.runtime.vllm_flags", "seed_core.config_base",
                      "seed_core.config_envs",
                                                       "seed_core.config_base", "seed_core.config_envs"}
    assert seed_core_imports()["seed_core.runtime.endpoints"] == set()
