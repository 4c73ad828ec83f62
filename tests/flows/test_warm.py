"""flows.warm: a stage process handed to the warm stage server runs in a fork with the stage process's argv,
working directory, environment and standard streams, and the stage process exits with the fork's code;
signals go on to the fork, a vanished stage process takes its fork with it, and without a server the stage
runs where it is."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from flows import warm
from seed_core.config import project_root

STAGE = """
import os, sys, time
print("argv", sys.argv[1:], "cwd", os.getcwd(), "X", os.environ.get("X"), flush=True)
print("to stderr", file=sys.stderr, flush=True)
print("warmed", "warmed" in sys.modules, flush=True)
import gc
print("gc", gc.isenabled(), gc.get_freeze_count() > 0, flush=True)
open(os.environ["PID_FILE"], "w").write(str(os.getpid()))
if sys.argv[1] == "sleep":
    time.sleep(60)
if sys.argv[1] == "fail":
    raise RuntimeError("the stage failed")
sys.exit(int(sys.argv[1]))
"""

CLIENT = "import sys; from flows.warm import run_in_server; sys.exit(run_in_server(sys.argv[1], sys.argv[3:], sys.argv[2]))"


def gone(pid: int) -> bool:
    return not psutil.pid_exists(pid)  # the server reaps its forks, so an ended fork leaves no zombie


WARMED = """import os, time
time.sleep(1.5)  # a slow import, as torch's is
open(os.environ["WARMED_FILE"], "w").close()
"""
BROKEN = "import time; time.sleep(1.5); raise ImportError('a warm-up import that fails')\n"


def start_server(tmp_path: Path, modules: tuple[str, ...] = ()) -> tuple[subprocess.Popen[bytes], str]:
    """A real stage server warming up ``modules``, whose one stage module is the test's ``probe_stage`` (its forks
    can import it); returns once its socket exists."""
    (tmp_path / "probe_stage.py").write_text(STAGE)
    (tmp_path / "warmed.py").write_text(WARMED)
    (tmp_path / "broken.py").write_text(BROKEN)
    path = str(tmp_path / "server.sock")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project_root()), str(tmp_path)]),
           "WARMED_FILE": str(tmp_path / "warmed-up")}
    code = f"from flows.warm import serve; serve({path!r}, modules={modules!r}, calls=(), stages=('probe_stage',))"
    proc = subprocess.Popen([sys.executable, "-c", code],
                            env=env, start_new_session=True)
    deadline = time.monotonic() + 30
    while not Path(path).exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the stage server did not start"
        time.sleep(0.05)
    return proc, path


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A real stage server without warm-up imports."""
    proc, path = start_server(tmp_path)
    time.sleep(0.2)  # bound, now listening
    yield path
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def fork_pid(tmp_path: Path) -> int:
    """The PID the test stage wrote once it started in its fork."""
    deadline = time.monotonic() + 30
    while not (tmp_path / "pid").is_file():
        assert time.monotonic() < deadline, "the stage never started"
        time.sleep(0.05)
    return int((tmp_path / "pid").read_text())


