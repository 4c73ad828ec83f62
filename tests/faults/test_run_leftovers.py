"""Issue 43 items 2 and 4, with real processes: a real ``seed run`` (its real Prefect and MLflow servers and warm stage
server, real ``dvc``) of a tiny copy of the project whose ``collect`` stage is a Prefect flow that logs to MLflow and
then waits (``STAND_IN_COLLECT``, run in a fork of the warm server like any stage).

* SIGKILL of ``seed run`` while its stage runs: within a few seconds no process the run started is left (servers,
  their workers, the stage fork, ``dvc`` and its stage process) and no port it opened still listens.
* One SIGINT (the terminal's Ctrl-C) mid-stage: one line on stderr naming the stage and how to resume, nothing else
  printed after it, and no process or port left once ``seed`` has exited.
* A real ``dvc exp run -S`` beside the running pipeline is refused in one line before it writes anything; the run
  ends as it would have, and ``params.yaml`` is byte for byte as the user left it.
* ``params.yaml`` edited under the run: the next stage stops in one line before writing anything, the run fails in
  one line, and ``params.yaml`` keeps the user's edit.
* A dead run's servers (its reaper killed too) are stopped by the next run (``reclaim_dead_runs``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from tests.flows.conftest import write_tiny_params
from tests.flows.test_dvc_repro import copy_project

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = """stages:
  collect:
    cmd: python -m flows.collect
    deps: [nonce.txt]
    outs: [out/collect.txt]
  report:
    cmd: python -m flows.report
    deps: [out/collect.txt]
    outs: [out/report.txt, reports/table.md, reports/table.csv]
"""
"""Two stages, each a stage module the warm server runs; ``nonce.txt`` (which ``collect`` copies into its output)
makes every test's run stale: DVC's run cache cannot restore either stage."""
STAND_IN_COLLECT = '''"""Stand-in collect stage: a Prefect flow that logs to MLflow, says so, and waits for ``go``."""
import os
import time
from pathlib import Path

from prefect import flow


@flow(name="collect")
def collect() -> None:
    import mlflow

    with mlflow.start_run(run_name="collect"):
        mlflow.log_param("stand_in", 1)
        Path("started").write_text(str(os.getpid()))
        print("collect: waiting for go", flush=True)
        deadline = time.monotonic() + 300
        while not Path("go").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        Path("out").mkdir(exist_ok=True)
        Path("out/collect.txt.tmp").write_text("collected " + Path("nonce.txt").read_text())
        os.replace("out/collect.txt.tmp", "out/collect.txt")


if __name__ == "__main__":
    collect()
'''
STAND_IN_REPORT = '''"""Stand-in report stage: the table seed run prints."""
from pathlib import Path

if __name__ == "__main__":
    Path("reports").mkdir(exist_ok=True)
    Path("reports/table.md").write_text("| Method | Success |\\n|---|---|\\n| stand-in | 1.0 |\\n")
    Path("reports/table.csv").write_text("method,label,env,split,task_type,success_rate,score\\n"
                                         "stand_in,Stand-in,sokoban,test,all,1.0,\\n")
    Path("out/report.txt").write_text(Path("out/collect.txt").read_text() + "reported\\n")
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The project's packages (stand-ins for ``flows.collect`` / ``flows.report``), tiny params, ``PIPELINE``, in
    git + DVC; no Prefect or MLflow configured, so ``seed run`` starts temporary servers of its own."""
    root = tmp_path_factory.mktemp("leftovers").resolve()
    copy_project(root, ("seed_core", "tasks", "flows", "seed_app", ".dvcignore", ".gitignore", "pyproject.toml"))
    (root / "flows" / "collect.py").write_text(STAND_IN_COLLECT)
    (root / "flows" / "report.py").write_text(STAND_IN_REPORT)
    write_tiny_params(root / "params.yaml", Path("tiny-llama"), "data")  # a model seed builds: no directory needed
    (root / "dvc.yaml").write_text(PIPELINE)
    (root / "nonce.txt").write_text("0\n")
    drop = ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "DVC_STAGE", "SEED_STAGE_SERVER", "SEED_RUN_INPUTS")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}", "DVC_NO_ANALYTICS": "1",
            "DVC_SITE_CACHE_DIR": str(root / ".dvc" / "tmp" / "site-cache"), "PYTHONPATH": str(root),
            "PREFECT_HOME": str(root / ".prefect"), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "tiny"]):
        subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True)
    return root, env


def fresh(root: Path) -> None:
    """A stale pipeline for this test (a new nonce: DVC's run cache cannot restore it) and no marker files."""
    for name in ("started", "go"):
        (root / name).unlink(missing_ok=True)
    for folder in ("out", "reports"):
        shutil.rmtree(root / folder, ignore_errors=True)
    (root / "nonce.txt").write_text(f"{time.time_ns()}\n")


