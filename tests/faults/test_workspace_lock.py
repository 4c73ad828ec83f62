"""Concurrent seed commands in one workspace (issue 26, items 2 and 3), with real ``seed`` processes in a tiny copy
of the project: a ``seed run --preset X`` (or a plain run, a sweep, a stage) beside a running seed command exits 2
within 2 s with one line naming the holder, and ``params.yaml`` stays byte-identical meanwhile; a SIGKILLed
holder frees the workspace (the ``dvc`` it started holds it until that ends too); and a pipeline run's server PID
files are its own: never ``seed ui``'s or another run's, and a run stops exactly the servers it started."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from seed_app import workspace
from tests.flows.conftest import write_tiny_params
from tests.flows.test_dvc_repro import copy_project
from tests.flows.test_services import HEALTH_SERVER, free_port  # a stand-in server that answers /health

ROOT = Path(__file__).resolve().parents[2]
TINY_DVC = """stages:
  slow:
    cmd: python slow.py
  quick:
    cmd: python quick.py
    outs: [quick.txt]
"""
"""A stage that runs until it is killed (it writes ``started`` first) and one that ends at once."""
SLOW = "import time\nopen('started', 'w').close()\ntime.sleep(300)\n"
QUICK = "open('quick.txt', 'w').write('ok')\n"
HOLD = ("import sys, time\nfrom seed_app import workspace\nwith workspace.hold(command=sys.argv[1]):\n"
        "    print('held', flush=True)\n    time.sleep(300)\n")
"""A helper holder: takes the workspace of the project it is run in (cwd), says so and sleeps."""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The project's packages with tiny params, a preset that differs from them, and TINY_DVC; DVC without git."""
    root = tmp_path_factory.mktemp("workspace").resolve()
    copy_project(root, ("seed_core", "tasks", "flows", "seed_app", ".dvcignore", ".gitignore", "pyproject.toml"))
    write_tiny_params(root / "params.yaml", root / "models" / "tiny", "data")
    (root / "presets").mkdir()
    write_tiny_params(root / "presets" / "x.yaml", root / "models" / "tiny", "data", eval={"num_tasks": 3})
    for name, text in (("dvc.yaml", TINY_DVC), ("slow.py", SLOW), ("quick.py", QUICK)):
        (root / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "DVC_STAGE")}
    env |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}", "DVC_NO_ANALYTICS": "1",
            "DVC_SITE_CACHE_DIR": str(root / ".dvc" / "tmp" / "site-cache"), "PYTHONPATH": str(root)}
    subprocess.run(["dvc", "init", "--no-scm", "-q"], cwd=root, env=env, check=True)
    return root, env


def seed(root: Path, env: dict[str, str], *args: str, **kwargs: object) -> subprocess.Popen[str]:
    """``seed <args>`` of the copy (``python -m seed_app.cli``: the copy's own packages, so its own workspace)."""
    return subprocess.Popen([sys.executable, "-m", "seed_app.cli", *args], cwd=root, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)  # type: ignore[call-overload]


def stop_tree(proc: psutil.Process | subprocess.Popen[str]) -> None:
    """SIGKILL a process this test started and everything below it (each by its PID)."""
    with contextlib.suppress(psutil.NoSuchProcess):
        tree = psutil.Process(proc.pid)
        for member in [*tree.children(recursive=True), tree]:
            with contextlib.suppress(psutil.NoSuchProcess):
                member.kill()
        psutil.wait_procs([tree], timeout=10)
    if isinstance(proc, subprocess.Popen):
        proc.wait(10)


