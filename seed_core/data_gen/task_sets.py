"""Which tasks a stage plays: deterministic, stage-separated task seeds, the ``tasks.json`` files that
carry the collected tasks from one stage to the next, and the fixed evaluation panels.

A panel (``data/panels/<env>-<split>.json``, committed) is the ordered list of a held-out split's instance ids
(``TextEnv.panel_universe``: ALFWorld game paths relative to $ALFWORLD_DATA, the generated games' task seeds,
WebShop goal and Search-QA row indices). Evaluation plays its first ``eval.num_tasks`` ids in panel order
(``panel_tasks``), so every machine evaluates the same instances, whatever its worker count, file-system
order or ``project.seed``. Rule (``build_panel``): the split's ids sorted, then permuted by
``random.Random("seed-panel:<env>:<split>")`` (so any prefix is a uniform sample of the split, not its first
task types), cut to ``PANEL_SIZE`` ids or ``eval.num_tasks`` if larger. Written by (once per env; ALFWorld with
ALFWORLD_DATA set; WebShop's ids are goals of the paper presets' catalogue)::

    python -m seed_core.data_gen.generate panels --config params.yaml --set env.name=ezpoints
    python -m seed_core.data_gen.generate panels --config presets/webshop-qwen2.5-1.5b.yaml
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from seed_core.config import SeedConfig, project_root
from seed_core.envs import make_env
from seed_core.runtime.io import DataFileError, write_json
from seed_core.types import Task

if TYPE_CHECKING:
    from seed_core.envs.base import TextEnv

PANELS_DIR = Path("data") / "panels"
"""Where the committed panels live, relative to the project root (git-tracked, no DVC stage writes here)."""
PANEL_SIZE = 512
"""Ids a panel keeps of a larger split (>= every preset's ``eval.num_tasks``: Search 512, the others 128)."""


def write_tasks(tasks: Sequence[Task], path: Path) -> Path:
    return write_json(path, [asdict(t) for t in tasks])


def read_tasks(path: Path) -> dict[str, Task]:
    if not Path(path).is_file():
        raise DataFileError(f"{path} does not exist; rerun the collect stage")
    try:
        rows = json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise DataFileError(f"{path} is not valid JSON ({err}); rerun the collect stage") from None
    return {row["task_id"]: Task(**row) for row in rows}


def require_tasks(tasks: Sequence[Task], cfg: SeedConfig, split: str, wanted: int) -> Sequence[Task]:
    """A stage never plays zero tasks: an empty split stops it naming the environment and the split."""
    if not tasks and wanted > 0:
        raise DataFileError(f"env {cfg.env.name!r} has no tasks in split {split!r} (asked for {wanted}); "
                            "check its data (env.* in params.yaml) or the split name")
    return tasks


def task_seed(cfg: SeedConfig, stage: str, index: int = 0) -> int:
    """Deterministic, stage-separated task seeds (collect, rl round i, the gated analyzer's audit panel, eval never
    share tasks by accident)."""
    offsets = {"collect": 0, "rl": 100_000, "audit": 500_000, "eval": 900_000}
    return cfg.project.seed * 1_000_003 + offsets[stage] + index * 1_000


class PanelError(DataFileError):
    """A fixed evaluation panel is missing or does not fit the run; the message names the file and the command."""


def panel_path(env: str, split: str, root: Path | None = None) -> Path:
    return (root or project_root()) / PANELS_DIR / f"{env}-{split}.json"


def panel_command(cfg: SeedConfig) -> str:
    """The command that (re)writes the panels of ``cfg``'s environment."""
    params = Path(cfg._source[0]) if cfg._source else Path("params.yaml")
    if params.is_absolute():  # the project's file by its project path; a file elsewhere: the project's params
        params = params.relative_to(project_root()) if params.is_relative_to(project_root()) else Path("params.yaml")
    data = "ALFWORLD_DATA=<the ALFWorld data> " if cfg.env.name == "alfworld" else ""
    return f"{data}python -m seed_core.data_gen.generate panels --config {params} --set env.name={cfg.env.name}"


def held_out_split(env: TextEnv) -> str:
    """The split the pre-flight and the RL audit panel play: the first that is not ``train`` (every environment
    has one), else ``train``. Here, not in the pre-flight module, so its thresholds are no input of the rl stages."""
    return next((s for s in env.splits if s != "train"), "train")


def held_out_splits(env: TextEnv) -> list[str]:
    """The splits a panel is written for: every split of the env but its training ones."""
    return [s for s in env.splits if "train" not in s]


def build_panel(cfg: SeedConfig, env: TextEnv, split: str) -> dict[str, Any]:
    """The panel of ``split`` (the rule in the module docstring): independent of the order ``panel_universe``
    lists the ids in, of ``project.seed`` and of every worker / batch setting."""
    universe = env.panel_universe(split)
    ids = universe if isinstance(universe, range) else sorted(universe)
    size = min(len(ids), max(PANEL_SIZE, cfg.eval.num_tasks))
    key = f"seed-panel:{cfg.env.name}:{split}"
    return {"env": cfg.env.name, "split": split, "source": env.panel_source(), "split_size": len(ids),
            "complete": size == len(ids), "command": panel_command(cfg),
            "rule": f"the split's ids sorted, permuted by random.Random({key!r}), first {size}",
            "ids": random.Random(key).sample(ids, size)}


def write_panels(cfg: SeedConfig, out_dir: Path | None = None) -> dict[str, int]:
    """Write the panel of every held-out split of ``cfg``'s environment; ``{file: ids}``."""
    env = make_env(cfg.env)
    written = {}
    for split in held_out_splits(env):
        panel = build_panel(cfg, env, split)
        path = Path(out_dir) / f"{cfg.env.name}-{split}.json" if out_dir else panel_path(cfg.env.name, split)
        written[str(write_json(path, panel))] = len(panel["ids"])
    return written


def read_panel(cfg: SeedConfig, split: str, root: Path | None = None) -> dict[str, Any]:
    path = panel_path(cfg.env.name, split, root)
    if not path.is_file():
        raise PanelError(f"{path} does not exist: env {cfg.env.name!r} has no fixed evaluation panel for split "
                         f"{split!r}; write it with `{panel_command(cfg)}` and commit it")
    try:
        panel = json.loads(path.read_text())
        if not isinstance(panel, dict) or not isinstance(panel.get("ids"), list):
            raise ValueError("no 'ids' list")
    except ValueError as err:
        raise PanelError(f"{path} is not a panel ({err}); rewrite it with `{panel_command(cfg)}`") from None
    return panel


def panel_tasks(cfg: SeedConfig, env: TextEnv, split: str, root: Path | None = None) -> list[Task]:
    """The tasks evaluation plays on ``split``: the panel's first ``eval.num_tasks`` ids, in panel order (all of
    them when the panel holds the whole split and fewer). An empty split, a panel of another catalogue or data
    set (``panel_source``), or one too short for ``eval.num_tasks`` stops the stage naming the file and the fix."""
    panel, path, n = read_panel(cfg, split, root), panel_path(cfg.env.name, split, root), cfg.eval.num_tasks
    if not env.panel_universe(split):
        require_tasks([], cfg, split, n)
    if panel.get("source", {}) != env.panel_source():
        raise PanelError(f"{path} holds ids of {panel.get('source')}, this run has {env.panel_source()}; write "
                         f"its panel with `{panel_command(cfg)}`")
    if n > len(panel["ids"]) and not panel.get("complete", False):
        raise PanelError(f"{path} holds {len(panel['ids'])} ids, eval.num_tasks asks for {n}; write a longer one "
                         f"with `{panel_command(cfg)} --set eval.num_tasks={n}`")
    try:
        return env.panel_tasks(split, panel["ids"][:n])
    except ValueError as err:
        raise PanelError(f"{path}: {err}; rewrite it with `{panel_command(cfg)}`") from None