@contextlib.contextmanager
def seed_run(root: Path, env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``seed run`` in its own session (a terminal's job: Ctrl-C reaches its group), output to files in
    ``tmp_path``; once its stage waits. Whatever the test leaves running is SIGKILLed afterwards, by PID."""
    fresh(root)
    with open(tmp_path / "out.log", "wb") as out, open(tmp_path / "err.log", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "seed_app.cli", "run"], cwd=root, env=env, stdout=out,
                                stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
    tree: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 300
        while not (root / "started").exists():
            assert proc.poll() is None, (tmp_path / "out.log").read_text() + (tmp_path / "err.log").read_text()
            assert time.monotonic() < deadline, "the stage never started"
            time.sleep(0.1)
        tree[:] = run_tree(proc.pid)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        for member in tree:
            with contextlib.suppress(psutil.Error):
                member.kill()
        proc.wait(30)


def run_tree(pid: int) -> list[psutil.Process]:
    """Every process ``seed run`` ``pid`` started, however deep (servers, their workers, the warm server's fork,
    the reaper, dvc and its stage process)."""
    return psutil.Process(pid).children(recursive=True)


def listening_ports(procs: list[psutil.Process]) -> set[int]:
    ports = set()
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            ports |= {c.laddr.port for c in proc.net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    return ports


def left(procs: list[psutil.Process]) -> list[str]:
    """The processes of ``procs`` still running (a zombie has ended)."""
    alive = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{proc.pid} {' '.join(proc.cmdline())[:120]}")
    return alive


def answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def gone_within(procs: list[psutil.Process], ports: set[int], timeout_s: float) -> float:
    """Seconds until no process of ``procs`` runs and no port of ``ports`` answers; fails after ``timeout_s``."""
    start = time.monotonic()
    while left(procs) or any(answers(port) for port in ports):
        assert time.monotonic() - start < timeout_s, (left(procs), [p for p in ports if answers(p)])
        time.sleep(0.1)
    return time.monotonic() - start


def the_servers(root: Path, run_pid: int, tree: list[psutil.Process]) -> tuple[dict[str, int], set[int]]:
    """The run's own servers (``.tmp/ui/<server>-<run pid>-run.pid``) and the ports its processes listen on."""
    pids = {path.name.split("-")[0]: int(path.read_text())
            for path in (root / ".tmp" / "ui").glob(f"*-{run_pid}-run.pid")}
    assert set(pids) == {"prefect", "mlflow", "stages"}, pids  # temporary servers of its own, not seed ui's
    ports = listening_ports(tree)
    assert len(ports) >= 2, ports  # Prefect's and MLflow's
    return pids, ports


def test_a_sigkilled_seed_run_leaves_no_process_or_port(project, tmp_path: Path) -> None:
    root, env = project
    with seed_run(root, env, tmp_path) as run:
        tree = run_tree(run.pid)
        pids, ports = the_servers(root, run.pid, tree)
        fork = int((root / "started").read_text())
        assert fork in {p.pid for p in tree} and psutil.Process(fork).ppid() == pids["stages"]  # a warm fork
        os.kill(run.pid, signal.SIGKILL)
        seconds = gone_within(tree, ports, timeout_s=20)
    print(f"SIGKILL: {len(tree)} processes and ports {sorted(ports)} gone {seconds:.1f} s after the kill")
    assert not (root / "out" / "collect.txt").exists()


def test_one_sigint_mid_stage_ends_in_one_line_and_leaves_nothing(project, tmp_path: Path) -> None:
    root, env = project
    with seed_run(root, env, tmp_path) as run:
        tree = run_tree(run.pid)
        _, ports = the_servers(root, run.pid, tree)
        sizes = [(tmp_path / name).stat().st_size for name in ("out.log", "err.log")]
        start = time.monotonic()
        os.killpg(run.pid, signal.SIGINT)  # the terminal's Ctrl-C: the foreground job's group
        code = run.wait(timeout=120)
        seconds = time.monotonic() - start
        after = gone_within(tree, ports, timeout_s=5)
    out, err = ((tmp_path / name).read_bytes()[size:].decode() for name, size in zip(("out.log", "err.log"), sizes))
    print(f"SIGINT: seed exited {seconds:.1f} s after it, everything gone {after:.1f} s later: {err.strip()}")
    assert code == 130 and out == "", (code, out)
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("seed run: interrupted (Ctrl-C) during stage 'collect'") and "`seed run` resumes" in err
    log = Path(err.split("is in ")[-1].strip())
    assert log.is_file()  # what the stage and DVC printed after the interrupt
    assert not (root / "out" / "collect.txt").exists() and not list((root / "out").glob("*.tmp"))
    assert stage_run_status(root) in ("KILLED", "FAILED")  # the stage ended its MLflow run: the server was still up


def stage_run_status(root: Path) -> str:
    """The status of the newest ``collect`` MLflow run in the copy's store (``RUNNING`` if it never ended)."""
    import mlflow

    runs = mlflow.MlflowClient(f"sqlite:///{root / 'mlflow.db'}").search_runs(
        ["0"], filter_string="attributes.run_name = 'collect'", order_by=["attributes.start_time DESC"], max_results=1)
    return str(runs[0].info.status)


def test_dvc_exp_run_beside_a_running_pipeline_is_refused_and_changes_nothing(project, tmp_path: Path) -> None:
    root, env = project
    params = (root / "params.yaml").read_bytes()
    with seed_run(root, env, tmp_path) as run:
        samples = []
        exp = subprocess.Popen(["dvc", "exp", "run", "-S", "rl.lr=0.5"], cwd=root, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        while exp.poll() is None:
            samples.append((root / "params.yaml").read_bytes())
            time.sleep(0.01)
        out, err = exp.communicate()
        (root / "go").touch()  # the stage goes on
        code = run.wait(timeout=300)
    assert exp.returncode != 0 and len(err.strip().splitlines()) == 1 and "Unable to acquire lock" in err, (out, err)
    assert set(samples) == {params} and (root / "params.yaml").read_bytes() == params
    logs = (tmp_path / "out.log").read_text() + (tmp_path / "err.log").read_text()
    assert code == 0, logs
    collected = f"collected {(root / 'nonce.txt').read_text()}"
    assert (root / "out" / "report.txt").read_text() == f"{collected}reported\n"  # the run ended whole


def test_params_edited_under_the_run_stop_the_next_stage_in_one_line(project, tmp_path: Path) -> None:
    root, env = project
    params = (root / "params.yaml").read_text()
    edited = params.replace("num_tasks: 1", "num_tasks: 2", 1)
    assert edited != params
    try:
        with seed_run(root, env, tmp_path) as run:
            (root / "params.yaml").write_text(edited)  # the user, mid-stage
            (root / "go").touch()
            code = run.wait(timeout=300)
        err = (tmp_path / "err.log").read_text()
        stage_lines = [line for line in err.splitlines() if line.startswith("seed stage report:")]
        assert code == 2, err
        assert len(stage_lines) == 1 and "params.yaml (changed at" in stage_lines[0], err
        assert err.strip().splitlines()[-1].startswith("seed: the run stopped: params.yaml (changed at"), err
        assert not (root / "out" / "report.txt").exists() and not list((root / "reports").glob("table.*"))
        collected = f"collected {(root / 'nonce.txt').read_text()}"
        assert (root / "out" / "collect.txt").read_text() == collected  # the stage before the edit: whole
        assert "Traceback" not in err, err
        assert (root / "params.yaml").read_text() == edited  # as the user left it
    finally:
        (root / "params.yaml").write_text(params)


def test_a_run_stops_the_servers_a_dead_run_left_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run killed together with its reaper left a server (a real process group on a recorded PID file): the next
    run's ``reclaim_dead_runs`` stops it and forgets its files; a live run's and seed ui's files are untouched."""
    from flows import servers
    from seed_app import services

    monkeypatch.setattr(servers, "ui_dir", lambda: tmp_path)
    dead = subprocess.Popen(["true"])
    dead.wait()  # a PID that no longer runs: the killed run
    name = services.run_name("prefect", dead.pid)
    server = servers.spawn(name, [sys.executable, "-c", "import subprocess, sys, time; "
                                  "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
                                  "time.sleep(300)"])
    worker_deadline = time.monotonic() + 30
    while not psutil.Process(server.pid).children():
        assert time.monotonic() < worker_deadline
        time.sleep(0.05)
    group = [psutil.Process(server.pid), *psutil.Process(server.pid).children()]
    (tmp_path / f"{name}.url").write_text("http://127.0.0.1:9")
    live = services.run_name("mlflow", os.getpid())  # this process: a live run
    (tmp_path / f"{live}.pid").write_text(str(os.getpid()))
    (tmp_path / "prefect.pid").write_text(str(server.pid))  # seed ui's are never a run's
    try:
        assert services.reclaim_dead_runs() == {name: server.pid}
        server.wait(10)
        assert not left(group) and not (tmp_path / f"{name}.pid").exists() and not (tmp_path / f"{name}.url").exists()
        assert (tmp_path / f"{live}.pid").exists() and (tmp_path / "prefect.pid").exists()
    finally:
        for proc in group:
            with contextlib.suppress(psutil.Error):
                proc.kill()
