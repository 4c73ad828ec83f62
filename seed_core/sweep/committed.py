"""Sweep cells' results committed to git, so a long study can be split over several runs and machines (issue 25).

A finished cell of ``seed sweep`` (``sweep/dvc.yaml``) also writes its ``results.json`` (a few tens of KB: success
per method, the curves, the mechanism means, its key) to ``sweep/cells/seed_<s>-<key>.json``, a plain file in git
(``cache: false`` in spirit: not a DVC output, so a rerun of the stage never deletes it). ``key`` is the cell's
``seed_core.sweep.cells.cell_key``: the sha256 of everything its results depend on (the config less where it is
logged, ``sweep.methods``, ``project.seed``, the base model's DVC md5 and the fingerprint of the code a cell runs). When the cell stage runs again, on this
machine after ``git pull`` or on another, and finds a committed result under *its own* key, it reuses that result
instead of recomputing the cell (the cell's DVC output then holds ``results.json`` only, no checkpoints). A changed
config, method list, base model or code is another key, so it never reuses a result made under something else (a
study continues from the commit that made its cells: ``git worktree add ../study <commit>``); the old file stays
until someone removes it (``git rm``).

So a 10-seed study interrupted after 4 cells continues elsewhere with ``git pull && seed sweep ...``: cells 0-3 are
reused in seconds, 4-9 are computed. On another CPU the base model must be the same bytes (``dvc pull
data/models/base`` from the remote, or a machine whose numerics match): a testbed rebuilt there is another md5,
hence another key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seed_core.runtime.io import write_json
from seed_core.sweep.cells import read_keyed

COMMITTED_DIR = Path("sweep") / "cells"
"""Under the project root: the committed cell results (in git)."""


def committed_path(root: Path, seed: int, key: str) -> Path:
    return Path(root) / COMMITTED_DIR / f"seed_{seed}-{key}.json"


def read_committed(root: Path, seed: int, key: str) -> dict[str, Any] | None:
    """The committed results of cell ``seed`` under ``key``, or None (none, unreadable, or another key inside)."""
    results = read_keyed(committed_path(root, seed, key), key)
    return results if results is not None and results.get("seed") == seed else None


def write_committed(root: Path, seed: int, key: str, results: dict[str, Any]) -> Path:
    """Write (atomically) the committed copy of a finished cell's results with its key; returns its path."""
    path = committed_path(root, seed, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {**results, "config_hash": key})
    return path
