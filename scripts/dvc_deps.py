"""Which code each dvc.yaml stage can import: a static ``ast`` scan of ``import`` statements (module level
and inside functions; ``if TYPE_CHECKING:`` bodies do not run and do not count), transitively from the
stage's ``python -m flows.<stage>`` entry point over our packages (``PACKAGES``) and through the entries of the
name tables (``seed_core.registries``) that its config can select (``seed_core.lineage.stage_code``: the configured
environment and backend, its algorithm's losses and analyzer); and which params it reads.

    python scripts/dvc_deps.py                      # print, per stage, the files it can import
    python scripts/dvc_deps.py --fingerprints data  # the `code` stage: data/{code,params}/<stage>.{sha256,yaml}
    python scripts/dvc_deps.py --write              # rewrite the code stage's params: list in dvc.yaml

A stage's code dependency is its fingerprint ``data/code/<stage>.sha256`` (``sha256sum`` format: one
``<sha256>  <path>`` line per file it can import; the rl stage's is per algorithm,
``data/code/rl/<algorithm>.sha256``, as its losses and analyzer are), and its params dependency
``data/params/<stage>.yaml`` (the values of the params.yaml keys it reads, ``seed_core.lineage.stage_params.STAGE_PARAMS``),
both written by dvc.yaml's ``code`` stage, which depends on the package folders and on every key some stage reads.
Editing a file or a value reruns ``code`` (a second), and the stages whose fingerprint or params file changed.

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

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from seed_core.lineage import code_closure  # noqa: E402  (the scan itself: one owner, shared with the RL resume key)
from seed_core.lineage.code_closure import DATA_FILES, PACKAGES  # noqa: E402,F401  (re-exported for the tests)

if TYPE_CHECKING:
    from seed_core.config import SeedConfig


def module_file(name: str) -> Path | None:
    """``seed_core.envs.alfworld`` -> its .py file in this tree (``seed_core.lineage.code_closure.module_file``)."""
    return code_closure.module_file(name, ROOT)


def direct_imports(path: Path) -> frozenset[Path]:
    """Our module files that ``path`` imports (``seed_core.lineage.code_closure.direct_imports``), in this tree."""
    return code_closure.direct_imports(path, ROOT)


def reachable(entry: str, select: code_closure.Select | None = None) -> set[Path]:
    """Every file of this tree that ``entry`` can import, through the table entries ``select`` allows
    (``seed_core.lineage.code_closure.reachable``)."""
    return code_closure.reachable(entry, ROOT, select)


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
        deps = [d for d in body.get("deps", []) if "${" not in d or d in (params_path(name), fingerprint_path(name))]
        params = [p for p in body.get("params", []) if isinstance(p, str)]
        out[name] = (entry, deps, params)
    return out


def covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return any(rel == d.rstrip("/") or rel.startswith(d.rstrip("/") + "/") for d in deps)


CODE_STAGE = "code"
"""The dvc.yaml stage that writes every stage's fingerprint (``write_fingerprints``)."""


def fingerprint_path(stage: str) -> str:
    """The dvc.yaml dep that stands for ``stage``'s code (the rl stage's: its algorithm's file)."""
    return "data/code/rl/${key}.sha256" if stage == PER_ALGORITHM else f"data/code/{stage}.sha256"


def params_path(stage: str) -> str:
    """The dvc.yaml dep that stands for ``stage``'s params (the rl stage's: its algorithm's file)."""
    return "data/params/rl/${key}.yaml" if stage == PER_ALGORITHM else f"data/params/{stage}.yaml"


def stage_select(stage: str, cfg: "SeedConfig", algorithm: str | None = None) -> dict[str, frozenset[str]]:
    """The table entries ``stage`` (``rl``: ``rl@<algorithm>``) can select under ``cfg``
    (``seed_core.lineage.stage_code.selection``)."""
    from seed_core.lineage.stage_code import for_algorithm, selection

    return selection(stage, for_algorithm(cfg, algorithm) if algorithm else cfg)


def stage_fingerprint(stage: str, cfg: "SeedConfig", algorithm: str | None = None) -> str:
    """``data/code/<stage>.sha256`` (``rl``: ``data/code/rl/<algorithm>.sha256``) under ``cfg``
    (``seed_core.lineage.inputs.stage_inputs``; dvc.yaml's command runs the same entry module, tested)."""
    from seed_core.lineage.inputs import stage_inputs
    from seed_core.lineage.stage_code import for_algorithm

    return stage_inputs(stage, for_algorithm(cfg, algorithm) if algorithm else cfg, ROOT).fingerprint()


def stage_params(stage: str) -> list[str]:
    """The params.yaml keys ``stage`` reads (``seed_core.lineage.stage_params``)."""
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
    import seed_core.lineage.stage_params

    return seed_core.lineage.stage_params


