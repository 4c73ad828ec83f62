"""The engine's log lines reach the Prefect UI (issue 16): a stage process (``import flows`` first, as
``python -m flows.<stage>`` does) logs through ``seed_core`` loggers, and the flow run's logs on the Prefect
server hold those lines, the whole-stage progress with its ETA included."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAGE = textwrap.dedent("""
    import flows  # noqa: F401  (first, as in every stage process)
    import logging

    from prefect import flow

    from seed_core.runtime.logs import Progress

    @flow(name="engine-logs-probe")
    def probe() -> str:
        from prefect.runtime import flow_run

        with Progress(logging.getLogger("seed_core.stages.probe"), "probe", 2, "episode", every_s=0.0,
                      bar=False) as bar:
            bar.update(1)
            bar.update(1)
        logging.getLogger("seed_core.stages.probe").debug("below the default level")
        return flow_run.id

    print("FLOW_RUN", probe())
""")


def test_engine_log_lines_are_in_the_flow_runs_logs(prefect_server: str) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    env = {**os.environ, "PREFECT_API_URL": prefect_server, "PYTHONPATH": str(ROOT)}
    env.pop("PREFECT_LOGGING_EXTRA_LOGGERS", None)
    env.pop("SEED_LOG_LEVEL", None)
    done = subprocess.run([sys.executable, "-c", STAGE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    flow_run_id = done.stdout.split("FLOW_RUN", 1)[1].split()[0]
    messages: list[tuple[str, int, str]] = []
    with get_client(sync_client=True) as client:
        for _ in range(30):  # the API log handler ships batches in the background
            logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
            messages = [(log.name, log.level, log.message) for log in logs]
            if any("episode 2/2" in m for _, _, m in messages):
                break
            time.sleep(1)
    engine = [(name, level, message) for name, level, message in messages if name.startswith("seed_core")]
    assert ("seed_core.stages.probe", 20, "probe: episode 1/2 done, 0m00s elapsed, ETA 0m00s") in engine, messages
    assert ("seed_core.stages.probe", 20, "probe: episode 2/2 done, 0m00s elapsed") in engine
    assert not any("below the default level" in m for _, _, m in engine)
