"""``seed ui --host``: both servers bound to an address other machines reach (a sweep's workers log there), with the
lines other machines export and a warning that there is no authentication without ``--auth``; Prefect's UI pages
call the API at that address, MLflow takes artifacts over HTTP. One real ``seed ui --host <this machine's IPv4>``
on free ports, its files in a tmp directory (~25 s)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from typer.testing import CliRunner

from flows import servers as flows_servers
from seed_app import services
from tests.flows.test_ui_protection import isolated_ui


def lan_address() -> str | None:
    """An IPv4 address of this machine other than loopback (the one a route to the outside leaves from)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect(("192.0.2.1", 9))  # TEST-NET: no packet is sent, the kernel only picks the route
        except OSError:
            return None
        address = sock.getsockname()[0]
    return None if address.startswith("127.") else address


@pytest.fixture(scope="module")
def shared_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, int, str, Path]]:
    from seed_app.cli import app

    host = lan_address()
    if host is None:
        pytest.skip("this machine has no IPv4 address but loopback")
    tmp = tmp_path_factory.mktemp("ui")
    with isolated_ui(tmp) as (_, prefect_port, mlflow_port):
        result = CliRunner().invoke(app, ["ui", "--host", host, "--prefect-port", str(prefect_port),
                                          "--mlflow-port", str(mlflow_port)])
        try:
            assert result.exit_code == 0, result.output
            yield host, prefect_port, mlflow_port, result.output, tmp
        finally:
            for name in ("prefect", "mlflow"):
                flows_servers.stop(name)


def test_other_machines_reach_both_servers_at_the_host(shared_ui) -> None:
    host, prefect_port, mlflow_port, output, _ = shared_ui
    assert httpx.get(f"http://{host}:{prefect_port}/api/health", timeout=10).status_code == 200
    assert httpx.get(f"http://{host}:{mlflow_port}/health", timeout=10).status_code == 200
    create = f"http://{host}:{mlflow_port}/api/2.0/mlflow/experiments/create"
    assert httpx.post(create, json={"name": "from-a-worker"}, timeout=10).status_code == 200  # no password: warned
    assert httpx.post(create, headers={"Host": f"10.0.0.1:{mlflow_port}"}, json={"name": "x"},
                      timeout=10).status_code == 403  # still only its own names (no DNS rebinding)
    assert f"export PREFECT_API_URL=http://{host}:{prefect_port}/api MLFLOW_TRACKING_URI=http://{host}:{mlflow_port}" \
        in output
    assert "WARNING: Prefect and MLflow on" in output and "have no authentication" in output


def test_a_client_elsewhere_logs_artifacts_through_the_server(shared_ui, tmp_path: Path) -> None:
    import mlflow

    host, _, mlflow_port, _, tmp = shared_ui
    client = mlflow.MlflowClient(f"http://{host}:{mlflow_port}")
    run = client.create_run(client.create_experiment("cells-elsewhere"))
    (tmp_path / "results.json").write_text("{}")
    client.log_artifact(run.info.run_id, str(tmp_path / "results.json"))
    assert run.info.artifact_uri.startswith("mlflow-artifacts:")  # not a path on the server's disk
    assert list((tmp / "mlartifacts").rglob("results.json"))  # kept where the store keeps artifacts


def test_seeds_own_processes_find_them(shared_ui) -> None:
    host, prefect_port, mlflow_port, _, _ = shared_ui
    assert flows_servers.ui_url("prefect") == f"http://{host}:{prefect_port}"  # seed run, seed worker, the stages
    assert flows_servers.ui_url("mlflow") == f"http://{host}:{mlflow_port}"


def test_the_shared_servers_commands() -> None:
    commands = services.server_commands(4321, 4322, host="0.0.0.0")
    prefect, mlflow = commands["prefect"][0], commands["mlflow"][0]
    assert prefect[prefect.index("--host") + 1] == "0.0.0.0" and mlflow[mlflow.index("--host") + 1] == "0.0.0.0"
    assert commands["prefect"][1] == "http://127.0.0.1:4321/api/health"  # this machine's way in
    assert commands["prefect"][2] == f"http://{socket.getfqdn()}:4321"  # the other machines'
    assert f"{socket.getfqdn()}:4322" in mlflow[mlflow.index("--allowed-hosts") + 1].split(",")
    assert mlflow[mlflow.index("--default-artifact-root") + 1] == "mlflow-artifacts:/"  # artifacts over HTTP
    env = flows_servers.prefect_server_env(commands["prefect"][1], "http://lab-a:4321")
    assert env["PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS"].split(",")[-1] == "http://lab-a:4321"
