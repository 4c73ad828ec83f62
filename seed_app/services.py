"""``seed ui``'s Prefect and MLflow servers on 127.0.0.1 (``flows.servers`` starts them detached and stops them by
PID: ``seed ui --stop`` ends exactly what ``seed ui`` started) and a pipeline run's Prefect API (``prefect_api``)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from flows import servers
from seed_core import timing
from seed_core.config import endpoint_env
from seed_core.tracking import artifact_location, tracking_uri


def server_commands(prefect_port: int, mlflow_port: int) -> dict[str, tuple[list[str], str, str]]:
    """name -> (command, health URL, UI URL); the binaries are the ones beside this interpreter."""
    uri, mlflow_url = tracking_uri(), f"http://127.0.0.1:{mlflow_port}"
    mlflow = [str(Path(sys.executable).with_name("mlflow")), "server", "--backend-store-uri", uri, "--host",
              "127.0.0.1", "--port", str(mlflow_port), "--workers", "1"]
    if artifact_location(uri):
        mlflow += ["--default-artifact-root", str(artifact_location(uri))]
    return {"prefect": servers.prefect_server(prefect_port), "mlflow": (mlflow, f"{mlflow_url}/health", mlflow_url)}


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could bind ``host:port`` now."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def start_all(commands: dict[str, tuple[list[str], str, str]]) -> dict[str, int | str]:
    """Start every server that is not already up (healthy at its health URL), or none: a port held by
    something else is a ``RuntimeError`` naming it before anything starts, and a server that fails to
    start stops the ones started before it. Returns name -> PID (``already running`` for a live one)."""
    out: dict[str, int | str] = {}
    for name, (command, health, url) in commands.items():
        if servers.healthy(health):
            out[name] = "already running"
        elif not port_free(port := int(url.rsplit(":", 1)[1])):
            raise RuntimeError(f"port {port} on 127.0.0.1 is in use by another program, so the {name} UI cannot "
                               f"start there; free it or pick another port (seed ui --{name}-port N)")
    started: list[tuple[str, subprocess.Popen[bytes]]] = []
    try:
        for name, (command, health, url) in commands.items():
            if name not in out:
                started.append((name, servers.start(name, command, health)))
                out[name] = started[-1][1].pid
                servers.record_url(name, url)
    except BaseException:
        for name, proc in reversed(started):
            servers.stop(name, proc)
        raise
    return out


def configured_prefect_api() -> str | None:
    """$PREFECT_API_URL, or the API URL of the active Prefect settings (a ``temporary_settings`` block)."""
    url = endpoint_env("PREFECT_API_URL")
    if url or "prefect" not in sys.modules:
        return url
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or None


@contextlib.contextmanager
def prefect_api() -> Iterator[str]:
    """The Prefect API for a pipeline run: the configured one ($PREFECT_API_URL), else ``seed ui``'s
    server, else one temporary server on the project's database (``flows.servers.prefect_home``) for the run.

    Without a server every stage process would start its own temporary one (~10 s each, and
    concurrent first starts race on the database: stack-notes pitfall 6). The runs stay in
    the project's database, so ``seed ui`` shows them later.
    """
    url = configured_prefect_api() or (f"{servers.ui_url('prefect')}/api" if servers.ui_url("prefect") else None)
    if url:
        yield url
        return
    command, health, base = servers.prefect_server()
    proc = servers.start("prefect-run", command, health)
    timing.mark("prefect_server_up")
    try:
        yield f"{base}/api"
    finally:
        flush_prefect_workers()
        servers.stop("prefect-run", proc)


def flush_prefect_workers(timeout_s: float = 15.0) -> None:
    """Send the logs and events Prefect still queues to the server while it is up. Without this, the
    queues are flushed at interpreter exit against the stopped temporary server, which retries for ~90 s
    and prints "Error logging to API" (measured on a `seed run` of the embedded default)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        worker.drain_all(timeout=timeout_s)
