"""Which code each dvc.yaml stage can import: a static ``ast`` scan of ``import`` statements (module level
and inside functions; ``if TYPE_CHECKING:`` bodies do not run and do not count), transitively from the
stage's ``python -m flows.<stage>`` entry point over our packages (``PACKAGES``); and which params it reads.

    python scripts/dvc_deps.py                      # print, per stage, the files it can import
    python scripts/dvc_deps.py --fingerprints data  # the `code` stage: data/{code,params}/<stage>.{sha256,yaml}
    python scripts/dvc_deps.py --write              # rewrite the code stage's params: list in dvc.yaml

A stage's code dependency is its fingerprint ``data/code/<stage>.sha256`` (``sha256sum`` format: one
``<sha256>  <path>`` line per file it can import), and its params dependency ``data/params/<stage>.yaml``
(the values of the params.yaml keys it reads, ``seed_core.stage_params.STAGE_PARAMS``), both written by
dvc.yaml's ``code`` stage, which depends on the package folders and on every key some stage reads. Editing a
file or a value reruns ``code`` (a second), and the stages whose fingerprint or params file changed.

Why not the files and keys themselves as each stage's deps (as before): DVC parses and rewrites all of
``dvc.lock`` with a round-trip YAML parser after every stage. The files were ~45 entries per stage: 4,493
lock lines took 0.9 s per stage, ~1,450 lines 0.3 s. The keys, listed with their values once per stage, were
1,250 of those 1,531 lines; listed once (the code stage) the lock has 802 (round trip 0.37 -> 0.19 s per
stage, measured on the default's lock). ``dvc params diff`` and ``dvc exp show`` read the code stage's list.

``--write`` writes the code stage's ``params:`` list: every key of ``STAGE_PARAMS``, in first-use order.
``tests/unit/test_dvc_deps.py`` checks the deps and outs of ``code`` and every stage's fingerprint and params
deps; ``tests/unit/test_stage_params.py`` the params files and the code stage's list.
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
    """name -> (entry module, deps, params listed in dvc.yaml) per dvc.yaml stage but ``code`` (a foreach stage
    once, ${...} dropped)."""
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


def params_path(stage: str) -> str:
    """The dvc.yaml dep that stands for ``stage``'s params."""
    return f"data/params/{stage}.yaml"


@lru_cache(maxsize=None)
def _sha256(path: Path) -> str:
    """Each file is read and hashed once, though most stages import it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fingerprint(entry: str) -> str:
    """``sha256sum`` lines of every file ``entry`` can import, sorted by path (``sha256sum -c`` checks them)."""
    files = sorted(reachable(entry), key=lambda p: p.relative_to(ROOT).as_posix())
    return "".join(f"{_sha256(f)}  {f.relative_to(ROOT).as_posix()}\n" for f in files)


def stage_params(stage: str) -> list[str]:
    """The params.yaml keys ``stage`` reads (``seed_core.stage_params``)."""
    return list(_stage_params()[stage])


def all_params() -> list[str]:
    """Every key some stage reads, in first-use order: the code stage's ``params:`` list."""
    return list(dict.fromkeys(key for keys in _stage_params().values() for key in keys))


def _stage_params() -> dict[str, tuple[str, ...]]:
    return _stage_params_module().STAGE_PARAMS


def _stage_params_module():
    import sys

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import seed_core.stage_params

    return seed_core.stage_params


def params_text(stage: str, params: dict) -> str:
    """``data/params/<stage>.yaml``: ``<key>: <value>`` for each key ``stage`` reads, its value in ``params``
    (params.yaml as DVC reads it); a key params.yaml lacks is an error naming it, as DVC's would be."""
    project = _stage_params_module().project
    values = {}
    for key in stage_params(stage):
        try:
            values |= project(params, (key,))
        except (KeyError, TypeError):
            raise SystemExit(f"dvc_deps: params.yaml has no key {key!r}, which stage {stage!r} reads "
                             f"(seed_core/stage_params.py); add it to params.yaml") from None
    return yaml.safe_dump(values, sort_keys=False, default_flow_style=False)


def _replace(path: Path, text: str) -> Path:
    """Write ``text`` to a new file that replaces ``path`` (never edited in place: DVC may have linked it into its
    cache)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def write_fingerprints(out_dir: Path) -> list[Path]:
    """``<out_dir>/<stage>.sha256`` for every stage."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [_replace(out_dir / f"{name}.sha256", fingerprint(entry)) for name, (entry, _, _) in stages().items()]


def write_params(out_dir: Path, params_file: Path = ROOT / "params.yaml") -> list[Path]:
    """``<out_dir>/<stage>.yaml`` for every stage, from ``params_file``."""
    params = yaml.safe_load(params_file.read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    return [_replace(out_dir / f"{name}.yaml", params_text(name, params)) for name in stages()]


STAGE_LINE = re.compile(r"^  (\w+):\s*(#.*)?$")
PARAMS_LINE = re.compile(r"^(\s*)params:\s*(#.*)?$")
PARAM_ITEM = re.compile(r"^\s*- [\w.]+\s*(#.*)?$")


def rewrite(text: str) -> str:
    """dvc.yaml ``text`` with the code stage's ``params:`` list replaced by ``all_params`` (the rest kept)."""
    out: list[str] = []
    stage = None
    in_params = False
    for line in text.splitlines():
        header = STAGE_LINE.match(line)
        if header:
            stage = header.group(1)
        if in_params and PARAM_ITEM.match(line):
            continue  # the old list: replaced below the params: line
        in_params = False
        params = PARAMS_LINE.match(line)
        if params and stage == CODE_STAGE:
            out.append(line)
            out += [f"{params.group(1)}  - {key}" for key in all_params()]
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
        write_fingerprints(Path(sys.argv[2]) / "code")
        write_params(Path(sys.argv[2]) / "params")
    else:
        for name, (entry, _, _) in stages().items():
            print(f"{name}:", *(f"  - {p.relative_to(ROOT).as_posix()}" for p in sorted(reachable(entry))), sep="\n")
