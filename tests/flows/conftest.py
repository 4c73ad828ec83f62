"""Fixtures for the flow tests: one Prefect test server per session (stack-notes §2.2), a temporary
MLflow store, and a tiny params file that runs every stage in seconds on the tiny test model."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TINY: dict[str, Any] = {
    "project": {"preset": "tiny-test"},
    "model": {"device": "cpu"},
    "env": {"name": "sokoban", "max_steps": 2, "history_length": 1},
    "generation": {"max_new_tokens": 8, "batch_size": 8, "max_prompt_tokens": 256},
    "collect": {"num_tasks": 1, "group_size": 2},
    "sft": {"epochs": 1, "batch_size": 2},
    "rl": {"rounds": 1, "tasks_per_round": 1, "group_size": 2, "mini_batch_size": 8, "micro_batch_size": 4,
           "analyzer_max_new_tokens": 16},
    "eval": {"num_tasks": 1},
}
"""The smallest settings that still run every stage: 1 task x group 2, 2 env steps, 8 new tokens,
prompts cut to 256 tokens."""


def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        out[key] = _merge(base[key], value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    return out


def write_tiny_params(path: Path, model_dir: Path, data_dir: str, **sections: dict[str, Any]) -> Path:
    """params.yaml of the repo + ``TINY`` + ``sections``, with the tiny model and everything written under
    ``data_dir``."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    games = str(Path(data_dir) / "alfworld_games")  # relative data_dir: the project's own data/alfworld_games
    params = _merge(_merge(params, TINY), {"model": {"path": str(model_dir)}, "project": {"data_dir": data_dir},
                                           "env": {"alfworld": {"generated_dir": games}}})
    path.write_text(yaml.safe_dump(_merge(params, sections), sort_keys=False))
    return path


@pytest.fixture(scope="session")
def tiny_params() -> Callable[..., Path]:
    """``tiny_params(path, model_dir, data_dir, **sections)`` writes a tiny params file (see ``write_tiny_params``)."""
    return write_tiny_params


@pytest.fixture(scope="session", autouse=True)
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A temporary Prefect API for the whole session (~10 s once); yields its URL for subprocesses."""
    os.environ["PREFECT_HOME"] = str(tmp_path_factory.mktemp("prefect_home"))
    os.environ.pop("PREFECT_API_URL", None)
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield str(PREFECT_API_URL.value())


@pytest.fixture(scope="session")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One sqlite MLflow store for the session (``MLFLOW_TRACKING_URI``; creating one costs seconds);
    each test module logs to its own experiment (``tracking.experiment``)."""
    from seed_core.tracking import store_client

    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    store_client(uri)  # made here, before any test or stage process opens it at the same time as another
    old = os.environ.get("MLFLOW_TRACKING_URI")
    os.environ["MLFLOW_TRACKING_URI"] = uri
    yield uri
    if old is None:
        os.environ.pop("MLFLOW_TRACKING_URI", None)
    else:
        os.environ["MLFLOW_TRACKING_URI"] = old


@pytest.fixture(scope="session")
def repro_project(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path, prefect_server: str,
                  mlflow_uri: str) -> tuple[Path, dict[str, str]]:
    """A git + DVC copy of the project with tiny params (MLflow experiment ``dvc-repro-test``), and the
    environment its stages run in; shared by the session (test_dvc_repro, the browser test)."""
    from tests.flows.test_dvc_repro import PROJECT_FILES, commit_project, copy_project

    root = tmp_path_factory.mktemp("project")
    copy_project(root, PROJECT_FILES)
    write_tiny_params(root / "params.yaml", tiny_model_dir, "data", tracking={"experiment": "dvc-repro-test"})
    return root, commit_project(root, prefect_server, mlflow_uri)


@pytest.fixture(scope="session")
def repro_run(repro_project: tuple[Path, dict[str, str]]) -> subprocess.CompletedProcess[str]:
    """The session's one real ``seed run`` of ``repro_project`` (every stage its own process, ~2 min)."""
    from tests.flows.test_dvc_repro import _run

    root, env = repro_project
    return _run([sys.executable, "-m", "seed_app.cli", "run"], root, env)


@pytest.fixture(scope="session")
def rerun(repro_project: tuple[Path, dict[str, str]], repro_run: subprocess.CompletedProcess[str]) -> Any:
    """A second ``seed run`` after a change only the report reads (``project.preset``, printed in the table), as
    a user reruns: DVC reruns the code stage (which rewrites the report's params file) and the report, reuses
    every other stage, and its pipeline flow run publishes the newest
    ``seed-results``, whatever other tests of the session published before. (A rerun with nothing stale
    records no run at all: `seed run` then only prints the table.) Shared by the browser test and
    test_stage_graph."""
    from tests.flows.test_dvc_repro import _run

    root, env = repro_project
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["project"]["preset"] = "tiny-test-rerun"
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    start = time.perf_counter()
    done = _run([sys.executable, "-m", "seed_app.cli", "run"], root, env)
    print(f"\nui: report-only seed run took {time.perf_counter() - start:.1f} s")
    ran = [line for line in done.stdout.splitlines() if line.startswith("Running stage")]
    assert ran == ["Running stage 'code':", "Running stage 'report':"], ran
    return done
