"""``seed sweep --pool`` on this machine: a Prefect server (the session's), two ``seed worker``s, each in its own git
clone of a tiny project with one torch thread, a 2-seed sweep through their pool, and one worker killed (SIGKILL to
its process group) in the middle of its cell. The sweep still finishes, with the numbers of the sequential DVC
sweep of the same seeds; no cell runs twice to completion (``cells.log``), and a second pooled sweep reuses both
cells (same seed and config key) without computing anything."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from seed_core.sweep.cells import read_events
from tests.flows.test_dvc_repro import PROJECT_FILES, _run, commit_project, copy_project

METHODS = ["vanilla", "grpo"]
POOL = "test-pool"
SEED = [sys.executable, "-m", "seed_app.cli"]


@pytest.fixture(scope="module")
def pool_project(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path, tiny_params, prefect_server: str,
                 mlflow_uri: str) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("pool_project") / "sweep"
    copy_project(root, (*PROJECT_FILES, "sweep/dvc.yaml"))
    tiny_params(root / "params.yaml", tiny_model_dir, "data", tracking={"experiment": "sweep-pool-test"},
                sweep={"seeds": [0, 1], "methods": METHODS})
    env = commit_project(root, prefect_server, mlflow_uri)
    return root, {**env, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # as each worker's cells: one thread


@pytest.fixture(scope="module")
def sequential(pool_project) -> dict[str, Any]:
    """learning.json of the plain DVC sweep (``seed sweep`` without --pool) of the same seeds."""
    root, env = pool_project
    _run([*SEED, "sweep", "--seeds", "2"], root, env)
    return json.loads((root / "reports" / "sweep" / "learning.json").read_text())


@pytest.fixture(scope="module")
def workers(pool_project, sequential) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Two workers of the pool, each in its own clone of the project (sharing the venv), one torch thread each."""
    root, env = pool_project
    worker_env = {**env, "PREFECT_WORKER_HEARTBEAT_SECONDS": "2", "PREFECT_WORKER_QUERY_SECONDS": "1"}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for name in ("w-a", "w-b"):
        clone = root.parent / name
        subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True, env=env)
        with open(root.parent / f"{name}.log", "wb") as log:
            procs[name] = subprocess.Popen([*SEED, "worker", "--pool", POOL, "--threads", "1", "--name", name,
                                            "--allow-unauthenticated-api"],  # the session's test server
                                           cwd=clone, env=worker_env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True)
    yield procs
    for proc in procs.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _kill_mid_cell(cells: Path, workers: dict[str, subprocess.Popen[bytes]], sweep: subprocess.Popen[str],
                   deadline_s: float = 240.0) -> tuple[str, int]:
    """Wait until a worker has started a cell and got into its pipeline (its collect stage wrote metrics), then
    SIGKILL that worker's process group; returns (worker, seed)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and sweep.poll() is None:
        for event in (e for e in read_events(cells) if e["event"] == "started"):
            tmp = cells / f".seed_{event['seed']}.tmp-{event['pid']}"
            if (tmp / "collect" / "metrics.json").is_file():
                os.killpg(workers[event["worker"]].pid, signal.SIGKILL)
                return event["worker"], event["seed"]
        time.sleep(0.2)
    raise AssertionError(f"no cell got under way: {sweep.communicate()}")


@pytest.fixture(scope="module")
def pooled(pool_project, workers) -> dict[str, Any]:
    root, env = pool_project
    sweep = subprocess.Popen([*SEED, "sweep", "--seeds", "2", "--pool", POOL], cwd=root, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    killed = _kill_mid_cell(root / "data" / "sweep_pool", workers, sweep)
    out, _ = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, out[-5000:]
    return {"killed": killed, "out": out, "learning": json.loads((root / "reports" / "sweep" / "learning.json")
                                                                  .read_text())}


NUMBERS = ("method_order", "methods", "comparisons", "curves", "mechanism", "stage1")
"""learning.json's results (``cell_wall_s`` is the cells' wall time: not a result)."""


def test_the_pool_sweep_survives_a_killed_worker_with_the_sequential_numbers(pool_project, sequential,
                                                                             pooled) -> None:
    root, _ = pool_project
    killed_worker, killed_seed = pooled["killed"]
    assert f"cell seed {killed_seed}, try 0: worker '{killed_worker}' lost" in pooled["out"]
    for key in NUMBERS:
        assert pooled["learning"][key] == sequential[key], key
    assert pooled["learning"]["setting"]["seeds"] == [0, 1]
    events = read_events(root / "data" / "sweep_pool")
    completed = [e["seed"] for e in events if e["event"] == "completed"]
    assert sorted(completed) == [0, 1], events  # each cell ran to completion exactly once
    tries = [e["worker"] for e in events if e["event"] == "started" and e["seed"] == killed_seed]
    assert tries[0] == killed_worker and tries[-1] != killed_worker  # retried on the other worker
    finisher = [e["worker"] for e in events if e["event"] == "completed" and e["seed"] == killed_seed]
    assert finisher == [tries[-1]]  # the killed worker's cell process ended with it (flows.sweep_pool.watch_worker)
    assert {e["torch_threads"] for e in events if e["event"] == "started"} == {1}
    assert not list((root / "data" / "sweep_pool").glob(".seed_*.tmp-*"))  # the killed try's files are gone


def test_each_pooled_cell_is_an_mlflow_child_of_the_sweep_run(pooled, mlflow_uri: str) -> None:
    import mlflow

    client = mlflow.MlflowClient(mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("sweep-pool-test").experiment_id], max_results=500)
    # the first pooled sweep is the fixture's: test_a_second_pooled_sweep_... (which pytest-randomly may run first)
    # adds a later one whose cells are all reused, so it has no seed runs (CI order 2026-12-03 picked that one)
    parent = min((r for r in runs if r.info.run_name == "sweep" and r.data.tags.get("sweep.pool") == POOL),
                 key=lambda r: r.info.start_time)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    finished = sorted(r.info.run_name for r in children if r.info.status == "FINISHED")
    assert finished == ["sweep-report", "sweep-seed-0", "sweep-seed-1"]
    assert "grpo/mean" in parent.data.metrics


def test_a_second_pooled_sweep_reuses_every_finished_cell(pool_project, pooled) -> None:
    root, env = pool_project
    before = read_events(root / "data" / "sweep_pool")
    done = _run([*SEED, "sweep", "--seeds", "2", "--pool", POOL], root, env)
    out = done.stdout + done.stderr  # the flow's lines are Prefect log lines (stderr)
    assert "cell seed 0 is finished under this config" in out and "cell seed 1 is finished" in out
    assert read_events(root / "data" / "sweep_pool") == before  # nothing submitted, nothing started
