"""A sweep cell between machines (``flows.cell_data``): pushed from a worker's clone to the DVC remote and pulled
into the sweep's clone by its md5 alone; and what a worker on another machine refuses (``flows.sweep_pool``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.cell_data import fetch, publish

GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


@pytest.fixture
def clones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two git clones of one DVC project whose default remote is a folder (a worker's and the sweep's)."""
    for key, value in {**GIT, "DVC_NO_ANALYTICS": "1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    worker, sweep = tmp_path / "worker", tmp_path / "sweep"
    worker.mkdir()
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"],
                ["dvc", "remote", "add", "-q", "-d", "shared", str(tmp_path / "remote")]):
        subprocess.run(cmd, cwd=worker, check=True)
    (worker / ".gitignore").write_text("/data/sweep_pool/seed_*/\n")
    subprocess.run(["git", "add", "-A"], cwd=worker, check=True)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=worker, check=True)
    subprocess.run(["git", "clone", "-q", str(worker), str(sweep)], check=True)
    return worker, sweep


def test_a_cell_goes_through_the_dvc_remote_by_its_md5(clones: tuple[Path, Path]) -> None:
    worker, sweep = clones
    cell = worker / "data" / "sweep_pool" / "seed_3"
    (cell / "eval").mkdir(parents=True)
    (cell / "results.json").write_text(json.dumps({"seed": 3, "config_hash": "k"}))
    (cell / "eval" / "episodes.txt").write_text("ok")
    md5 = publish(cell, worker)
    assert md5.endswith(".dir")
    got = fetch(md5, sweep / "data" / "sweep_pool" / "seed_3", sweep)
    assert json.loads((got / "results.json").read_text()) == {"seed": 3, "config_hash": "k"}
    assert (got / "eval" / "episodes.txt").read_text() == "ok"


def test_a_worker_elsewhere_without_a_remote_names_the_fix(clones: tuple[Path, Path]) -> None:
    worker, _ = clones
    subprocess.run(["dvc", "remote", "default", "--unset"], cwd=worker, check=True)
    (worker / "cell").mkdir()
    with pytest.raises(RuntimeError, match=r"no default DVC remote .* `dvc remote add -d NAME URL`"):
        publish(worker / "cell", worker)


def test_a_worker_elsewhere_cannot_log_to_the_sweeps_sqlite_file() -> None:
    from flows.sweep_pool import cell_inputs

    with pytest.raises(RuntimeError, match=r"cannot reach: start a shared MLflow server \(`seed ui --host"):
        cell_inputs("another-host", "/x/cells", "/x/base", "", "sqlite:////x/mlflow.db")
