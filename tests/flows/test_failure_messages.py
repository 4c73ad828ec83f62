"""Through the flows too, a failure users meet ends in one line naming the cause and the fix (issue 26, item 8):
``python -m flows.<stage>`` with a read-only data directory prints no traceback (not Prefect's task and flow
run logs either) and ends with ``seed <stage>: <message>``; a stage run in a fork of the warm stage server does
the same."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from tests.faults.test_messages import read_only
from tests.flows.conftest import write_tiny_params
from tests.flows.test_warm import CLIENT, start_server

ROOT = Path(__file__).resolve().parents[2]


def test_a_flow_says_a_read_only_data_directory_in_one_line(tiny_model_dir: Path, tmp_path: Path,
                                                            prefect_server: str, mlflow_uri: str) -> None:
    data = tmp_path / "data"
    shutil.copytree(tiny_model_dir, data / "models" / "base")  # the collect stage's input, readable
    params = write_tiny_params(tmp_path / "params.yaml", tiny_model_dir, str(data))
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "MLFLOW_TRACKING_URI": mlflow_uri}
    with read_only(data):
        done = subprocess.run([sys.executable, "-m", "flows.collect", "--params", str(params)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-4000:]
    assert "Traceback" not in output, output[-4000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"seed collect: cannot write {data / 'collect'}/") and f": {data} is " in last, last
    assert last.endswith("or set project.data_dir ($MODELS_ROOT for a model directory) to a writable directory")
    assert "Task run failed with exception: OutputNotWritableError('cannot write" in output  # the log line stays


PROBE = """
from seed_core.runtime.io import DiskFullError
from seed_core.loader import one_line_errors

one_line_errors("probe")
raise DiskFullError("no space left on /data while writing /data/x (free 0 MB); free space there")
"""


def test_a_known_error_in_a_warm_fork_is_one_line(tmp_path: Path) -> None:
    proc, path = start_server(tmp_path)
    (tmp_path / "probe_stage.py").write_text(PROBE)  # what the forks run from now on
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
        done = subprocess.run([sys.executable, "-c", CLIENT, "probe_stage", path], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert done.returncode == 1
    assert done.stderr.strip() == "seed probe: no space left on /data while writing /data/x (free 0 MB); free " \
                                  "space there"
