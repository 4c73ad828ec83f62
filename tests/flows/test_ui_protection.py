"""`seed ui`'s real Prefect and MLflow servers (issue 26 item 4): a web page of another origin can neither read
nor change them (Prefect: CORS for its own origin and CSRF tokens; MLflow: allowed hosts and CORS origins), and
`seed ui --auth` puts both behind their own basic auth, while seed's processes still reach them: the pipeline
run's Prefect client (auth string + CSRF token) and MLflow client, and the stage processes. One `seed ui --auth`
for the module (~25 s; again after the test of `seed ui --stop`, which may run first: random order), on free
ports, with its stores and files in a tmp directory."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from typer.testing import CliRunner

from flows import servers as flows_servers
from flows import warm
from seed_app import services
from seed_core.config import project_root

FOREIGN = "http://evil.example"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class UI:
    prefect: str
    mlflow: str
    password: str
    output: str
    dir: Path

    @property
    def auth(self) -> tuple[str, str]:
        return services.AUTH_USER, self.password


@contextlib.contextmanager
def isolated_ui(tmp: Path) -> Iterator[tuple[pytest.MonkeyPatch, int, int]]:
    """`seed ui`'s PID/log files, Prefect's home and MLflow's store under ``tmp``, on two free ports: yields the
    monkeypatch and the Prefect and MLflow ports."""
    prefect_port, mlflow_port = free_port(), free_port()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(flows_servers, "ui_dir", lambda: tmp)
        mp.setattr(flows_servers, "DEFAULT_PORTS", {"prefect": prefect_port, "mlflow": mlflow_port})
        mp.setenv("PREFECT_HOME", str(tmp / "prefect"))
        mp.setattr(services, "tracking_uri", lambda: f"sqlite:///{tmp / 'mlflow.db'}")
        yield mp, prefect_port, mlflow_port


def start_ui(tmp: Path, prefect_port: int, mlflow_port: int) -> UI:
    """`seed ui --auth` through the CLI on the given ports; its files under ``tmp``."""
    from seed_app.cli import app

    result = CliRunner().invoke(app, ["ui", "--auth", "--prefect-port", str(prefect_port), "--mlflow-port",
                                      str(mlflow_port)])
    assert result.exit_code == 0, result.output
    password = json.loads((tmp / flows_servers.AUTH_FILE).read_text())["password"]
    return UI(f"http://127.0.0.1:{prefect_port}", f"http://127.0.0.1:{mlflow_port}", password, result.output, tmp)


@pytest.fixture(scope="module")
def ui_slot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """The module's isolated `seed ui` place (tmp files, its monkeypatch); ``ui`` starts the servers there.
    Stopped at the end of the module."""
    tmp = tmp_path_factory.mktemp("ui")
    with isolated_ui(tmp) as (mp, _, _):
        mp.delenv(services.PASSWORD_VAR, raising=False)
        try:
            yield {"tmp": tmp, "mp": mp, "ui": None}
        finally:
            for name in ("prefect", "mlflow"):
                flows_servers.stop(name)


@pytest.fixture
def ui(ui_slot: dict[str, object]) -> UI:
    """`seed ui --auth`, started once for the module and again, on two new free ports (the stopped servers' may
    still be held), only after a test stopped it: `seed ui --stop` may run in any position (random order)."""
    current = ui_slot["ui"]
    if not isinstance(current, UI) or not flows_servers.healthy(f"{current.prefect}/api/health"):
        prefect_port, mlflow_port = free_port(), free_port()
        ui_slot["mp"].setattr(flows_servers, "DEFAULT_PORTS",  # type: ignore[attr-defined]
                              {"prefect": prefect_port, "mlflow": mlflow_port})
        ui_slot["ui"] = current = start_ui(ui_slot["tmp"], prefect_port, mlflow_port)  # type: ignore[arg-type]
    return current


def test_the_password_is_random_printed_once_and_kept_in_a_0600_file(ui: UI) -> None:
    from seed_app.cli import app

    assert len(ui.password) >= 32 and ui.output.count(ui.password) == 1
    assert stat.S_IMODE((ui.dir / flows_servers.AUTH_FILE).stat().st_mode) == 0o600
    assert all(ui.password not in p.read_text(errors="replace") for p in ui.dir.iterdir() if p.is_file()
               and p.name != flows_servers.AUTH_FILE)  # not in the servers' logs, the ini, or their databases
    again = CliRunner().invoke(app, ["ui", "--auth", "--prefect-port", ui.prefect.rsplit(":", 1)[1],
                                     "--mlflow-port", ui.mlflow.rsplit(":", 1)[1]])
    assert again.exit_code == 1 and "already running" in again.output and ui.password not in again.output


def test_prefect_answers_only_its_own_origin_and_wants_a_csrf_token_and_the_password(ui: UI) -> None:
    api = f"{ui.prefect}/api"
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    foreign = httpx.options(f"{api}/flows/filter", headers={"Origin": FOREIGN, **preflight})
    assert "access-control-allow-origin" not in foreign.headers and foreign.status_code == 400
    own = httpx.options(f"{api}/flows/filter", headers={"Origin": ui.prefect, **preflight})
    assert own.status_code == 200 and own.headers["access-control-allow-origin"] == ui.prefect
    # a "simple" cross-site POST needs no preflight: CSRF refuses it, even with the password
    forged = httpx.post(f"{api}/flows/filter", auth=ui.auth, headers={"Origin": FOREIGN, "Content-Type": "text/plain"},
                        content="{}")
    assert forged.status_code == 403 and "CSRF" in forged.text
    assert httpx.get(f"{api}/flows/00000000-0000-0000-0000-000000000000").status_code == 401  # no password
    assert httpx.get(f"{api}/health").status_code == 200  # health stays open (seed's liveness checks)
    settings = httpx.get(f"{ui.prefect}/ui-settings").json()
    assert settings["csrf_enabled"] is True and settings["auth"] == "BASIC"


def test_mlflow_answers_only_its_own_host_and_origin_and_wants_the_password(ui: UI) -> None:
    create = f"{ui.mlflow}/api/2.0/mlflow/experiments/create"
    port = ui.mlflow.rsplit(":", 1)[1]
    foreign = httpx.post(create, auth=ui.auth, headers={"Origin": FOREIGN}, json={"name": "from-a-web-page"})
    assert foreign.status_code == 403 and "access-control-allow-origin" not in foreign.headers
    own = httpx.post(create, auth=ui.auth, headers={"Origin": ui.mlflow}, json={"name": "from-its-ui"})
    assert own.status_code == 200 and own.headers["access-control-allow-origin"] == ui.mlflow
    # DNS rebinding: a name that resolves to 127.0.0.1 sends its own Host (MLflow's default would let 10.* in)
    assert httpx.post(create, auth=ui.auth, headers={"Host": f"10.0.0.1:{port}"}, json={"name": "x"}).status_code == 403
    assert httpx.post(create, json={"name": "no-password"}).status_code == 401
    assert httpx.get(f"{ui.mlflow}/health").status_code == 200


FLOW = """
import mlflow
from prefect import flow
from prefect.runtime import flow_run

