"""``seed sweep`` end to end under DVC on a tiny copy of the project: two seeds x one RL round, each cell its
own MLflow child run, statistics in learning.json, and a rerun after a lost cell recomputes only that cell."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.flows.test_dvc_repro import PROJECT_FILES, _run, clone_workspace, commit_project, copy_project

METHODS = ["vanilla", "sft", "grpo", "seed"]


@pytest.fixture(scope="module")
def sweep_project(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path, tiny_params, prefect_server: str,
                  mlflow_uri: str) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("sweep_project")
    copy_project(root, (*PROJECT_FILES, "sweep/dvc.yaml"))
    tiny_params(root / "params.yaml", tiny_model_dir, "data", tracking={"experiment": "sweep-test"},
                sweep={"seeds": [0, 1], "methods": METHODS}, eval={"num_tasks": 2})
    return root, commit_project(root, prefect_server, mlflow_uri)


@pytest.fixture(scope="module")
def first_sweep(sweep_project) -> subprocess.CompletedProcess[str]:
    root, env = sweep_project
    return _run([sys.executable, "-m", "seed_app.cli", "sweep", "--seeds", "2"], root, env)


def test_sweep_writes_statistics_over_seeds(sweep_project, first_sweep) -> None:
    root, _ = sweep_project
    assert "| Method | Success (mean ± CI, n seeds)" in first_sweep.stdout
    learning = json.loads((root / "reports" / "sweep" / "learning.json").read_text())
    assert learning["setting"]["seeds"] == [0, 1]
    assert learning["method_order"] == METHODS and set(learning["methods"]) == set(METHODS)
    for method in METHODS:
        stats = learning["methods"][method]
        assert stats["n"] == 2 and len(stats["per_seed"]) == 2
        assert stats["ci95"][0] <= stats["mean"] <= stats["ci95"][1]
    assert {"grpo-sft", "seed-grpo", "seed-sft"} <= set(learning["comparisons"])
    assert 0.0 <= learning["comparisons"]["seed-grpo"]["prob_improvement"] <= 1.0
    assert set(learning["curves"]) == {"grpo", "seed"}
    assert (root / "reports" / "sweep" / "curve_success.png").is_file()
    for seed in (0, 1):  # each seed is its own pipeline: its own held-out tasks
        cell = json.loads((root / "data" / "sweep" / f"seed_{seed}" / "results.json").read_text())
        assert cell["seed"] == seed and set(cell["success"]) == set(METHODS)
    tasks = [json.loads((root / "data" / "sweep" / f"seed_{s}" / "collect" / "tasks.json").read_text())
             for s in (0, 1)]
    assert {t["task_id"] for t in tasks[0]} != {t["task_id"] for t in tasks[1]}


def test_each_seed_is_an_mlflow_child_of_the_sweep_run(first_sweep, mlflow_uri: str) -> None:
    import mlflow

    client = mlflow.MlflowClient(mlflow_uri)
    runs = client.search_runs([client.get_experiment_by_name("sweep-test").experiment_id], max_results=500,
                              order_by=["attributes.start_time ASC"])
    parent = next(r for r in runs if r.info.run_name == "sweep")  # the first sweep's (the other tests rerun it)
    children = {r.info.run_name: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    assert {"sweep-seed-0", "sweep-seed-1", "sweep-report"} <= set(children)
    assert "grpo/mean" in parent.data.metrics and "seed-grpo/mean_diff" in parent.data.metrics


@pytest.fixture
def swept(sweep_project, first_sweep, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """This test's own copy of the swept project, for a test that deletes part of it (any order, issue 43)."""
    root = tmp_path / "project"
    return root, clone_workspace(sweep_project[0], root, sweep_project[1])


def test_a_lost_cell_is_the_only_one_brought_back(swept) -> None:
    root, env = swept
    # as if cell 1 had been killed: its outputs are gone and DVC's run-cache has nothing for it
    shutil.rmtree(root / "data" / "sweep" / "seed_1")
    shutil.rmtree(root / ".dvc" / "cache" / "runs", ignore_errors=True)
    out = _run([sys.executable, "-m", "seed_app.cli", "sweep", "--seeds", "2"], root, env).stdout
    assert "cell@1" in out  # recomputed, or restored from DVC's cache of its last finished outputs
    assert "Running stage 'sweep/dvc.yaml:cell@0'" not in out and "'sweep/dvc.yaml:cell@0' didn't change" in out
    assert (root / "data" / "sweep" / "seed_1" / "results.json").is_file()


def test_committed_cells_are_reused_on_another_clone(swept) -> None:
    """Each finished cell also wrote sweep/cells/seed_<s>-<key>.json (for git); a clone with those files but no
    data/sweep and no DVC cache (another machine, the same base model) reuses both cells instead of recomputing
    them, and the report has the same numbers."""
    root, env = swept
    committed = sorted((root / "sweep" / "cells").glob("seed_*-*.json"))
    assert [p.name.split("-")[0] for p in committed] == ["seed_0", "seed_1"]
    assert all(json.loads(p.read_text())["config_hash"] == p.stem.split("-")[1] for p in committed)
    before = json.loads((root / "reports" / "sweep" / "learning.json").read_text())
    shutil.rmtree(root / "data" / "sweep")
    shutil.rmtree(root / ".dvc" / "cache", ignore_errors=True)
    out = _run([sys.executable, "-m", "seed_app.cli", "sweep", "--seeds", "2"], root, env)
    text = out.stdout + out.stderr
    assert text.count("reusing sweep/cells/seed_") == 2, text[-3000:]
    after = json.loads((root / "reports" / "sweep" / "learning.json").read_text())
    assert after["methods"] == before["methods"] and after["comparisons"] == before["comparisons"]
