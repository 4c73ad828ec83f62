"""``seed worker`` and ``seed sweep --pool``: sweep cells on a Prefect work pool (``flows.pool``, ``flows.sweep_pool``).

``start_worker`` runs this process as the pool's worker (``seed_app.cell_worker``: a Prefect process worker that
runs the pool's sweep cells and refuses every other flow run) in this project clone: the pool and the cell
deployment are created first when missing, and the worker's environment gives every cell this clone
(``SEED_WORKER_ROOT``), the worker's PID (a cell ends when its worker is gone), its name and ``--threads`` torch
threads (``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``, which torch reads when it starts). Several workers on one
machine split its cores: ``--threads`` each. It refuses to start against a Prefect API that asks for no
credentials unless told to (``allow_unauthenticated``): anyone who reaches such an API can submit flow runs to it.

``run_pool_sweep`` is ``seed sweep --pool``: the base model (``dvc repro prepare_model``, as the DVC sweep needs
it), then the ``sweep-pool`` flow under the MLflow parent run ``sweep`` on this machine's tracking store, which
every cell logs to.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from seed_core.config import ConfigError, SeedConfig, endpoint_env, project_root

SWEEP_ARTIFACTS = ("params.yaml", "reports/sweep/table.md", "reports/sweep/learning.json",
                   "reports/sweep/curve_success.png")


def prefect_api(command: str) -> str:
    """The Prefect API the pool lives on: ``$PREFECT_API_URL``, else ``seed ui``'s server; none that answers is a
    ``ConfigError`` naming the fix (a pool needs one server that every machine reaches)."""
    from flows import servers

    url = endpoint_env("PREFECT_API_URL") or (f"{ui}/api" if (ui := servers.ui_url("prefect")) else None)
    if not url or not servers.healthy(f"{url.rstrip('/')}/health"):
        where = f"no Prefect server answers at {url}" if url else "no Prefect server is up"
        raise ConfigError(f"{command}: {where}; start `seed ui` on the sweep's machine (`seed ui --host 0.0.0.0` for "
                          f"other machines) and set PREFECT_API_URL=http://HOST:4200/api on every machine")
    os.environ["PREFECT_API_URL"] = url
    os.environ.update(servers.client_auth_env(url, None))  # `seed ui --auth`'s credentials
    return url


def worker_env(name: str, threads: int) -> dict[str, str]:
    """The environment ``prefect worker start`` runs in, inherited by every cell it starts (module docstring)."""
    from flows.pool import ROOT_VAR, THREADS_VAR, WORKER_NAME_VAR, WORKER_PID_VAR
    from seed_app.services import QUIET_ENV

    root = str(project_root())
    return {**QUIET_ENV, **os.environ, ROOT_VAR: root, WORKER_PID_VAR: str(os.getpid()), WORKER_NAME_VAR: name,
            THREADS_VAR: str(threads), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "PREFECT_RUNNER_AUTO_INSTALL_DEPENDENCIES": "false",  # the clone's venv as it is: no `uv run`
            "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])]),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}


def check_api_auth(url: str, allow_unauthenticated: bool) -> None:
    """A ``ConfigError`` naming the fix when the Prefect API at ``url`` takes requests without credentials and the
    user did not accept that (``--allow-unauthenticated-api``)."""
    from seed_app.cell_worker import api_requires_auth

    if not allow_unauthenticated and not api_requires_auth(url):
        raise ConfigError(f"seed worker: the Prefect API at {url} has no authentication, so anyone who reaches it can "
                          "submit flow runs to this worker's pool; start it with `seed ui --auth` (its credentials "
                          "reach this worker from .tmp/ui/auth.json, or set PREFECT_API_AUTH_STRING=seed:PASSWORD), "
                          "or pass --allow-unauthenticated-api to accept that")


def start_worker(pool: str, limit: int = 1, threads: int | None = None, name: str | None = None,
                 allow_unauthenticated: bool = False) -> None:
    """Serve the pool's sweep cells in this process (see the module docstring) until one SIGINT or SIGTERM.
    ``threads``: default the machine's cores split over ``limit`` cells."""
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    url = prefect_api("seed worker")
    check_api_auth(url, allow_unauthenticated)
    threads = threads or max(1, (os.cpu_count() or 1) // limit)
    name = name or f"{socket.gethostname()}-{os.getpid()}"
    settings = {PREFECT_API_URL: url, **({PREFECT_API_AUTH_STRING: auth} if (auth := os.environ.get(
        "PREFECT_API_AUTH_STRING")) else {})}
    with temporary_settings(settings):
        from flows.sweep_pool import ensure_deployment
        from seed_app.cell_worker import serve

        ensure_deployment(pool)
        print(f"seed worker {name!r}: pool {pool!r} at {url}, {limit} cell(s) at a time, {threads} torch thread(s) "
              f"each, code and data of {project_root()}", flush=True)
        os.chdir(project_root())
        os.environ.update(worker_env(name, threads))
        stopped = serve(pool, limit, name, say=lambda line: print(line, flush=True))
    print(f"seed worker {name!r}: stopped" + (f" ({stopped})" if stopped else ""), flush=True)


def base_model(cfg: SeedConfig) -> tuple[Path, str]:
    """The base model the cells share and its DVC md5: ``dvc repro prepare_model`` of params.yaml (the sweep's
    config may not change its keys: a ``ConfigError`` naming them)."""
    from flows.common import dvc_lock_md5s, stage_paths
    from seed_app import workspace
    from seed_core.loader import load_config
    from seed_core.lineage.stage_params import STAGE_PARAMS, project

    root = project_root()
    keys = tuple(k for k in STAGE_PARAMS["prepare_model"] if k != "project.seed")
    params = project(load_config(root / "params.yaml").model_dump(mode="json"), keys)
    changed = [k for k, v in project(cfg.model_dump(mode="json"), keys).items() if params[k] != v]
    if changed:
        raise ConfigError(f"seed sweep --pool: the preset or -S changes the base model's keys {', '.join(changed)}; "
                          f"the pool's cells share params.yaml's base model: set them in params.yaml")
    subprocess.run(["dvc", "repro", "prepare_model"], cwd=root, check=True, pass_fds=workspace.inherited_fds(),
                   env={**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                                               os.environ.get("PATH", "")])})
    path = stage_paths(cfg).base_model
    return path, dvc_lock_md5s([path]).get("data/models/base", "")


