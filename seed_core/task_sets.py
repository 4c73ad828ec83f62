"""Which tasks a stage plays: deterministic, stage-separated task seeds and the ``tasks.json`` files that
carry the collected tasks from one stage to the next."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from seed_core.config import SeedConfig
from seed_core.io import DataFileError, write_json
from seed_core.types import Task


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
    """Deterministic, stage-separated task seeds (collect, rl round i, eval never share tasks by accident)."""
    offsets = {"collect": 0, "rl": 100_000, "eval": 900_000}
    return cfg.project.seed * 1_000_003 + offsets[stage] + index * 1_000
