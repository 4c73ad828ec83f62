"""Which code each dvc.yaml stage can import: a static ``ast`` scan of ``import`` statements (module level
and inside functions; ``if TYPE_CHECKING:`` bodies do not run and do not count), transitively from the
stage's ``python -m flows.<stage>`` entry point over our packages (``PACKAGES``).

    python scripts/dvc_deps.py                         # print, per stage, the files it can import
    python scripts/dvc_deps.py --fingerprints data/code   # the `code` stage: data/code/<stage>.sha256
    python scripts/dvc_deps.py --write                 # rewrite each stage's params: list in dvc.yaml

A stage's code dependency is its fingerprint ``data/code/<stage>.sha256`` (``sha256sum`` format: one
``<sha256>  <path>`` line per file it can import), written by dvc.yaml's ``code`` stage, which depends on the
package folders. Editing a file reruns ``code`` (a second), and the stages whose fingerprint changed.

Why not the files themselves as each stage's deps (as before): they were ~45 entries per stage, and DVC
parses and rewrites all of ``dvc.lock`` with a round-trip YAML parser after every stage: 4,493 lines took
0.9 s per stage, ~1,450 lines take 0.3 s (measured on the default's lock).

``--write`` writes each stage's ``params:`` list from ``seed_core.stage_params.STAGE_PARAMS`` (the keys
the stage reads). ``tests/unit/test_dvc_deps.py`` checks the deps and outs of ``code`` and every stage's
fingerprint dep, and the params lists.
"""

from __future__ import annotations

import ast
import hashlib
import re
from functools import lru_cache
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("seed_core", "tasks", "flows", "seed_app")


def module_file(name: str) -> Path | None:
    """``seed_core.envs.alfworld`` -> its .py file (a package -> its __init__.py); None if not ours."""
    if name.split(".")[0] not in PACKAGES:
        return None
    base = ROOT.joinpath(*name.split("."))
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


@lru_cache(maxsize=None)
def direct_imports(path: Path) -> frozenset[Path]:
    """Our module files that ``path`` imports anywhere in its body, with their parent packages' __init__.py."""
    rel = path.relative_to(ROOT).with_suffix("")
    package = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
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
    found: set[Path] = set()
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            file = module_file(".".join(parts[:i]))
            if file is not None:
                found.add(file)
    return frozenset(found - {path})


def reachable(entry: str) -> set[Path]:
    start = module_file(entry)
    assert start is not None, entry
    seen, todo = {start}, [start]
    while todo:
        current = todo.pop()
        extra = {ROOT / f for f in DATA_FILES.get(current.relative_to(ROOT).as_posix(), [])}
        for dep in direct_imports(current) | extra:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def stages() -> dict[str, tuple[str, list[str], list[str]]]:
    """name -> (entry module, code deps, params) per dvc.yaml stage (a foreach stage once, ${...} dropped)."""
    spec = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    out = {}
    for name, stage in spec.items():
        if name == CODE_STAGE:
            continue
        body = stage.get("do", stage)
        entry = re.search(r"python -m (\S+)", body["cmd"]).group(1)
        deps = [d for d in body.get("deps", []) if "${" not in d]
        params = [p for p in body.get("params", []) if isinstance(p, str)]
        out[name] = (entry, deps, params)
    return out


def covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return any(rel == d.rstrip("/") or rel.startswith(d.rstrip("/") + "/") for d in deps)



DATA_FILES = {"seed_core/rollout/vllm_engine.py": ["seed_core/rollout/vllm_worker.py"]}
"""Code a module uses without importing it: vllm_engine copies vllm_worker.py into every engine process."""


CODE_STAGE = "code"
"""The dvc.yaml stage that writes every stage's fingerprint (``write_fingerprints``)."""


def fingerprint_path(stage: str) -> str:
    """The dvc.yaml dep that stands for ``stage``'s code."""
    return f"data/code/{stage}.sha256"


@lru_cache(maxsize=None)
def _sha256(path: Path) -> str:
    """Each file is read and hashed once, though most stages import it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fingerprint(entry: str) -> str:
    """``sha256sum`` lines of every file ``entry`` can import, sorted by path (``sha256sum -c`` checks them)."""
    files = sorted(reachable(entry), key=lambda p: p.relative_to(ROOT).as_posix())
    return "".join(f"{_sha256(f)}  {f.relative_to(ROOT).as_posix()}\n" for f in files)


def write_fingerprints(out_dir: Path) -> list[Path]:
    """``<out_dir>/<stage>.sha256`` for every stage; each written atomically (a new file replaces the old one,
    never edited in place: DVC may have linked it into its cache)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (entry, _, _) in stages().items():
        path = out_dir / f"{name}.sha256"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(fingerprint(entry))
        tmp.replace(path)
        written.append(path)
    return written


STAGE_LINE = re.compile(r"^  (\w+):\s*(#.*)?$")
PARAMS_LINE = re.compile(r"^(\s*)params:\s*(#.*)?$")
PARAM_ITEM = re.compile(r"^\s*- [\w.]+\s*(#.*)?$")


def stage_params(stage: str) -> list[str]:
    """The params.yaml keys ``stage`` reads (``seed_core.stage_params``)."""
    import sys

    sys.path.insert(0, str(ROOT))
    from seed_core.stage_params import STAGE_PARAMS

    return list(STAGE_PARAMS[stage])


def rewrite(text: str) -> str:
    """dvc.yaml ``text`` with each stage's ``params:`` list replaced by ``stage_params`` (the rest kept)."""
    entries = {name: entry for name, (entry, _, _) in stages().items()}
    out: list[str] = []
    stage = None
    in_params = False
    for line in text.splitlines():
        header = STAGE_LINE.match(line)
        if header:
            stage = header.group(1) if header.group(1) in entries else None
        if in_params and PARAM_ITEM.match(line):
            continue  # the old list: replaced below the params: line
        in_params = False
        params = PARAMS_LINE.match(line)
        if params and stage is not None:
            out.append(line)
            out += [f"{params.group(1)}  - {key}" for key in stage_params(stage)]
            in_params = True
            continue
        out.append(line)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--write"]:
        path = ROOT / "dvc.yaml"
        path.write_text(rewrite(path.read_text()))
    elif sys.argv[1:2] == ["--fingerprints"] and len(sys.argv) == 3:
        write_fingerprints(Path(sys.argv[2]))
    else:
        for name, (entry, _, _) in stages().items():
            print(f"{name}:", *(f"  - {p.relative_to(ROOT).as_posix()}" for p in sorted(reachable(entry))), sep="\n")