def params_text(stage: str, params: dict, keys: tuple[str, ...] | None = None) -> str:
    """``data/params/<stage>.yaml``: ``<key>: <value>`` for each key ``stage`` reads (or ``keys``), its value in
    ``params`` (params.yaml as DVC reads it); a key params.yaml lacks is an error naming it, as DVC's would be."""
    project = _stage_params_module().project
    values = {}
    for key in keys if keys is not None else stage_params(stage):
        try:
            values |= project(params, (key,))
        except (KeyError, TypeError):
            raise SystemExit(f"dvc_deps: params.yaml has no key {key!r}, which stage {stage!r} reads "
                             f"(seed_core/lineage/stage_params.py); add it to params.yaml") from None
    return yaml.safe_dump(values, sort_keys=False, default_flow_style=False)


def _replace(path: Path, text: str) -> Path:
    """Write ``text`` to a new file that replaces ``path`` (never edited in place: DVC may have linked it into its
    cache)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def write_fingerprints(out_dir: Path, cfg: "SeedConfig | None" = None) -> list[Path]:
    """``<out_dir>/<stage>.sha256`` for every stage under ``cfg`` (default: params.yaml's); for the rl stage one
    file per registered algorithm, ``<out_dir>/rl/<algorithm>.sha256``."""
    from seed_core.algorithms import ALGORITHMS

    cfg = load_params() if cfg is None else cfg
    (out_dir / PER_ALGORITHM).mkdir(parents=True, exist_ok=True)
    written = [_replace(out_dir / f"{name}.sha256", stage_fingerprint(name, cfg)) for name in stages()
               if name != PER_ALGORITHM]
    return written + [_replace(out_dir / PER_ALGORITHM / f"{name}.sha256", stage_fingerprint(PER_ALGORITHM, cfg, name))
                      for name in ALGORITHMS.names()]


PER_ALGORITHM = "rl"
"""The foreach stage whose params file and fingerprint are per item: ``data/params/rl/<algorithm>.yaml`` holds the
keys that algorithm reads (``seed_core.lineage.stage_params.algorithm_keys``), ``data/code/rl/<algorithm>.sha256`` the code it
can reach (its losses, its analyzer), one file each per registered algorithm."""


def algorithm_params_text(algorithm: str, params: dict) -> str:
    """``data/params/rl/<algorithm>.yaml``."""
    from seed_core.lineage.stage_params import algorithm_keys

    return params_text(PER_ALGORITHM, params, algorithm_keys(algorithm))


def write_params(out_dir: Path, params_file: Path = ROOT / "params.yaml") -> list[Path]:
    """``<out_dir>/<stage>.yaml`` for every stage, from ``params_file`` read as DVC reads it (YAML 1.2,
    ``seed_core.loader.parse_yaml``: ``dvc exp run -S`` rewrites params.yaml without quotes, and a YAML 1.1 read
    turned ``mixed_precision: no`` into ``false``, a changed params file that reran sft and every rl stage); for
    the rl stage one file per registered algorithm, ``<out_dir>/rl/<algorithm>.yaml``."""
    from seed_core.algorithms import ALGORITHMS
    from seed_core.loader import parse_yaml

    params = parse_yaml(params_file.read_text())
    (out_dir / PER_ALGORITHM).mkdir(parents=True, exist_ok=True)
    written = [_replace(out_dir / f"{name}.yaml", params_text(name, params)) for name in stages()
               if name != PER_ALGORITHM]
    return written + [_replace(out_dir / PER_ALGORITHM / f"{name}.yaml", algorithm_params_text(name, params))
                      for name in ALGORITHMS.names()]


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


def load_params(params_file: Path = ROOT / "params.yaml") -> "SeedConfig":
    """``params_file`` as a validated config (``seed_core.loader.load_config``), checked before anything is
    written: the code stage runs first and keeps its outputs (``persist``), so a typo stops ``dvc repro`` here,
    before DVC has removed any stage's outputs; exits 2 with the config error's one line."""
    from seed_core.config import ConfigError
    from seed_core.loader import load_config

    try:
        return load_config(params_file)
    except ConfigError as err:
        print(f"dvc_deps: {err}. No stage ran and no output was removed: fix the value, then rerun",
              file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        path = ROOT / "dvc.yaml"
        path.write_text(rewrite(path.read_text()))
    elif sys.argv[1:2] == ["--fingerprints"] and len(sys.argv) == 3:
        write_fingerprints(Path(sys.argv[2]) / "code", load_params())
        write_params(Path(sys.argv[2]) / "params")
    else:
        config = load_params()
        for name, (entry, _, _) in stages().items():
            select = stage_select(name, config, config.rl.algorithm if name == PER_ALGORITHM else None)
            print(f"{name}:", *(f"  - {p.relative_to(ROOT).as_posix()}" for p in sorted(reachable(entry, select))),
                  sep="\n")
