"""Processes that open a new sqlite MLflow store at once all get a working store (``tracking._client``'s lock).

Without the lock, MLflow's unlocked first-open migrations race: of 3 processes, 2-3 failed (MLflow 3.17.2 and
3.18.0), and the ``_alembic_tmp_*`` tables the losers left made every later open fail (stop 46's CI)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from seed_core.config import project_root

OPENER = """
import os, sys, time
from pathlib import Path
import mlflow
from seed_core import tracking
go = Path(sys.argv[2])
(go.parent / f"ready-{os.getpid()}").touch()
while not go.exists():  # every process has imported mlflow before any opens the store
    time.sleep(0.01)
tracking.store_client(sys.argv[1])
"""


def test_processes_opening_a_new_sqlite_store_at_once_all_succeed(tmp_path: Path) -> None:
    import mlflow

    uri, go = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", OPENER, uri, str(go)], cwd=project_root(), text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for _ in range(4)]
    deadline = time.monotonic() + 240
    while len(list(tmp_path.glob("ready-*"))) < len(procs) and time.monotonic() < deadline:
        time.sleep(0.05)  # all four have imported mlflow and seed_core: they open the store together
    go.touch()
    results = [(p.wait(timeout=240), p.stdout.read() if p.stdout else "") for p in procs]
    failed = [out[-600:] for rc, out in results if rc != 0]
    assert not failed, f"{len(failed)} of 4 processes failed to open the new store:\n" + "\n---\n".join(failed)
    assert [e.name for e in mlflow.MlflowClient(uri).search_experiments()] == ["Default"]
