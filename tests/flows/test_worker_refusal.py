"""A ``seed worker`` runs seed's cells and nothing else (issue 43 item 1), against the session's real Prefect server
and real ``seed worker`` processes in a committed copy of a tiny project:

- a deployment in the worker's pool whose job variables set a shell ``command`` (after the pool's template was put
  back to Prefect's default, as anyone with API access can), and a flow run of it: the command never runs (its
  marker file stays absent) and the flow run ends Failed/``Refused`` with the reason;
- flow runs of the pool's own cell deployment with a ``command``, ``env`` or ``working_dir`` job variable, or with a
  cell whose config names another program: each refused the same way;
- without ``--allow-unauthenticated-api`` the worker refuses this unauthenticated API: one line, exit 2;
- one SIGTERM stops a worker in the middle of a real cell (held at its lock, so nothing is computed): the worker
  exits within seconds, the cell's process is gone and the flow run is Crashed, which the sweep's fan-out submits
  again (``flows.pool.try_failed``); the cell passed both checks (the worker's and ``flows.cell_guard``'s)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import psutil
import pytest
from filelock import FileLock

from flows.pool import deployment_name
from seed_core.loader import load_config
from seed_core.sweep.cells import cell_key
from tests.flows.test_dvc_repro import PROJECT_FILES, commit_project, copy_project

POOL, STOP_POOL = "guard-pool", "guard-stop"
SEED = [sys.executable, "-m", "seed_app.cli"]
WORKER_ENV = {"PREFECT_WORKER_HEARTBEAT_SECONDS": "2", "PREFECT_WORKER_QUERY_SECONDS": "1", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, tiny_params, prefect_server: str,
            mlflow_uri: str) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("guard_project") / "project"
    copy_project(root, PROJECT_FILES)
    tiny_params(root / "params.yaml", root / "no-model", "data", tracking={"experiment": "worker-guard-test"},
                sweep={"seeds": [0], "methods": ["vanilla"]})
    return root, {**commit_project(root, prefect_server, mlflow_uri), **WORKER_ENV}


def start_worker(root: Path, env: dict[str, str], pool: str, name: str) -> subprocess.Popen[bytes]:
    """A real ``seed worker`` of ``pool`` in ``root``; returns once its pool's cell deployment exists."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError

    log = open(root.parent / f"{name}.log", "wb")
    proc = subprocess.Popen([*SEED, "worker", "--pool", pool, "--name", name, "--threads", "1",
                             "--allow-unauthenticated-api"], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if any(w.name == name for w in client.read_workers_for_work_pool(pool)):
                    return proc
            except (ObjectNotFound, PrefectHTTPStatusError):  # the worker creates the pool first
                pass
            time.sleep(0.5)
    raise AssertionError(f"worker {name} did not start: {(root.parent / f'{name}.log').read_text()[-3000:]}")


@pytest.fixture(scope="module")
def worker(project) -> Iterator[subprocess.Popen[bytes]]:
    root, env = project
    proc = start_worker(root, env, POOL, "guard-w")
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def wait_final(flow_run_id: Any, timeout_s: float = 60.0) -> Any:
    from prefect.client.orchestration import get_client

    deadline = time.monotonic() + timeout_s
    with get_client(sync_client=True) as client:
        while time.monotonic() < deadline:
            run = client.read_flow_run(flow_run_id)
            if run.state is not None and run.state.is_final():
                return run
            time.sleep(0.5)
    raise AssertionError(f"flow run {flow_run_id} not final after {timeout_s} s: {run.state}")


def cell_parameters(root: Path, tmp_path: Path, mlflow_uri: str, **config: Any) -> dict[str, Any]:
    """The parameters ``seed sweep --pool`` gives seed 0's cell of ``root``'s params (``config``: dotted-key
    overrides), with its cells directory under ``tmp_path``."""
    cfg = load_config(root / "params.yaml", {"project.seed": 0, **config})
    (tmp_path / "base").mkdir(exist_ok=True)
    return {"config": cfg.model_dump(mode="json"), "seed": 0, "key": cell_key(cfg, ""),
            "cells_dir": str(tmp_path / "sweep_pool"), "base_model": str(tmp_path / "base"), "base_model_md5": "",
            "parent_host": socket.gethostname(), "tracking_uri": mlflow_uri, "parent_run_id": None}


def assert_refused(run: Any, *named: str) -> None:
    assert run.state.type.value == "FAILED" and run.state.name == "Refused", run.state
    for part in (*named, "refused by seed worker", "nothing was run"):
        assert part in (run.state.message or ""), run.state.message


def test_a_command_override_in_the_workers_pool_runs_nothing_and_is_refused(worker, tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolUpdate
    from prefect.workers.process import ProcessWorker

    mark = tmp_path / "MARK"
    with get_client(sync_client=True) as client:  # an attacker puts `command` back into the pool's variables first
        client.update_work_pool(POOL, WorkPoolUpdate(base_job_template=ProcessWorker.get_default_base_job_template()))
        flow_id = client.create_flow_from_name("not-a-cell")
        deployment = client.create_deployment(flow_id=flow_id, name="shell", work_pool_name=POOL, entrypoint="x.py:f",
                                              job_variables={"command": f"/bin/sh -c 'id > {mark}'"})
        flow_run = client.create_flow_run_from_deployment(deployment)
    run = wait_final(flow_run.id)
    time.sleep(3)  # a process started anyway would have written by now
    assert not mark.exists()
    assert_refused(run, f"its deployment not-a-cell/shell is not {deployment_name(POOL)}")
    assert worker.poll() is None


@pytest.mark.parametrize("job_variables", [{"command": "/bin/sh -c 'id > {mark}'"}, {"env": {"PYTHONPATH": "{mark}"}},
                                           {"working_dir": "{mark}"}], ids=["command", "env", "working_dir"])
def test_a_flow_run_of_the_cell_deployment_with_job_variables_is_refused(
        worker, project, tmp_path: Path, mlflow_uri: str, job_variables: dict[str, Any]) -> None:
    from prefect.client.orchestration import get_client

    root, _ = project
    mark = tmp_path / "MARK"
    job_variables = {k: ({n: x.format(mark=mark) for n, x in v.items()} if isinstance(v, dict) else
                         v.format(mark=mark)) for k, v in job_variables.items()}
    with get_client(sync_client=True) as client:
        ours = client.read_deployment_by_name(deployment_name(POOL))
        flow_run = client.create_flow_run_from_deployment(
            ours.id, parameters=cell_parameters(root, tmp_path, mlflow_uri), job_variables=job_variables)
    run = wait_final(flow_run.id)
    assert_refused(run, f"the flow run sets job variables {sorted(job_variables)}")
    assert not mark.exists() and not (tmp_path / "sweep_pool").exists()


def test_a_cell_whose_config_names_another_program_is_refused(worker, project, tmp_path: Path,
                                                              mlflow_uri: str) -> None:
    from prefect.client.orchestration import get_client

    root, _ = project
    parameters = cell_parameters(root, tmp_path, mlflow_uri, **{"generation.vllm.python": "/bin/sh"})
    with get_client(sync_client=True) as client:
        flow_run = client.create_flow_run_from_deployment(
            client.read_deployment_by_name(deployment_name(POOL)).id, parameters=parameters)
    assert_refused(wait_final(flow_run.id), "generation.vllm.python='/bin/sh'", "unlike params.yaml")
    assert not (tmp_path / "sweep_pool").exists()


def test_an_edited_cell_deployment_is_refused(worker, project, tmp_path: Path, mlflow_uri: str) -> None:
    """Its pull steps replaced by a shell script through the API: the flow run is refused and the script never
    runs; registering the deployment again (every ``seed worker`` start does) puts ours back."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import DeploymentUpdate

    from flows.sweep_pool import ensure_deployment

    root, _ = project
    mark = tmp_path / "MARK"
    script = [{"prefect.deployments.steps.run_shell_script": {"script": f"touch {mark}"}}]
    try:
        with get_client(sync_client=True) as client:
            ours = client.read_deployment_by_name(deployment_name(POOL))
            client.update_deployment(ours.id, DeploymentUpdate(pull_steps=script))
            flow_run = client.create_flow_run_from_deployment(
                ours.id, parameters=cell_parameters(root, tmp_path, mlflow_uri))
        run = wait_final(flow_run.id)
        time.sleep(3)
    finally:
        ensure_deployment(POOL)
    assert_refused(run, "its pull steps")
    assert not mark.exists() and not (tmp_path / "sweep_pool").exists()


def test_the_cell_process_checks_again_the_parameters_it_runs_with(project, tmp_path: Path) -> None:
    """``python -m flows.cell_guard`` (what a worker starts) reads the flow run itself: parameters changed after the
    worker's check (the API lets anyone update them) are refused there, and the cell flow never starts."""
    from prefect.client.orchestration import get_client

    from flows.pool import ROOT_VAR
    from flows.sweep_pool import ensure_deployment

    root, env = project
    ensure_deployment(STOP_POOL)
    before = sorted((root / ".tmp").rglob("*")) if (root / ".tmp").exists() else []  # other tests' cells (any order)
    parameters = {**cell_parameters(root, tmp_path, "sqlite:///x.db"), "key": "../../outside"}
    with get_client(sync_client=True) as client:
        flow_run = client.create_flow_run_from_deployment(
            client.read_deployment_by_name(deployment_name(STOP_POOL)).id, parameters=parameters)
        done = subprocess.run([sys.executable, "-m", "flows.cell_guard"], cwd=tmp_path, capture_output=True, text=True,
                              env={**env, "PREFECT__FLOW_RUN_ID": str(flow_run.id), ROOT_VAR: str(root),
                                   "PYTHONPATH": str(root)}, timeout=120)
        run = client.read_flow_run(flow_run.id)
    assert done.returncode == 0, done.stderr[-3000:]
    assert_refused(run, "its key '../../outside' is not its config's")
    after = sorted((root / ".tmp").rglob("*")) if (root / ".tmp").exists() else []
    assert not (tmp_path / "sweep_pool").exists() and after == before, "the refused cell wrote nothing"


def test_a_worker_refuses_an_unauthenticated_api_without_the_flag(project) -> None:
    root, env = project
    done = subprocess.run([*SEED, "worker", "--pool", POOL], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "has no authentication" in lines[0] and "--allow-unauthenticated-api" in lines[0], \
        done.stderr
    assert "seed ui --auth" in lines[0] and not done.stdout


def test_one_sigterm_stops_a_worker_mid_cell_and_its_cell_is_left_to_run_again(project, tmp_path: Path,
                                                                               mlflow_uri: str) -> None:
    from prefect.client.orchestration import get_client

    root, env = project
    proc = start_worker(root, env, STOP_POOL, "guard-stop-w")
    parameters = cell_parameters(root, tmp_path, mlflow_uri)
    (tmp_path / "sweep_pool").mkdir()
    try:
        with FileLock(tmp_path / "sweep_pool" / ".seed_0.lock"), get_client(sync_client=True) as client:
            flow_run = client.create_flow_run_from_deployment(
                client.read_deployment_by_name(deployment_name(STOP_POOL)).id, parameters=parameters)
            deadline = time.monotonic() + 120
            while (run := client.read_flow_run(flow_run.id)).state_type.value != "RUNNING" or \
                    not run.infrastructure_pid:
                assert time.monotonic() < deadline and not run.state.is_final(), run.state
                time.sleep(0.5)
            cell_pid = int(run.infrastructure_pid)
            time.sleep(3)  # the cell waits for its lock, which this test holds
            assert psutil.pid_exists(cell_pid)
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
            stopped_s = time.monotonic() - started
        run = wait_final(flow_run.id, timeout_s=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert stopped_s < 15, stopped_s
    assert run.state.type.value == "CRASHED" and "was stopped while running this cell" in run.state.message, run.state
    deadline = time.monotonic() + 10
    while psutil.pid_exists(cell_pid) and psutil.Process(cell_pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"cell process {cell_pid} outlived its worker"
        time.sleep(0.2)
    assert not (tmp_path / "sweep_pool" / "cells.log").exists()  # held at its lock: nothing was computed
    assert "stopped (SIGTERM)" in (root.parent / "guard-stop-w.log").read_text()