def run_pool_sweep(cfg: SeedConfig, pool: str, summary: Callable[[Path, Any], dict[str, float]],
                   retries: int = 2) -> dict[str, Any]:
    """``seed sweep --pool``: the ``sweep-pool`` flow under the MLflow parent run ``sweep`` (module docstring);
    ``summary(root, cfg)``: the parent run's metrics. Returns learning.json's summary."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from seed_core.tracking import open_run, tracking_uri

    url = prefect_api("seed sweep --pool")
    path, md5 = base_model(cfg)
    root = project_root()
    with temporary_settings({PREFECT_API_URL: url}), \
            open_run(cfg, "sweep", tags={"stage": "sweep", "sweep.pool": pool}) as parent:
        from flows.sweep_pool import sweep_pool_flow

        try:
            result = sweep_pool_flow(config=cfg.model_dump(mode="json"), pool=pool, base_model=str(path),
                                     base_model_md5=md5, tracking_uri=tracking_uri(), parent_run_id=parent.run_id,
                                     retries=retries)
        except RuntimeError as err:  # cells that failed every try, a cell that did not come back: one line
            print(f"seed sweep --pool: {err}", file=sys.stderr)
            raise SystemExit(1) from None
        parent.log_metrics(summary(root, cfg))
        for artifact in (root / a for a in SWEEP_ARTIFACTS):
            if artifact.is_file():
                parent.log_artifact(artifact)
    return result