@flow(log_prints=True)
def stage():
    print("a stage's log line")  # logs are POSTs too
    return flow_run.id

client = mlflow.MlflowClient()
run = client.create_run(client.get_experiment_by_name("auth-test").experiment_id)
client.log_param(run.info.run_id, "p", 1)
print(stage(), run.info.run_id)
"""


def test_a_pipeline_run_and_its_stage_processes_reach_the_auth_servers(
        ui: UI, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pipeline_servers`` finds `seed ui`'s servers: this process's Prefect client (settings) and MLflow client
    (environment) get the credentials, and so does every process it starts (a stage process here)."""
    import mlflow
    from prefect import flow, get_client
    from prefect.runtime import flow_run
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.setattr(services, "configured_prefect_api", lambda: None)  # not the session's test server
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv(warm.SOCKET_VAR, str(ui.dir / "no-stage-server.sock"))  # stage processes run on their own

    @flow
    def pipeline() -> str:
        return str(flow_run.id)

    with services.pipeline_servers() as (api, uri), temporary_settings({PREFECT_API_URL: api}):
        assert (api, uri) == (f"{ui.prefect}/api", ui.mlflow)
        run_id = pipeline()  # creates and updates a flow run: auth string + CSRF token
        with get_client(sync_client=True) as client:
            assert str(client.read_flow_run(run_id).id) == run_id
        experiment = mlflow.MlflowClient(uri).create_experiment("auth-test")
        env = {**os.environ, "PYTHONPATH": str(project_root()), "PREFECT_API_URL": api}
        stage = subprocess.run([sys.executable, "-c", FLOW], env=env, capture_output=True, text=True, timeout=180)
        assert stage.returncode == 0, stage.stderr[-3000:]
        stage_flow_run, stage_mlflow_run = stage.stdout.split()[-2:]
        assert mlflow.MlflowClient(uri).get_run(stage_mlflow_run).info.experiment_id == experiment
    assert not any(os.environ.get(var) for var in flows_servers.CLIENT_AUTH_VARS)  # put back afterwards
    assert "Error" not in (ui.dir / "prefect.log").read_text()
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    assert flows_servers.use_project_prefect() == f"{ui.prefect}/api"  # a `dvc repro` stage outside `seed run`
    assert os.environ["PREFECT_API_AUTH_STRING"] == f"{services.AUTH_USER}:{ui.password}"
    monkeypatch.delenv("PREFECT_API_AUTH_STRING")
    assert stage_flow_run != run_id


