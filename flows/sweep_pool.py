"""``seed sweep --pool``: the sweep's cells as runs of one Prefect deployment on a work pool, then the same
``reports/sweep/`` as the DVC sweep.

``sweep_pool_flow`` (the parent, in the ``seed sweep`` process) keys every cell (``seed_core.sweep.cells.cell_key``),
skips the finished ones, fans the others out (``flows.pool.fan_out``: ``run_deployment``, retries of failed or
lost cells on any worker), brings cells computed on other machines back through the DVC remote
(``flows.cell_data``) and writes the report. ``sweep_pool_cell_flow`` (a flow run on a ``seed worker``) runs one
cell (``seed_core.sweep.cells.run_cell_once``: at most once per key, published atomically) and logs it as a child
of the sweep's MLflow run, on the tracking server the parent passes down.

Where a cell's files go: a worker on the sweep's machine writes the sweep's own cells directory
(``data/sweep_pool/seed_<s>`` of the sweep's clone) and reads its base model; a worker on another machine uses its
own clone's ``data/models/base`` (the same DVC md5, or it refuses) and sends the cell through the DVC remote.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.runtime import flow_run
from prefect.utilities.callables import parameter_schema

from flows.cell_data import CELL_MD5_LABEL, fetch
from flows.common import dvc_lock_md5s, stage_paths, stage_run
from flows.pool import (ENTRYPOINT, PULL_STEPS, WORKER_NAME_VAR, WORKER_PID_VAR, Cell, deployment_name, ensure_pool,
                        fan_out)
from seed_core.config import project_root
from seed_core.loader import load_config, validate_config, with_overrides
from seed_core.sweep.cells import cell_dir, cell_key, finished_cell, run_cell_once
from tasks.sweep import sweep_report

POOL_CELLS = "sweep_pool"
"""``<project.data_dir>/sweep_pool/``: the pool's cells (``seed_<s>``, their locks and ``cells.log``); DVC's sweep
keeps ``data/sweep/``."""


def watch_worker(poll_s: float = 1.0) -> None:
    """When this flow run was started by a ``seed worker`` (``$SEED_WORKER_PID``), end it (SIGKILL to its process
    group) as soon as that worker is gone: a worker killed with SIGKILL leaves its flow runs orphaned and running,
    and the sweep would compute their cells a second time elsewhere."""
    pid = int(os.environ.get(WORKER_PID_VAR) or 0)
    if not pid:
        return
    parent = os.getppid()

    def gone() -> bool:
        if parent == pid:  # the worker started us: orphaned means reparented
            return os.getppid() != parent
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    def watch() -> None:
        while not gone():
            time.sleep(poll_s)
        os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="seed-worker-watch", daemon=True).start()


def cell_inputs(parent_host: str, cells_dir: str, base_model: str, base_model_md5: str,
                tracking_uri: str) -> tuple[Path, Path, bool]:
    """(cells directory, base model, whether the cell goes through the DVC remote) for this worker; on another
    machine, a base model other than the sweep's or a tracking store only the sweep's machine sees is an error
    naming the fix."""
    if socket.gethostname() == parent_host:
        return Path(cells_dir), Path(base_model), False

    if tracking_uri.startswith(("sqlite:", "file:")) or "://" not in tracking_uri:
        raise RuntimeError(f"the sweep logs to {tracking_uri} on {parent_host}, which this worker cannot reach: start "
                           f"a shared MLflow server (`seed ui --host 0.0.0.0`) and set MLFLOW_TRACKING_URI to it "
                           f"where `seed sweep` runs")
    paths = stage_paths(load_config(project_root() / "params.yaml"))
    mine = dvc_lock_md5s([paths.base_model]).get("data/models/base", "")
    if not paths.base_model.is_dir() or (base_model_md5 and mine != base_model_md5):
        raise RuntimeError(f"{paths.base_model} is not the sweep's base model (DVC md5 {mine or 'none'}, the sweep's "
                           f"{base_model_md5}): in {project_root()} run `git pull && dvc pull data/models/base`, then "
                           f"start the worker again")
    return paths.data / POOL_CELLS, paths.base_model, True


@flow(name="sweep-pool-cell")  # its runs are named by the fan-out: sweep-seed-<s>-try-<n>
def sweep_pool_cell_flow(config: dict[str, Any], seed: int, key: str, cells_dir: str, base_model: str,
                         parent_host: str, tracking_uri: str, base_model_md5: str = "",
                         parent_run_id: str | None = None) -> dict[str, Any]:
    """One cell (``seed`` under the sweep's resolved ``config``, keyed ``key``) on this worker; returns its seed,
    key, outcome (``completed`` / ``reused``) and, when it went through the DVC remote, its md5."""
    watch_worker()
    os.environ["MLFLOW_TRACKING_URI"] = tracking_uri  # the sweep's server: every cell logs where its parent does
    cells, base, remote = cell_inputs(parent_host, cells_dir, base_model, base_model_md5, tracking_uri)
    source = project_root() / ".tmp" / POOL_CELLS / f"{key}.json"  # a file: launched stages load it again
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(json.dumps(config))
    cfg = load_config(source, {"project.seed": seed}, origin="the sweep's cell")
    with stage_run(cfg, f"sweep-seed-{seed}", "sweep", [base], parent_run_id) as tracker:
        tracker.set_tags({"seed": seed, "methods": ",".join(cfg.sweep.methods), "sweep.cell_key": key,
                          "prefect.worker": os.environ.get(WORKER_NAME_VAR, "")})
        _, outcome = run_cell_once(cfg, base, cells, key, tracker, flow_run=str(flow_run.id or ""),
                                   worker=os.environ.get(WORKER_NAME_VAR, ""))
        tracker.log_artifact(cell_dir(cells, seed) / "results.json")
        out: dict[str, Any] = {"seed": seed, "key": key, "outcome": outcome}
        if remote:
            from flows.cell_data import CELL_MD5_LABEL, publish

            out["dvc_md5"] = publish(cell_dir(cells, seed), project_root())
            _label_flow_run({CELL_MD5_LABEL: out["dvc_md5"]})
        return out


def _label_flow_run(labels: dict[str, str]) -> None:
    if flow_run.id:
        with get_client(sync_client=True) as client:
            client.update_flow_run_labels(flow_run.id, labels)


def pool_cells(config: dict[str, Any], base_model: Path, base_md5: str, tracking_uri: str,
               parent_run_id: str | None) -> tuple[list[Cell], dict[int, str], Path]:
    """The sweep's cells: (those to run, with their flow-run parameters; every seed's key; the cells directory)."""
    cfg = validate_config(config)
    cells = stage_paths(cfg).data / POOL_CELLS
    todo, keys = [], {}
    for seed in cfg.sweep.seeds:
        cell_cfg = with_overrides(cfg, {"project.seed": seed})
        keys[seed] = cell_key(cell_cfg, base_md5)
        if finished_cell(cell_dir(cells, seed), keys[seed]) is not None:
            print(f"seed sweep: cell seed {seed} is finished under this config ({keys[seed]}): reused")
            continue
        todo.append(Cell(seed, {"config": cell_cfg.model_dump(mode="json"), "seed": seed, "key": keys[seed],
                                "cells_dir": str(cells), "base_model": str(base_model),
                                "base_model_md5": base_md5, "parent_host": socket.gethostname(),
                                "tracking_uri": tracking_uri, "parent_run_id": parent_run_id}))
    return todo, keys, cells


@flow(name="sweep-pool", log_prints=True)
def sweep_pool_flow(config: dict[str, Any], pool: str, base_model: str, base_model_md5: str, tracking_uri: str,
                    parent_run_id: str | None = None, retries: int = 2, poll_s: float = 2.0) -> dict[str, Any]:
    """The sweep of ``config`` (its ``sweep.seeds`` and ``sweep.methods``) over work pool ``pool`` (see the module
    docstring); returns the report's summary (``learning.json``)."""
    todo, keys, cells = pool_cells(config, Path(base_model), base_model_md5, tracking_uri, parent_run_id)
    if todo:
        fan_out(ensure_deployment(pool), pool, todo, retries, poll_s)
    for cell in todo:
        md5 = (cell.final.labels or {}).get(CELL_MD5_LABEL)
        if md5 and finished_cell(cell_dir(cells, cell.seed), keys[cell.seed]) is None:
            fetch(md5, cell_dir(cells, cell.seed), project_root())  # computed on another machine
    missing = [s for s, key in keys.items() if finished_cell(cell_dir(cells, s), key) is None]
    if missing:
        raise RuntimeError(f"cells of seeds {missing} completed but {cells} lacks their results.json under this "
                           f"config: a worker on another machine needs the DVC remote (`dvc remote add -d`)")
    cfg = validate_config(config)
    paths = stage_paths(cfg)
    dirs = [cell_dir(cells, s) for s in cfg.sweep.seeds]
    with stage_run(cfg, "sweep-report", "sweep", dirs, parent_run_id) as tracker:
        summary = sweep_report(cfg, dirs, paths.reports / "sweep")
        tracker.log_metrics({f"{m}/mean": s["mean"] for m, s in summary["methods"].items()})
        for name in ("learning.json", "table.md", "curve_success.png"):
            tracker.log_artifact(paths.reports / "sweep" / name)
    return summary


def ensure_deployment(pool: str) -> str:
    """The pool (``ensure_pool``) and the cell deployment on it (created or updated); returns its name."""
    with get_client(sync_client=True) as client:
        ensure_pool(client, pool)
        flow_id = client.create_flow(sweep_pool_cell_flow)
        client.create_deployment(
            flow_id=flow_id, name=pool, work_pool_name=pool, entrypoint=ENTRYPOINT,
            pull_steps=PULL_STEPS, job_variables={},
            parameter_openapi_schema=parameter_schema(sweep_pool_cell_flow).model_dump_for_openapi(),
            description="One sweep cell (one seed under one config) on whichever `seed worker` of the pool is free.")
    return deployment_name(pool)
