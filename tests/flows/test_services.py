"""flows.servers, seed_app.services and `seed ui`: a taken port fails fast and starts nothing, a failed start
stops what it started, and pipeline runs find the configured servers, `seed ui`'s, or else start temporary ones on
the project's databases."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
from typer.testing import CliRunner

from flows import servers as flows_servers
from flows import warm
from seed_app import services
from seed_core.config import project_root

HEALTH_SERVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"OK")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture(autouse=True)
def ui_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PID, log and URL files in tmp_path, not the project's .tmp/ui; default ports nobody uses."""
    monkeypatch.setattr(flows_servers, "ui_dir", lambda: tmp_path)
    monkeypatch.setattr(flows_servers, "DEFAULT_PORTS", {"prefect": free_port(), "mlflow": free_port()})
    return tmp_path


@pytest.fixture
def health_server() -> Iterator[str]:
    """A stand-in UI server answering 200 on every path (our own process, stopped by PID)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", HEALTH_SERVER, str(port)])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while not flows_servers.healthy(f"{url}/health"):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(10)


def test_seed_ui_with_a_port_taken_exits_fast_naming_it_and_starts_nothing(ui_dir: Path) -> None:
    from seed_app.cli import app

    prefect_port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        mlflow_port = taken.getsockname()[1]
        start = time.monotonic()
        result = CliRunner().invoke(app, ["ui", "--prefect-port", str(prefect_port), "--mlflow-port", str(mlflow_port)])
        seconds = time.monotonic() - start
    assert result.exit_code == 1 and seconds < 5
    assert f"port {mlflow_port}" in result.output and "--mlflow-port" in result.output
    assert "Traceback" not in result.output
    assert not list(ui_dir.glob("*.pid"))  # nothing was started
    assert services.port_free(prefect_port)


def test_a_failed_start_stops_the_servers_started_before_it(ui_dir: Path) -> None:
    good, bad = free_port(), free_port()
    servers = {"prefect": ([sys.executable, "-c", HEALTH_SERVER, str(good)], f"http://127.0.0.1:{good}/api/health",
                           f"http://127.0.0.1:{good}"),
               "mlflow": ([sys.executable, "-c", "import sys; sys.exit(3)"], f"http://127.0.0.1:{bad}/health",
                          f"http://127.0.0.1:{bad}")}
    with pytest.raises(RuntimeError, match="mlflow server did not become healthy"):
        services.start_all(servers)
    assert not list(ui_dir.glob("*.pid"))
    assert not flows_servers.healthy(f"http://127.0.0.1:{good}/api/health")  # stopped (its port may sit in TIME_WAIT)


def test_start_all_starts_what_is_down_and_keeps_what_is_up(ui_dir: Path, health_server: str) -> None:
    port = free_port()
    servers = {"prefect": (["false"], f"{health_server}/api/health", health_server),
               "mlflow": ([sys.executable, "-c", HEALTH_SERVER, str(port)], f"http://127.0.0.1:{port}/health",
                          f"http://127.0.0.1:{port}")}
    pids = services.start_all(servers)
    try:
        assert pids["prefect"] == "already running" and isinstance(pids["mlflow"], int)
        assert flows_servers.ui_url("mlflow") == f"http://127.0.0.1:{port}"  # the recorded URL
    finally:
        assert flows_servers.stop("mlflow") == pids["mlflow"]
    assert gone(pids["mlflow"]) and flows_servers.ui_url("mlflow") is None


def test_pipeline_runs_use_the_configured_servers_else_seed_ui(monkeypatch: pytest.MonkeyPatch,
                                                                health_server: str) -> None:
    spawn = flows_servers.spawn

    def no_start(name: str, *args: object, **kwargs: object) -> object:
        if name != services.run_name("stages"):  # the run's warm stage server starts whichever servers it uses
            raise AssertionError("no server may start")
        return spawn(name, *args, **kwargs)

    monkeypatch.setattr(flows_servers, "spawn", no_start)
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////tmp/chosen.db")
    with services.pipeline_servers() as (prefect, mlflow):
        assert (prefect, mlflow) == ("http://127.0.0.1:9/api", "sqlite:////tmp/chosen.db")  # configured ones win
    monkeypatch.delenv("PREFECT_API_URL")
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.setattr(services, "configured_prefect_api", lambda: None)
    flows_servers.record_url("prefect", health_server)
    flows_servers.record_url("mlflow", health_server)
    with services.pipeline_servers() as (prefect, mlflow):
        assert (prefect, mlflow) == (f"{health_server}/api", health_server)  # `seed ui`'s servers
        assert os.environ["MLFLOW_TRACKING_URI"] == health_server
    assert "MLFLOW_TRACKING_URI" not in os.environ


def tmp_stores(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """No configured servers and the project's stores in ``tmp_path`` (Prefect's in ``prefect/``); returns the
    MLflow store URI."""
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.setattr(services, "configured_prefect_api", lambda: None)
    monkeypatch.setattr(services, "tracking_uri", lambda: store)
    monkeypatch.delenv(warm.SOCKET_VAR, raising=False)
    return store


def test_a_pipeline_run_without_servers_gets_temporary_ones_side_by_side_that_stop_after_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Real Prefect and MLflow servers on tmp databases: the run's MLflow calls go to the temporary server,
    which records into the store it serves; no link points at it; both are gone afterwards."""
    import mlflow

    from flows.results import mlflow_ui

    store = tmp_stores(monkeypatch, tmp_path)
    with services.pipeline_servers() as (prefect, uri):
        names = {server: services.run_name(server) for server in ("prefect", "mlflow", "stages")}  # this run's own
        pids = {server: int((tmp_path / f"{name}.pid").read_text()) for server, name in names.items()}
        assert flows_servers.healthy(f"{prefect}/health") and flows_servers.healthy(f"{uri}/health")
        assert os.environ["MLFLOW_TRACKING_URI"] == uri and uri.startswith("http://127.0.0.1:")
        assert mlflow_ui() is None  # no "MLflow run" link to a server that stops with the run
        client = mlflow.MlflowClient(uri)
        run_id = client.create_run(client.create_experiment("e")).info.run_id
        socket_path = os.environ[warm.SOCKET_VAR]  # the stage processes' warm server (flows.warm)
        monkeypatch.setattr(services, "configured_prefect_api", lambda: prefect)  # as in the pipeline flow's settings
        with services.pipeline_servers() as inner:  # `seed run`'s pipeline flow calling run_pipeline
            assert inner == (prefect, uri) and os.environ[warm.SOCKET_VAR] == socket_path
            assert int((tmp_path / f"{names['stages']}.pid").read_text()) == pids["stages"]  # nothing new started
        assert os.environ[warm.SOCKET_VAR] == socket_path
    assert "MLFLOW_TRACKING_URI" not in os.environ and warm.SOCKET_VAR not in os.environ
    assert not Path(socket_path).parent.exists()
    # block types were not registered, and that is not remembered: `seed ui`'s server registers them later
    assert (tmp_path / "prefect" / "prefect.db").is_file() and not (tmp_path / "prefect" / "memo_store.toml").exists()
    assert all(gone(pid) for pid in pids.values()), pids
    assert not list(tmp_path.glob("*-run.url"))
    assert mlflow.MlflowClient(store).get_run(run_id).info.run_id == run_id  # recorded in the project's store