def test_seed_serve_serves_with_the_auth_string(ui: UI, monkeypatch: pytest.MonkeyPatch) -> None:
    """`seed serve` registers and runs the deployment from this process (Prefect imported before it knew the
    server): its settings get the URL and the credentials, and the runs it starts the variables."""
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL

    from seed_app import dvc_run
    from seed_app.cli import app

    seen: dict[str, object] = {}

    def serve_deployment() -> None:
        auth = PREFECT_API_AUTH_STRING.value()
        seen.update(url=PREFECT_API_URL.value(), auth=auth, env=os.environ.get("PREFECT_API_AUTH_STRING"))

    monkeypatch.setattr(dvc_run, "serve_deployment", serve_deployment)
    monkeypatch.setenv("PREFECT_API_URL", f"{ui.prefect}/api")
    monkeypatch.setenv("PREFECT_API_AUTH_STRING", "")  # restored afterwards: serve sets it for its runs
    result = CliRunner().invoke(app, ["serve"])
    assert result.exit_code == 0, result.output
    auth_string = f"{services.AUTH_USER}:{ui.password}"
    assert seen == {"url": f"{ui.prefect}/api", "auth": auth_string, "env": auth_string}


def test_seed_ui_stop_stops_both_and_forgets_the_password(ui: UI) -> None:
    from seed_app.cli import app

    result = CliRunner().invoke(app, ["ui", "--stop"])
    assert result.exit_code == 0, result.output
    assert not (ui.dir / flows_servers.AUTH_FILE).exists() and flows_servers.ui_credentials() is None
    assert not flows_servers.healthy(f"{ui.prefect}/api/health") and not flows_servers.healthy(f"{ui.mlflow}/health")


def test_plain_seed_ui_servers_carry_the_same_protections_without_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --auth the same settings (the real servers above prove them): Prefect's through ``spawn``."""
    commands = services.server_commands(4321, 4322)
    mlflow_command = commands["mlflow"][0]
    assert "--app-name" not in mlflow_command
    assert mlflow_command[mlflow_command.index("--allowed-hosts") + 1] == "127.0.0.1:4322,localhost:4322"
    assert mlflow_command[mlflow_command.index("--cors-allowed-origins") + 1] == \
        "http://127.0.0.1:4322,http://localhost:4322"
    assert flows_servers.prefect_server_env(commands["prefect"][1]) == {
        "PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS": "http://127.0.0.1:4321,http://localhost:4321",
        "PREFECT_SERVER_CSRF_PROTECTION_ENABLED": "true"}
