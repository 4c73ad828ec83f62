"""A Prefect work pool of sweep cells: the pool and the cell deployment (created when missing), and the fan-out
that submits cells with ``run_deployment``, waits, and resubmits a failed, crashed or lost one on any worker.

The deployment (``<CELL_FLOW>/<pool>``) has no code storage: one pull step enters ``$SEED_WORKER_ROOT``, the
project clone ``seed worker`` runs in (each worker exports its own), and the process worker puts that directory
first on the flow run's ``PYTHONPATH``, so every cell runs the code of the clone that picked it up. Registering it
again (every ``seed worker`` and every ``seed sweep --pool`` does) updates the same deployment.

The pool's job template (``CELL_JOB_TEMPLATE``) hard-codes the process a flow run gets: Prefect's own engine
command, no extra environment, no working directory, and no job variables to change them. That is defense in
depth only: anyone with API access can edit a pool, so a ``seed worker`` (``seed_app.cell_worker``) ignores the
pool's template, runs every flow run with this one, and refuses any flow run that is not a cell of
``deployment_name(pool)`` (``flows.cell_guard``).

A cell is *lost* when its flow run is not final and the worker that took it (its ``prefect.worker.name`` label)
sent no heartbeat for ``LOST_AFTER_HEARTBEATS`` of its heartbeat intervals plus ``LOST_GRACE_S`` (a worker killed
with SIGKILL never reports its flow run; the cell process it started exits on its own within a second, see
``flows.sweep_pool.watch_worker``): the fan-out marks it crashed and submits the cell again, at most ``retries``
times per cell.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable
from uuid import UUID

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import WorkPoolCreate, WorkPoolUpdate
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
from prefect.deployments import run_deployment
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
from prefect.states import Crashed

POOL_TYPE = "process"
CELL_FLOW = "sweep-pool-cell"
"""The cell flow (``flows.sweep_pool.sweep_pool_cell_flow``); its deployment on pool P is ``sweep-pool-cell/P``."""
ENTRYPOINT = "flows/sweep_pool.py:sweep_pool_cell_flow"
ROOT_VAR, WORKER_PID_VAR, WORKER_NAME_VAR = "SEED_WORKER_ROOT", "SEED_WORKER_PID", "SEED_WORKER_NAME"
THREADS_VAR = "SEED_TORCH_THREADS"
"""Set by ``seed worker`` for its flow runs: its project clone, its PID and name, the torch threads of each cell."""
PULL_STEPS = [{"prefect.deployments.steps.set_working_directory": {"directory": f"{{{{ ${ROOT_VAR} }}}}"}}]
"""The cell deployment's one pull step: enter the worker's project clone (``$SEED_WORKER_ROOT``)."""
CELL_JOB_TEMPLATE: dict[str, Any] = {
    "job_configuration": {"command": None, "env": {}, "labels": "{{ labels }}", "name": "{{ name }}",
                          "stream_output": True, "working_dir": None},
    "variables": {"type": "object", "properties": {
        "name": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Name",
                 "description": "Name given to the cell's process."},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}, "title": "Labels",
                   "description": "Labels of the cell's process."}}}}
"""The process pool's job template with nothing that chooses what runs: no ``command``, ``env`` or
``working_dir`` variable (Prefect's default template has them), so the engine command of the worker's own Python
runs in a temporary directory with the worker's environment; only the cosmetic name and labels are variables."""
LOST_AFTER_HEARTBEATS, LOST_GRACE_S = 3, 5.0
PAGE = 100
"""Flow runs read per request (the server answers at most its default limit, 200)."""


def deployment_name(pool: str) -> str:
    return f"{CELL_FLOW}/{pool}"


def ensure_pool(client: Any, pool: str) -> None:
    """Create work pool ``pool`` (type ``process``, ``CELL_JOB_TEMPLATE``) unless it exists, and put that template
    back when it was changed (an older pool, Prefect's default template, an edit through the API); one of another
    type is an error naming it."""
    try:
        found = client.read_work_pool(pool)
    except ObjectNotFound:
        try:
            client.create_work_pool(WorkPoolCreate(name=pool, type=POOL_TYPE, base_job_template=CELL_JOB_TEMPLATE))
        except ObjectAlreadyExists:  # another worker created it meanwhile
            pass
        return
    if found.type != POOL_TYPE:
        raise ValueError(f"work pool {pool!r} has type {found.type!r}, sweep cells need a {POOL_TYPE!r} pool: choose "
                         f"another --pool name")
    if found.base_job_template != CELL_JOB_TEMPLATE:
        client.update_work_pool(pool, WorkPoolUpdate(base_job_template=CELL_JOB_TEMPLATE))


@dataclass
class Cell:
    """One cell of the fan-out: its seed, the flow-run parameters, its tries so far (flow run ids), then the flow run
    that completed it or why its last try failed."""

    seed: int
    parameters: dict[str, Any]
    runs: list[UUID] = field(default_factory=list)
    final: Any = None
    error: str | None = None


def lost_reason(run: Any, workers: dict[str, Any], now: datetime) -> str | None:
    """Why a not-final flow run is lost (its worker's heartbeats stopped), or None while it is not."""
    name = (run.labels or {}).get("prefect.worker.name")
    worker = workers.get(name) if name else None
    if worker is None or worker.last_heartbeat_time is None:
        return None  # not taken yet (or by a worker not in this pool's list): it waits
    interval = float(worker.heartbeat_interval_seconds or 30)
    silent = (now - worker.last_heartbeat_time).total_seconds()
    if silent > LOST_AFTER_HEARTBEATS * interval + LOST_GRACE_S:
        return f"worker {name!r} lost: no heartbeat for {silent:.0f} s (every {interval:.0f} s expected)"
    return None


def try_failed(client: Any, run: Any, workers: dict[str, Any], now: datetime) -> str | None:
    """Why the try ``run`` failed (failed, crashed, cancelled, or lost: then marked crashed), None while it runs or
    waits, or once it completed."""
    state = run.state
    if state is not None and state.is_final():
        return None if state.is_completed() else f"{state.type.value.lower()}: {state.message or ''}".strip(": ")
    reason = lost_reason(run, workers, now)
    if reason:
        client.set_flow_run_state(run.id, Crashed(message=reason), force=True)
    return reason


def fan_out(deployment: str, pool: str, cells: list[Cell], retries: int, poll_s: float = 2.0,
            say: Callable[[str], None] = print) -> list[Cell]:
    """Submit every cell (``run_deployment``, ``timeout=0``), then poll until each completed; a failed, crashed,
    cancelled or lost try is resubmitted (any worker may take it) up to ``retries`` times. Raises ``RuntimeError``
    naming the cells that still failed."""
    def submit(cell: Cell) -> None:
        run = run_deployment(deployment, parameters=cell.parameters, timeout=0,
                             flow_run_name=f"sweep-seed-{cell.seed}-try-{len(cell.runs)}")
        cell.runs.append(run.id)

    for cell in cells:
        submit(cell)
    told = False
    with get_client(sync_client=True) as client:
        while pending := [c for c in cells if c.final is None and c.error is None]:
            time.sleep(poll_s)
            ids = [c.runs[-1] for c in pending]
            runs = {r.id: r for i in range(0, len(ids), PAGE) for r in client.read_flow_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=ids[i:i + PAGE])), limit=PAGE)}
            workers = {w.name: w for w in client.read_workers_for_work_pool(pool)}
            if not workers and not told:
                say(f"seed sweep: waiting for a worker on pool {pool!r}: start one with `seed worker --pool {pool}`")
                told = True
            now = datetime.now(timezone.utc)
            for cell in pending:
                run = runs[cell.runs[-1]]
                if run.state is not None and run.state.is_completed():
                    cell.final = run
                elif (reason := try_failed(client, run, workers, now)) and len(cell.runs) > retries:
                    cell.error = f"seed {cell.seed} ({reason})"
                elif reason:
                    say(f"seed sweep: cell seed {cell.seed}, try {len(cell.runs) - 1}: {reason}; submitting it again")
                    submit(cell)
    if failed := [c.error for c in cells if c.error]:
        raise RuntimeError(f"sweep cells failed after {retries} retries: {'; '.join(failed)}; see their flow runs in "
                           f"the Prefect UI")
    return cells
