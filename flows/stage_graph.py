"""The stages of a ``seed run`` in its Prefect flow run's graph: each DVC stage that runs is a linked subflow run of
the pipeline run, each stage DVC skipped a task run in the ``Cached`` state named after it.

Why: DVC runs each stage as its own process, so its flow run had no parent and the pipeline run's graph said
"This flow run did not generate any task or subflow runs". Prefect's own way to link a flow run that starts
outside the parent's process (``run_deployment``, prefect/deployments/flow_runs.py:371-421, and a worker's
submission, PrefectHQ/prefect#17894) is used here as it is there: a task run in the parent flow run stands for
the child, and the child flow run is created with ``parent_task_run_id`` pointing at it (the engine does the same
for an in-process subflow, prefect/flow_engine.py:1001-1038), then run by the engine as a worker runs a flow run
it was given (``prefect.flow_engine.run_flow(flow, flow_run=...)``, prefect/flow_engine.py:2246). The server's
graph (``/flow_runs/{id}/graph-v2``, prefect/server/database/query_components.py:908-970) shows such a task run as
the child flow run's node, with the child's state, start and end, and the UI links the node to the child's page.

The pipeline run's id reaches a stage through DVC as ``$SEED_PIPELINE_FLOW_RUN_ID`` (``flows.common``; the warm
stage server's forks get the stage process's environment). Without it (a plain ``dvc repro``) a stage runs its
flow as before. A stage DVC skips runs no process: the pipeline process reads DVC's "Stage 'x' didn't change,
skipping" line as DVC prints it (``CachedStages``), so the marker lands where DVC decided, in DVC's order.
"""

from __future__ import annotations

import contextvars
import logging
import os
import queue
import re
import threading
from typing import Any, Callable, TypeVar
from uuid import UUID

from prefect import Task
from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import State
from prefect.flow_engine import run_flow
from prefect.states import Completed, Running

from flows.common import PIPELINE_FLOW_RUN_VAR, pipeline_tag
from seed_core.runtime import timing

R = TypeVar("R")
TASK_KEY_PREFIX = "seed.stage."
"""Task key of the task run that stands for a DVC stage in the pipeline run (``seed.stage.rl@seed``)."""
CACHED = "Cached"
"""State name of a skipped stage's task run: Prefect's name for a cache hit (a ``Completed`` type)."""
SKIPPED = re.compile(rb"Stage '([^']+)' (?:didn't change, skipping|is cached - skipping run)")
"""DVC's log line for a stage it does not run (dvc/stage/__init__.py:432, dvc/stage/cache.py:226)."""


def _stage() -> None:
    """The function of a stage's stand-in task (never called: the task run only holds the place in the graph)."""


def stage_task(stage: str) -> Any:
    """A Prefect task named after the DVC stage, with a key of its own (as ``run_deployment`` keys its task)."""
    task = Task(name=stage, fn=_stage)
    task.task_key = f"{TASK_KEY_PREFIX}{stage}"
    return task


def run_stage(flow: Callable[..., R], **parameters: Any) -> R:
    """Run a stage module's flow with ``parameters`` (its ``__main__``). Under ``seed run`` (``DVC_STAGE`` and
    ``$SEED_PIPELINE_FLOW_RUN_ID`` set) as a subflow run of the pipeline run: a task run named after the stage in
    the pipeline run, the stage's flow run (named after the stage, with the pipeline's tag) created with
    ``parent_task_run_id``, run by Prefect's engine; the task run then takes the flow run's final state, so the
    pipeline's task list agrees with its graph. Elsewhere: ``flow(**parameters)``, as before."""
    pipeline, stage = os.environ.get(PIPELINE_FLOW_RUN_VAR), os.environ.get("DVC_STAGE")
    if not (pipeline and stage):
        return flow(**parameters)

    with timing.span("prefect"), get_client(sync_client=True) as client:
        task_run = client.create_task_run(stage_task(stage), flow_run_id=UUID(pipeline), dynamic_key="0", name=stage,
                                          state=Running())
        child = client.create_flow_run(flow, name=stage, parameters=flow.serialize_parameters(parameters),
                                       parent_task_run_id=task_run.id, tags=[pipeline_tag(pipeline)])
    try:
        return run_flow(flow, flow_run=child, parameters=parameters)
    finally:
        mirror_state(task_run.id, child.id)


def mirror_state(task_run_id: UUID, flow_run_id: UUID) -> None:
    """Give the stand-in task run its flow run's final state (type, name, message), as the graph shows it. A
    failure here is a warning: it must not replace the stage's own outcome (an error, a Ctrl-C)."""
    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(flow_run_id).state
            if state is not None:
                client.set_task_run_state(task_run_id, State(type=state.type, name=state.name,
                                                             message=state.message), force=True)
    except Exception as err:  # noqa: BLE001
        logging.getLogger(__name__).warning("could not give the stage's task run its state in Prefect: %s", err)


def mark_cached(flow_run_id: str, stage: str, client: Any) -> None:
    """A task run named ``stage`` in the ``Cached`` state in flow run ``flow_run_id``: DVC skipped the stage."""
    client.create_task_run(stage_task(stage), flow_run_id=UUID(flow_run_id), dynamic_key="0", name=stage,
                           state=Completed(name=CACHED, message="DVC: unchanged, outputs reused"))


class CachedStages:
    """Watches DVC's output (``seen``, fed with its chunks as they pass) and marks each stage DVC skips in the
    pipeline flow run, from a thread of its own: the output is never held up by a call to the server, and the
    markers are made as DVC skips, over one client. The graph places a node at its creation time, and a marker
    takes ~0.1 s (measured on the 2-core test machine against the test server), so after a run of skipped stages
    the last markers can trail the start of the stage DVC runs next by a second or two. ``close`` waits for them."""

    def __init__(self, flow_run_id: str, mark: Callable[[str, str, Any], None] = mark_cached) -> None:
        self.flow_run_id, self.mark = flow_run_id, mark
        self.marked: list[str] = []
        self._tail = b""
        self._queue: queue.Queue[str | None] = queue.Queue()
        context = contextvars.copy_context()  # Prefect's settings (``temporary_settings``: the run's API URL)
        self._thread = threading.Thread(target=context.run, args=(self._work,), name="seed-cached-stages",
                                        daemon=True)
        self._thread.start()

    def seen(self, chunk: bytes) -> None:
        """Take a chunk of DVC's output; each whole line that names a skipped stage queues its marker."""
        *lines, self._tail = (self._tail + chunk).split(b"\n")
        self._tail = self._tail[-4096:]
        for line in lines:
            if found := SKIPPED.search(line):
                self._queue.put(found.group(1).decode(errors="replace"))

    def _work(self) -> None:
        stage = None
        try:
            with get_client(sync_client=True) as client:
                while (stage := self._queue.get()) is not None:
                    self.mark(self.flow_run_id, stage, client)
                    self.marked.append(stage)
        except Exception as err:  # noqa: BLE001 - the markers are worth a warning, never the run
            logging.getLogger(__name__).warning("could not mark stage %s as cached in Prefect: %s", stage, err)
            while self._queue.get() is not None:  # the rest go unmarked; close() still returns
                pass

    def close(self, timeout_s: float = 30.0) -> list[str]:
        """Mark a last line without a newline, wait for the markers; the stages marked, in DVC's order."""
        self.seen(b"\n")
        self._queue.put(None)
        self._thread.join(timeout=timeout_s)
        return self.marked
