"""Sweep cells that many processes (pool workers, ``seed sweep --pool``) may run: keyed, run at most once, published
atomically.

A cell is one seed of the sweep (``seed_core.sweep.cell.run_seed_cell``) under one config. Its key (``cell_key``) is
the sha256 of what its results depend on: the resolved config less ``stage_params.NOT_RESULTS`` (where runs are
logged, the output root, the preset label, ...), plus ``sweep.methods`` (what the cell runs), ``project.seed`` and
the base model's DVC md5. A *finished* cell is ``<cells>/seed_<s>/results.json`` carrying that key
(``config_hash``): it is never recomputed (``finished_cell``).

``run_cell_once`` contract, for any number of processes on one file system:

- the cell's lock (``<cells>/.seed_<s>.lock``, an OS lock the kernel drops when its holder dies) is held from
  before the check to after the publish, so a second process for the same cell waits, then finds it finished;
- the cell is computed in ``<cells>/.seed_<s>.tmp-<pid>`` and swapped in whole (``io.swap_dir``): a killed cell
  leaves no ``seed_<s>`` (or the previous one), never a mix; its temporary directory is removed by the next try;
- each try appends one JSON line to ``<cells>/cells.log`` when it starts (``started``, with its torch threads) and
  when ``run_seed_cell`` returned (``completed``), or ``reused`` when it found the cell finished: the record that
  no cell ran twice to completion.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any, Callable

from filelock import FileLock

from seed_core.config import SeedConfig
from seed_core.lineage.code_closure import fingerprint
from seed_core.lineage.stage_params import NOT_RESULTS
from seed_core.runtime.io import recover_dir, swap_dir, write_json
from seed_core.sweep.cell import run_seed_cell
from seed_core.tracking import NullTracker, Tracker

LOG_FILE = "cells.log"
"""One JSON line per event of every try (``started``, ``completed``, ``reused``), under the cells directory."""


def cell_dir(cells: Path, seed: int) -> Path:
    """``<cells>/seed_<seed>``: where the cell of ``seed`` lives (the same name as ``sweep/dvc.yaml``'s cells)."""
    return Path(cells) / f"seed_{seed}"


def _drop(data: dict[str, Any], dotted: str) -> None:
    head, _, rest = dotted.partition(".")
    if rest and isinstance(data.get(head), dict):
        _drop(data[head], rest)
    elif not rest:
        data.pop(head, None)


def cell_key(cfg: SeedConfig, base_model_md5: str = "", code: str = "") -> str:
    """The cell's key: 16 hex digits of the sha256 of ``cfg`` (``project.seed`` included) less ``NOT_RESULTS``, plus
    ``sweep.methods``, ``base_model_md5`` (the base model's DVC md5; "" when unknown) and ``code`` (a fingerprint of
    the code the cell runs, ``code_fingerprint``; "" leaves it out)."""
    data = cfg.model_dump(mode="json")
    methods = list(cfg.sweep.methods)
    for key in NOT_RESULTS:
        _drop(data, key)
    payload = {"config": data, "methods": methods, "base_model": base_model_md5, **({"code": code} if code else {})}
    text = json.dumps(payload, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def code_fingerprint(entry: str = "flows.sweep") -> str:
    """16 hex digits of the sha256 of the ``sha256sum`` lines of every file ``entry`` can import
    (``seed_core.lineage.code_closure``, the same lines as the DVC stages' code dependency): an edit to any code a cell runs
    is another key, so a result made by other code is never reused."""
    return hashlib.sha256(fingerprint(entry).encode()).hexdigest()[:16]


def finished_cell(out_dir: Path, key: str) -> dict[str, Any] | None:
    """The cell's ``results.json`` when it holds ``key`` (``config_hash``), else None (missing, unreadable, or made
    under another config)."""
    return read_keyed(Path(out_dir) / "results.json", key)


def read_keyed(path: Path, key: str) -> dict[str, Any] | None:
    """The results JSON at ``path`` when it carries ``key`` (``config_hash``), else None (missing, unreadable, not an
    object, or made under another key)."""
    try:
        results = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return results if isinstance(results, dict) and results.get("config_hash") == key else None


def log_event(cells: Path, event: str, seed: int, key: str, **extra: Any) -> None:
    """Append one JSON line to ``<cells>/cells.log`` (one ``write`` in append mode: lines never interleave)."""
    record = {"event": event, "seed": seed, "config_hash": key, "host": socket.gethostname(), "pid": os.getpid(),
              "time": time.time(), **extra}
    Path(cells).mkdir(parents=True, exist_ok=True)
    with open(Path(cells) / LOG_FILE, "a", encoding="utf-8") as log:
        log.write(json.dumps(record, sort_keys=True) + "\n")


def read_events(cells: Path) -> list[dict[str, Any]]:
    """Every line of ``<cells>/cells.log`` (empty when there is none)."""
    path = Path(cells) / LOG_FILE
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


CellRunner = Callable[[SeedConfig, Path, Path, list[str], Tracker], dict[str, Any]]


def _run_seed_cell(cfg: SeedConfig, base_model: Path, out_dir: Path, methods: list[str],
                   tracker: Tracker) -> dict[str, Any]:
    return run_seed_cell(cfg, base_model, out_dir, methods, tracker=tracker)


def run_cell_once(cfg: SeedConfig, base_model: Path, cells: Path, key: str, tracker: Tracker | None = None,
                  runner: CellRunner = _run_seed_cell, **record: Any) -> tuple[dict[str, Any], str]:
    """The cell of ``cfg.project.seed`` under ``key`` (see the module docstring): ``(results, "reused")`` when it is
    finished, else ``(results, "completed")`` after computing and publishing it. ``record``: extra fields of its
    ``cells.log`` lines (the flow run, the worker)."""
    seed = cfg.project.seed
    out_dir = cell_dir(cells, seed)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(out_dir.parent / f".{out_dir.name}.lock"):
        recover_dir(out_dir)  # a swap killed half-way; temporary dirs of dead tries (on this host)
        if (done := finished_cell(out_dir, key)) is not None:
            log_event(cells, "reused", seed, key, **record)
            return done, "reused"
        tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)  # a try of a reused PID: start from nothing, as DVC does
        import torch  # the cell's threads (``OMP_NUM_THREADS`` of its worker) go on record

        log_event(cells, "started", seed, key, torch_threads=torch.get_num_threads(), **record)
        results = runner(cfg, Path(base_model), tmp, list(cfg.sweep.methods), tracker or NullTracker())
        results = {**results, "config_hash": key}
        write_json(tmp / "results.json", results)
        log_event(cells, "completed", seed, key, **record)
        swap_dir(tmp, out_dir)
    return results, "completed"