def test_a_dvc_stage_process_reports_to_seed_ui_or_the_project_database(monkeypatch: pytest.MonkeyPatch,
                                                                        health_server: str) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_HOME", raising=False)
    assert flows_servers.use_project_prefect() == str(project_root() / ".prefect")
    assert os.environ["PREFECT_HOME"] == str(project_root() / ".prefect")
    flows_servers.record_url("prefect", health_server)
    assert flows_servers.use_project_prefect() == f"{health_server}/api" == os.environ["PREFECT_API_URL"]


def test_the_flows_package_sets_prefect_up_before_prefect_is_imported(tmp_path: Path) -> None:
    """`python -m flows.<stage>` under `dvc repro` (DVC_STAGE set, no PREFECT_API_URL): Prefect's own
    settings see the project's database, or `seed ui`'s API if one runs on this machine."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    code = ("import flows\nfrom prefect.settings import PREFECT_API_URL, PREFECT_HOME\n"
            "print(PREFECT_HOME.value()); print(PREFECT_API_URL.value())")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**env, "DVC_STAGE": "report", "PYTHONPATH": str(project_root())})
    home, api = out.stdout.split()
    assert out.returncode == 0, out.stderr
    assert home == str(project_root() / ".prefect") or api.endswith("/api")
    plain = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                           env={**env, "PREFECT_HOME": str(tmp_path), "PYTHONPATH": str(project_root())})
    assert plain.stdout.split() == [str(tmp_path), "None"]  # outside DVC nothing changes


FLOW_ON_A_TEMPORARY_SERVER = """
from prefect import flow
from seed_app.services import pipeline_servers
from prefect.settings import PREFECT_API_URL, temporary_settings

@flow(log_prints=True)
def chatty():
    for i in range(50):
        print("line", i)

with pipeline_servers() as (url, _), temporary_settings({PREFECT_API_URL: url}):
    chatty()
