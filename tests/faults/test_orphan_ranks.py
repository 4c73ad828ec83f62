"""The ranks of ``accelerate launch`` end when the launcher is killed (``seed_core.runtime.parent_watch``).

torch elastic starts each rank in a session of its own, so the run's process-group reaper never reaches them; an
interrupted rehearsal (2026-12-04) left both ranks of ``rl@seed_static`` training on after the launcher was gone.
Here a real 2-process launch (``configs/accelerate/cpu_2proc.yaml``) builds the trainer's accelerator and waits; the
launcher gets SIGKILL (no chance to stop its ranks), and both ranks must be gone within seconds."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ACCELERATE = Path(sys.executable).with_name("accelerate")
RANK = """
import os, sys, time
from seed_core.config import ModelConfig
from seed_core.trainer.scale import make_accelerator
accelerator = make_accelerator(ModelConfig(path="unused", device="cpu"))
open(os.path.join(sys.argv[1], f"rank{accelerator.process_index}.pid"), "w").write(str(os.getpid()))
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(240)
def test_ranks_end_when_their_launcher_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    launcher = subprocess.Popen([str(ACCELERATE), "launch", "--config_file",
                                 str(ROOT / "configs" / "accelerate" / "cpu_2proc.yaml"), "--main_process_port",
                                 str(_free_port()), str(script), str(tmp_path)], cwd=ROOT, env=env,
                                start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and len(pids) < 2:
            pids = [int(p.read_text()) for p in tmp_path.glob("rank*.pid") if p.read_text()]
            assert launcher.poll() is None, "the launch ended before its ranks started"
            time.sleep(0.5)
        assert len(pids) == 2, "the two ranks did not start"
        assert all(os.getsid(pid) == pid for pid in pids), "torch elastic no longer gives each rank its own session"
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.2)
        assert not any(_alive(pid) for pid in pids), "a rank outlived its launcher"
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)


def test_the_watch_is_only_for_ranks_torch_elastic_started(monkeypatch: pytest.MonkeyPatch) -> None:
    from seed_core.runtime import parent_watch

    monkeypatch.delenv(parent_watch.ELASTIC_ENV, raising=False)
    monkeypatch.setattr(parent_watch, "_watching", [])
    assert parent_watch.watch_launcher() is None