@contextlib.contextmanager
def running_stage(root: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """A real ``seed stage slow`` holding the workspace, once its stage process runs (under ``dvc repro``)."""
    (root / "started").unlink(missing_ok=True)
    proc = seed(root, env, "stage", "slow")
    try:
        deadline = time.monotonic() + 120
        while not (root / "started").exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "seed stage slow did not start its stage"
            time.sleep(0.1)
        yield proc
    finally:
        stop_tree(proc)


@contextlib.contextmanager
def helper_holder(root: Path, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """A helper process holding the copy's workspace through ``seed_app.workspace`` (cheaper than a seed command)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, "seed run --preset presets/x.yaml"], cwd=root, env=env,
                            text=True, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        stop_tree(proc)


def refused(root: Path, env: dict[str, str], *args: str) -> tuple[str, float, list[bytes]]:
    """Run ``seed <args>``, expecting a refusal: returns its stderr, its wall time and ``params.yaml`` as sampled
    every 10 ms while it ran."""
    samples, start = [], time.monotonic()
    proc = seed(root, env, *args)
    while proc.poll() is None:
        samples.append((root / "params.yaml").read_bytes())
        time.sleep(0.01)
    seconds = time.monotonic() - start
    out, err = proc.communicate()
    assert proc.returncode == 2, (proc.returncode, out, err)
    assert "Traceback" not in out + err and len(err.strip().splitlines()) == 1, err
    return err.strip(), seconds, [*samples, (root / "params.yaml").read_bytes()]


@pytest.mark.parametrize("args", [("run", "--preset", "presets/x.yaml"), ("run", "-S", "eval.num_tasks=3"), ("run",),
                                  ("sweep", "--seeds", "1"), ("stage", "quick")], ids=" ".join)
def test_a_second_seed_command_beside_a_running_one_exits_2_at_once_naming_it(project, args) -> None:
    root, env = project
    params = (root / "params.yaml").read_bytes()
    with running_stage(root, env) as holder:
        message, seconds, samples = refused(root, env, *args)
        assert holder.poll() is None  # the running command goes on
    assert message == (f"seed: the workspace {root} is in use by PID {holder.pid} (seed stage slow); "
                       "wait for it or stop it")
    assert seconds < 2, f"refused after {seconds:.2f} s"
    assert len(samples) >= 3 and set(samples) == {params}  # params.yaml never changed while it ran
    assert not (root / "quick.txt").exists()  # no stage ran


def test_a_killed_holder_frees_the_workspace_for_the_next_command(project) -> None:
    root, env = project
    with helper_holder(root, env) as holder:
        message, _, _ = refused(root, env, "stage", "quick")
        assert f"in use by PID {holder.pid} (seed run --preset presets/x.yaml)" in message
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        start = time.monotonic()
        done = seed(root, env, "stage", "quick")
        out, err = done.communicate(timeout=120)
    assert done.returncode == 0, out + err  # the next command got the workspace, and its stage ran
    assert (root / "quick.txt").read_text() == "ok", time.monotonic() - start
    (root / "quick.txt").unlink()


def test_the_dvc_of_a_killed_seed_command_holds_the_workspace_until_it_ends(project) -> None:
    """``seed stage`` is SIGKILLed while its ``dvc repro`` runs a stage: that dvc, not the dead seed, is named, and
    the workspace is free once it is gone."""
    root, env = project
    with running_stage(root, env) as holder:
        dvc = next(p for p in psutil.Process(holder.pid).children() if "dvc" in " ".join(p.cmdline()))
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        message, seconds, _ = refused(root, env, "run", "--preset", "presets/x.yaml")
        assert f"in use by PID {dvc.pid} (" in message and "left running by a seed command that has exited" in message
        assert seconds < 30  # it refuses instead of waiting for the dvc (a bound, not a timing: loaded CI cores)
        stop_tree(dvc)
    with helper_holder(root, env):  # the workspace is free again
        pass


def test_nested_holds_and_other_threads_of_one_process_share_the_lock(tmp_path: Path) -> None:
    """``seed run`` holds the workspace, then its flow (maybe on another thread) calls ``run_pipeline``, which
    holds it again: that must not refuse; the side file names the outermost holder until it lets go."""
    seen: list[object] = []
    with workspace.hold(tmp_path, command="outer"):
        with workspace.hold(tmp_path):
            seen.append(workspace.holder(tmp_path))
        thread = threading.Thread(target=lambda: seen.append(workspace.hold(tmp_path).__enter__()))
        thread.start()
        thread.join()
        assert workspace.inherited_fds(tmp_path)
    assert seen[0] == {"pid": os.getpid(), "command": "outer", "since": pytest.approx(time.time(), abs=60),
                       "root": str(tmp_path.resolve())}
    assert seen[1] == tmp_path.resolve()
    assert workspace.holder(tmp_path) is None and not workspace.inherited_fds(tmp_path)


def test_a_workspace_copied_during_a_run_is_not_busy(tmp_path: Path) -> None:
    """``cp -a`` of a workspace while a command holds it copies the side file, which names a live process: the copy
    must not refuse every command until that process (in the other workspace) ends."""
    original, copy = tmp_path / "a", tmp_path / "b"
    original.mkdir()
    with workspace.hold(original, command="seed sweep"):
        shutil.copytree(original, copy)
        assert (copy / workspace.HOLDER_FILE).is_file()
        with pytest.raises(workspace.Busy):
            workspace.check(original)
        workspace.check(copy)  # not busy
        with workspace.hold(copy, command="seed run"):
            assert workspace.holder(copy)["command"] == "seed run"


SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]


_RESERVED: list[socket.socket] = []


def reserved_port() -> int:
    """A port bound, not listening, for this process's lifetime: nothing answers there and no stand-in server
    started meanwhile can be given it (``free_port`` ports are free again at once, so two runs could collide)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    _RESERVED.append(sock)
    return int(sock.getsockname()[1])


def stand_in_servers(ui: Path) -> None:
    """In this process: ``flows.servers`` keeps its files in ``ui``, nothing is configured or on the default
    ports, and a run's temporary servers are small health servers (the warm stage server a sleeper)."""
    from flows import servers, warm
    from seed_app import services

    for var in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", warm.SOCKET_VAR):
        os.environ.pop(var, None)
    servers.ui_dir = lambda: ui
    servers.DEFAULT_PORTS = {"prefect": reserved_port(), "mlflow": reserved_port()}
    services.configured_prefect_api = lambda: None
    services.flush_prefect_workers = lambda: None

    def health(port: int | None, path: str) -> tuple[list[str], str, str]:
        url = f"http://127.0.0.1:{port or free_port()}"
        return [sys.executable, "-c", HEALTH_SERVER, url.rsplit(":", 1)[1]], f"{url}{path}", url

    servers.prefect_server = lambda port=None: health(port, "/api/health")
    services.mlflow_server = lambda port: health(port, "/health")
    spawn = servers.spawn
    services.stage_server = lambda path, env: spawn(services.run_name("stages"), SLEEPER, env=env)


def other_run(ui: str) -> None:
    """A second pipeline run (``python -c``): its servers up, it prints their URLs and waits for a line on stdin."""
    from seed_app import services

    stand_in_servers(Path(ui))
    with services.pipeline_servers() as (prefect, mlflow):
        print(prefect, mlflow, flush=True)
        sys.stdin.readline()


def test_run_pid_files_are_the_runs_own_and_a_run_stops_only_its_servers(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``seed ui``'s PID files (``prefect.pid``, ``mlflow.pid``) and those of another run in progress are never
    overwritten by a run, whose own carry its PID; when the run ends it stops its servers and only those: the
    other run's keep answering, ``seed ui --stop`` still stops ``seed ui``'s, and the other run stops its own."""
    from flows import servers
    from seed_app import services

    for name in ("ui_dir", "DEFAULT_PORTS", "prefect_server"):
        monkeypatch.setattr(servers, name, getattr(servers, name))
    for name in ("configured_prefect_api", "flush_prefect_workers", "mlflow_server", "stage_server"):
        monkeypatch.setattr(services, name, getattr(services, name))
    for var in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "SEED_STAGE_SERVER"):
        monkeypatch.delenv(var, raising=False)
    stand_in_servers(tmp_path)
    ui_procs = {name: servers.spawn(name, SLEEPER) for name in ("prefect", "mlflow")}  # `seed ui`'s, still starting
    for name in ui_procs:
        servers.record_url(name, f"http://127.0.0.1:{reserved_port()}")  # `seed ui`'s, not answering yet
    ended, killed = services.run_name("prefect", 2**22 + 1), services.run_name("mlflow", 2**22 + 2)  # no such PIDs
    for name in (ended, killed):
        (tmp_path / f"{name}.log").write_text("old")
    files = lambda: {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.suffix in (".pid", ".url")}  # noqa
    ui_files = files()
    (tmp_path / f"{killed}.pid").write_text(str(2**22 + 3))  # a killed run's: the next run reclaims it (issue 43)
    other = subprocess.Popen([sys.executable, "-c", f"from {__name__} import other_run; other_run({str(tmp_path)!r})"],
                             cwd=ROOT, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert other.stdout is not None
        other_urls = other.stdout.readline().split()
        assert len(other_urls) == 2, other.communicate()
        other_files = files()
        ours = [f"{server}-{os.getpid()}-run.pid" for server in ("prefect", "mlflow", "stages")]
        theirs = [f"{server}-{other.pid}-run.pid" for server in ("prefect", "mlflow", "stages")]
        assert set(theirs) <= set(other_files) and other_files.items() >= ui_files.items()
        assert f"{killed}.pid" not in other_files  # its server is gone: the other run dropped the file
        with services.pipeline_servers() as (prefect, mlflow):
            assert {prefect, mlflow}.isdisjoint(other_urls)
            running = files()
            assert set(ours) <= set(running) and running.items() >= other_files.items()  # nothing overwritten
            our_pids = [int(running[name]) for name in ours]
            assert not (tmp_path / f"{ended}.log").exists() and not (tmp_path / f"{killed}.log").exists()
            assert (tmp_path / f"prefect-{other.pid}-run.log").exists()  # a live run's log stays
        assert files() == other_files  # our files gone, seed ui's and the other run's as they were
        assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                       for pid in our_pids)
        assert servers.healthy(f"{other_urls[0]}/health") and servers.healthy(f"{other_urls[1]}/health")
        other.communicate("\n", timeout=60)
        assert other.returncode == 0 and files() == ui_files
        assert not servers.healthy(f"{other_urls[0]}/health")
        assert {name: servers.stop(name) for name in ui_procs} == {n: p.pid for n, p in ui_procs.items()}
    finally:
        stop_tree(other)
        for proc in ui_procs.values():
            stop_tree(proc)