def client(server: str, tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(project_root()), "X": "from-the-client", "PID_FILE": str(tmp_path / "pid")}
    return subprocess.Popen([sys.executable, "-c", CLIENT, "probe_stage", server, *args], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_fork_runs_as_the_stage_process_and_its_exit_code_is_the_stage_processs(server: str,
                                                                                   tmp_path: Path) -> None:
    proc = client(server, tmp_path, "7", "hello")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 7
    assert f"argv ['7', 'hello'] cwd {tmp_path / 'work'} X from-the-client" in out  # its streams, dir, env
    assert "to stderr" in err
    assert int((tmp_path / "pid").read_text()) != proc.pid  # it ran elsewhere: in a fork of the server
    failing = client(server, tmp_path, "fail")
    out, err = failing.communicate(timeout=60)
    assert failing.returncode == 1 and "RuntimeError: the stage failed" in err  # a traceback, as python prints it
    assert client(server, tmp_path, "0").wait(timeout=60) == 0


def test_a_signal_to_the_stage_process_reaches_the_fork(server: str, tmp_path: Path) -> None:
    proc = client(server, tmp_path, "sleep")
    fork = fork_pid(tmp_path)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    deadline = time.monotonic() + 10
    while not gone(fork):
        assert time.monotonic() < deadline, "the fork outlived the signal"
        time.sleep(0.05)


def test_a_vanished_stage_process_takes_its_fork_with_it(server: str, tmp_path: Path) -> None:
    proc = client(server, tmp_path, "sleep")
    fork = fork_pid(tmp_path)
    proc.kill()  # SIGKILL: no chance to forward anything
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while not gone(fork):
        assert time.monotonic() < deadline, "the fork outlived its stage process"
        time.sleep(0.05)
    (tmp_path / "pid").unlink()
    assert client(server, tmp_path, "3").wait(timeout=60) == 3  # the server serves the next stage


def test_without_a_server_the_stage_runs_where_it_is(tmp_path: Path) -> None:
    assert warm.run_in_server("probe_stage", [], str(tmp_path / "nothing.sock")) is None
    assert warm.requested_module(["python", "-m", "flows.rl", "--algorithm", "seed"]) == \
        ("flows.rl", ["--algorithm", "seed"])
    assert warm.requested_module(["python", "-X", "importtime", "-m", "flows.report"]) == ("flows.report", [])
    assert warm.requested_module(["python", "-m", "flows.warm", "--serve", "x"]) is None  # not a stage
    assert warm.requested_module(["python", "-c", "import flows"]) is None


def test_a_stage_that_comes_during_the_warm_up_waits_for_it_and_runs_in_a_fork(tmp_path: Path) -> None:
    proc, path = start_server(tmp_path, modules=("warmed",))
    try:
        assert not (tmp_path / "warmed-up").exists()  # it listens before it imports
        stage = client(path, tmp_path, "5")
        out, _ = stage.communicate(timeout=60)
        assert stage.returncode == 5
        assert "warmed True" in out  # a fork of the warmed-up server, not a process that ran the stage itself
        assert "gc True True" in out  # collecting, but never over the server's frozen objects (no page copies)
        assert int((tmp_path / "pid").read_text()) != stage.pid
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def test_a_server_whose_warm_up_fails_sends_the_stage_back_to_run_where_it_is(tmp_path: Path) -> None:
    proc, path = start_server(tmp_path, modules=("broken",))
    try:
        assert warm.run_in_server("probe_stage", ["0"], path) is None  # connected, then hung up: run it yourself
        assert proc.wait(timeout=30) != 0  # the server ended on the ImportError
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)


def test_the_warm_up_fills_mlflows_requirements_map_that_every_registration_would_build() -> None:
    """``WARM_CALLS`` leaves MLflow's module-to-package map built (a fresh interpreter: nothing built it before),
    so a fork's first checkpoint registration skips building it; fails if MLflow stops caching it there."""
    probe = ("from mlflow.utils import requirements_utils as r; assert r._MODULES_TO_PACKAGES is None; "
             "from flows import warm; warm.warm_up((), warm.WARM_CALLS); "
             "print(len(r._MODULES_TO_PACKAGES) > 100, 'torch' in r._MODULES_TO_PACKAGES)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=project_root(), capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.split() == ["True", "True"]


def test_the_server_refuses_a_module_that_is_not_a_stage_and_runs_nothing(server: str, tmp_path: Path) -> None:
    """A same-user client that sends any other module to the socket gets one line back; nothing is imported."""
    marker = tmp_path / "ran"
    (tmp_path / "not_a_stage.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(project_root())}
    for module in ("not_a_stage", "os", "flows.warm"):
        done = subprocess.run([sys.executable, "-c", CLIENT, module, server], cwd=work, env=env, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == f"seed stage server: refused: {module!r} is not a stage module of dvc.yaml; " \
                                      "the stage server runs only probe_stage"
    assert not marker.exists()
    assert client(server, tmp_path, "4").wait(timeout=60) == 4  # and still serves the stage


def test_the_stage_modules_are_the_ones_dvc_yaml_runs() -> None:
    import re

    commands = re.findall(r"cmd: python -m (flows\.\w+)", (project_root() / "dvc.yaml").read_text())
    assert set(commands) == warm.STAGE_MODULES
