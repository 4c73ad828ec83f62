"""``seed worker``'s Prefect worker: a process worker that runs its pool's sweep cells and nothing else (issue 43).

``SeedCellWorker`` is Prefect's ``ProcessWorker`` changed at its extension point, ``run``: every flow run it takes
is checked first (``flows.cell_guard``: the deployment, job variables, parameters); a refused one ends in a Failed
state named ``Refused`` whose message says why (the Prefect UI shows it), and nothing starts. A checked one runs
with the worker's own job configuration, never the pool's template (anyone with API access can edit a pool):
``flows.pool.CELL_JOB_TEMPLATE`` with ``flows.cell_guard.CELL_COMMAND``, which checks the parameters again and runs
the cell flow without reading the deployment.

``serve`` runs the worker in this process rather than exec'ing ``prefect worker start``, so it is this class that
runs, and so one signal stops it: Prefect's CLI answers a first SIGTERM by only stopping its polling and waiting for
the running cell. Here one SIGINT or SIGTERM cancels the worker; its cell process ends with it (Prefect's process
handling, and ``flows.sweep_pool.watch_worker`` in the cell), the flow run is marked crashed, and the sweep
submits the cell again on another worker (``flows.pool.fan_out``).

``api_requires_auth`` tells whether the Prefect API asks for credentials (``seed ui --auth``) by calling it without.
"""

from __future__ import annotations

import copy
import shlex
import signal
import urllib.error
import urllib.request
from typing import Any, Callable

import anyio
import anyio.abc
import anyio.to_thread
from prefect.exceptions import ObjectNotFound
from prefect.workers.process import ProcessJobConfiguration, ProcessWorker, ProcessWorkerResult

from flows.cell_guard import CELL_COMMAND, cell_refusal, deployment_refusal, refusal_message, refused_state
from flows.pool import CELL_JOB_TEMPLATE
from seed_core.config import project_root


class RefusedRun(RuntimeError):
    """What a refused flow run reports to Prefect's submission code instead of a process id."""


def cell_job_template() -> dict[str, Any]:
    """``CELL_JOB_TEMPLATE`` with the command this worker starts for a checked cell (``CELL_COMMAND``)."""
    template = copy.deepcopy(CELL_JOB_TEMPLATE)
    template["job_configuration"]["command"] = shlex.join(CELL_COMMAND)
    return template


class SeedCellWorker(ProcessWorker):
    """A process worker that runs only its pool's sweep cells (module docstring)."""

    _description = "Runs the sweep cells of seed's cell deployment and refuses every other flow run (seed worker)."

    @classmethod
    def __dispatch_key__(cls) -> str:
        """Its own key in Prefect's worker registry, so that ``process`` still names Prefect's ``ProcessWorker``
        (the pool's type stays ``process``)."""
        return "seed-cell"

    @classmethod
    def get_default_base_job_template(cls) -> dict[str, Any]:
        """The template a pool this worker creates gets (the worker never runs with a pool's template)."""
        return copy.deepcopy(CELL_JOB_TEMPLATE)

    async def run(self, flow_run: Any, configuration: ProcessJobConfiguration,
                  task_status: anyio.abc.TaskStatus[int] | None = None) -> ProcessWorkerResult:
        """Check the flow run (``flows.cell_guard``), then run it with this worker's own configuration; the pool's
        ``configuration`` is not used."""
        deployment, flow_name = await self._deployment_of(flow_run)
        why = deployment_refusal(flow_run, deployment, flow_name, self._work_pool_name) or \
            await anyio.to_thread.run_sync(cell_refusal, dict(flow_run.parameters or {}), project_root())
        if why:
            return await self._refuse(flow_run, why, task_status)
        cell = await self._cell_configuration(flow_run, deployment)
        try:
            return await super().run(flow_run, cell, task_status)
        except anyio.get_cancelled_exc_class():  # the worker is stopping (serve): the sweep runs the cell again
            with anyio.CancelScope(shield=True):
                await self._propose_crashed_state(flow_run, f"seed worker {self.name!r} was stopped while running "
                                                            "this cell; the sweep submits it again")
            raise

    async def _deployment_of(self, flow_run: Any) -> tuple[Any, str | None]:
        """The flow run's deployment and the name of that deployment's flow; (None, None) without one."""
        if flow_run.deployment_id is None:
            return None, None
        try:
            deployment = await self.client.read_deployment(flow_run.deployment_id)
            flow = await self.client.read_flow(deployment.flow_id)
        except ObjectNotFound:
            return None, None
        return deployment, flow.name

    async def _refuse(self, flow_run: Any, why: str,
                      task_status: anyio.abc.TaskStatus[Any] | None) -> ProcessWorkerResult:
        """End the flow run Failed/Refused with the reason (in its log too); no process starts."""
        message = refusal_message(self.name, self._work_pool_name, why)
        self.get_flow_run_logger(flow_run).warning(message)
        await self.client.set_flow_run_state(flow_run.id, refused_state(message), force=True)
        if task_status is not None:
            task_status.started(RefusedRun(message))  # Prefect's own way to report a submission that did not start
        return ProcessWorkerResult(status_code=0, identifier="refused")

    async def _cell_configuration(self, flow_run: Any, deployment: Any) -> ProcessJobConfiguration:
        """The job configuration of a checked cell, from ``cell_job_template`` with no job variables."""
        configuration = await ProcessJobConfiguration.from_template_and_values(cell_job_template(), {},
                                                                               client=self.client)
        configuration.prepare_for_flow_run(flow_run=flow_run, deployment=deployment,
                                           flow=await self.client.read_flow(flow_run.flow_id),
                                           work_pool=self.work_pool, worker_name=self.name,
                                           worker_id=self.backend_id)
        return configuration


def serve(pool: str, limit: int, name: str, say: Callable[[str], None] = print) -> str:
    """Run a ``SeedCellWorker`` of ``pool`` in this process until one SIGINT or SIGTERM (module docstring);
    returns that signal's name ("" when the worker stopped by itself)."""
    return anyio.run(_serve, pool, limit, name, say)


async def _serve(pool: str, limit: int, name: str, say: Callable[[str], None]) -> str:
    stopped = ""
    worker = SeedCellWorker(work_pool_name=pool, name=name, limit=limit)
    async with anyio.create_task_group() as group:

        async def stop_on_signal() -> None:
            nonlocal stopped
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:  # one is enough; a second one during the stop ends the process
                    stopped = signal.Signals(signum).name
                    say(f"seed worker {name!r}: {stopped}, stopping; a cell it runs ends and the sweep submits it "
                        "again")
                    group.cancel_scope.cancel()
                    return

        group.start_soon(stop_on_signal)
        await worker.start(printer=say)
        group.cancel_scope.cancel()
    return stopped


def api_requires_auth(url: str) -> bool:
    """Whether the Prefect API at ``url`` refuses a request without credentials (``seed ui --auth``: HTTP 401; a
    proxy may answer 403). Its health route answers everyone, so this asks for the server version instead."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/admin/version", timeout=10):
            return False
    except urllib.error.HTTPError as err:
        return err.code in (401, 403)
