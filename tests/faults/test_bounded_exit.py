"""A test process whose Prefect client queued events for a server that a test then stopped ends promptly with the
session's status (tests/conftest.py ``pytest_unconfigure``). Without the bound, Prefect retries each event at exit
(~7 s each, measured: 20 events 145 s), and CI's run of stop 45 passed its 90 minutes after `seed ui --stop` had
run mid-module. A real Prefect server, started, sent one event, killed, then sent 40 more."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from seed_core.config import project_root

INNER = '''
import os, signal, subprocess, sys, time
import httpx


def test_events_for_a_server_that_is_gone(tmp_path):
    from prefect.events import emit_event
    from prefect.settings import PREFECT_API_URL, temporary_settings

    port = int(os.environ["INNER_PORT"])
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port",
                               str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    try:
        for _ in range(240):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        with temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{port}/api"}):
            emit_event(event="seed.test", resource={"prefect.resource.id": "seed.test.first"})
            time.sleep(3)  # connected and sent
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
            for i in range(40):
                emit_event(event="seed.test", resource={"prefect.resource.id": f"seed.test.{i}"})
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
'''


def test_queued_events_for_a_stopped_server_do_not_hold_the_exit(tmp_path: Path) -> None:
    from seed_core.rollout.vllm_engine import free_port

    (tmp_path / "test_inner.py").write_text(INNER)
    env = {**os.environ, "PYTHONPATH": str(project_root()), "SEED_TEST_PREFECT_DRAIN_S": "5",
           "INNER_PORT": str(free_port())}
    start = time.monotonic()
    inner = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:randomly",
                            "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - start
    assert inner.returncode == 0, inner.stdout[-2000:] + inner.stderr[-2000:]
    assert "1 passed" in inner.stdout
    assert "still sending to a stopped server" in inner.stderr, inner.stderr[-2000:]
    assert seconds < 120, f"the test process took {seconds:.0f} s to end"  # unbounded: 40 x ~7 s after the test