"""


def test_a_temporary_prefect_server_gets_the_logs_before_it_stops(tmp_path: Path) -> None:
    """Regression: the queued logs were flushed at exit against the stopped server (~90 s of retries)."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env |= {"PREFECT_HOME": str(tmp_path / "prefect"), "PYTHONPATH": str(project_root()),
            "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}  # only the Prefect server is temporary
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", FLOW_ON_A_TEMPORARY_SERVER], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Error logging to API" not in done.stderr + done.stdout
    assert seconds < 75, f"exit took {seconds:.0f} s: logs were flushed against a stopped server"


def test_seed_ui_prefect_on_another_port_serves_a_ui_that_calls_its_own_api(ui_dir: Path) -> None:
    """Regression (found by the browser test): with `--port` alone Prefect's UI called the API on port 4200."""
    import json
    import urllib.request

    port = free_port()
    servers = {k: v for k, v in services.server_commands(port, free_port()).items() if k == "prefect"}
    services.start_all(servers)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ui-settings", timeout=10) as response:
            assert json.load(response)["api_url"] == f"http://127.0.0.1:{port}/api"
    finally:
        flows_servers.stop("prefect")


STAGE = """
import os, sys
import flows  # under DVC: points Prefect at a server before Prefect is imported
from prefect import flow
from prefect.runtime import flow_run

@flow
def stage():
    return flow_run.id

run_id = stage()
open(sys.argv[1], "w").write(os.environ.get("PREFECT_API_URL", "none") + " " + str(run_id))
"""


def test_the_stages_of_one_dvc_repro_share_one_temporary_prefect_server(tmp_path: Path) -> None:
    """A plain `dvc repro` without a Prefect server: the first stage starts one temporary server on the
    project's database, the next stage reuses it, and it stops once DVC has exited."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "stage.py").write_text(STAGE)
    (root / "dvc.yaml").write_text("stages:\n"
                                   "  one: {cmd: python stage.py one.txt, deps: [stage.py], outs: [one.txt]}\n"
                                   "  two: {cmd: python stage.py two.txt, deps: [one.txt], outs: [two.txt]}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "DVC_STAGE")}
    env |= {"PREFECT_HOME": str(tmp_path / "prefect"), "PYTHONPATH": str(project_root()), "DVC_NO_ANALYTICS": "1",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
            "DVC_SITE_CACHE_DIR": str(tmp_path / "site-cache")}
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"], ["dvc", "repro"]):
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    (api_one, run_one), (api_two, run_two) = ((root / f).read_text().split() for f in ("one.txt", "two.txt"))
    assert api_one == api_two != "none" and run_one != run_two  # one server, two flow runs
    ui = project_root() / ".tmp" / "ui"
    deadline = time.monotonic() + 90
    while flows_servers.healthy(f"{api_one}/health") or list(ui.glob(f"{flows_servers.REPRO_SERVER}-*.url")):
        assert time.monotonic() < deadline, f"the shared server {api_one} outlived dvc repro"
        time.sleep(0.5)  # the watcher stops it once `dvc repro` has exited, then forgets its URL


def test_seed_init_creates_the_stores_a_pipeline_runs_servers_then_only_open(monkeypatch: pytest.MonkeyPatch,
                                                                              tmp_path: Path) -> None:
    """`seed init` (services.init_stores): Prefect's database migrated to its head and MLflow's tables, in the
    project's stores; the run's temporary servers then start on them and record there; a second init is an
    upgrade that changes nothing."""
    import sqlite3

    import mlflow

    store = tmp_stores(monkeypatch, tmp_path)
    assert set(services.init_stores()) == {"prefect", "mlflow"}

    def versions() -> tuple[list[tuple[str]], list[tuple[str]]]:
        with contextlib.closing(sqlite3.connect(tmp_path / "prefect" / "prefect.db")) as prefect_db, \
                contextlib.closing(sqlite3.connect(tmp_path / "mlflow.db")) as mlflow_db:
            return (prefect_db.execute("SELECT version_num FROM alembic_version").fetchall(),
                    mlflow_db.execute("SELECT version_num FROM alembic_version").fetchall())

    migrated = versions()
    assert all(len(rows) >= 1 for rows in migrated), migrated
    with services.pipeline_servers() as (prefect, uri):
        assert flows_servers.healthy(f"{prefect}/health")
        client = mlflow.MlflowClient(uri)
        run_id = client.create_run(client.create_experiment("e")).info.run_id
    assert mlflow.MlflowClient(store).get_run(run_id).info.run_id == run_id
    assert versions() == migrated
    services.init_stores()
    assert versions() == migrated


def test_seed_init_leaves_configured_servers_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(services, "configured_prefect_api", lambda: "http://127.0.0.1:9/api")
    monkeypatch.setattr(services, "tracking_uri", lambda: "http://127.0.0.1:9")
    assert services.store_commands() == {}
    monkeypatch.setattr(services, "tracking_uri", lambda: "postgresql+psycopg2://u@db/mlflow")
    assert list(services.store_commands()) == ["mlflow"]
