"""The servers' commands: ``seed init`` (the Prefect and MLflow stores), ``seed ui`` (their UIs on 127.0.0.1 or
``--host``, or ``--stop``) and ``seed serve`` (the Prefect UI deployment that triggers pipeline runs)."""

from __future__ import annotations

import os
import socket
from typing import Annotated, Any

import typer

from seed_app.cli_base import command, one_line
from seed_core.config import endpoint_env


@command(short_help="Create the project's Prefect database and MLflow tables.")
def init() -> None:
    """Create the project's Prefect database and MLflow tables.

    Once per clone (scripts/setup.sh runs it), so that the first `seed run` does not wait for their
    migrations. It is harmless to repeat: it upgrades them.
    """
    from seed_app import services

    try:
        seconds = services.init_stores()
    except RuntimeError as err:
        typer.echo(f"seed: {err}", err=True)
        raise typer.Exit(1) from None
    for name, taken in seconds.items():
        typer.echo(f"{name}: store ready ({taken:.1f} s)")
    if not seconds:
        typer.echo("seed: Prefect and MLflow are configured servers ($PREFECT_API_URL, $MLFLOW_TRACKING_URI); "
                   "nothing to create here")


def port_option(server: str) -> Any:
    return typer.Option(min=1, max=65535, metavar="PORT", help=f"The {server} UI's port on 127.0.0.1.")


def running_as(server: str, url: str) -> str:
    """``PID 123, port 4200`` of the ``server`` that answers at ``url``: the PID ``seed ui`` recorded when it
    started that server, else a note that another program started it."""
    from flows import servers

    port = url.rsplit(":", 1)[1]
    pid = servers.recorded_pid(server) if servers.recorded_url(server) == url else None
    who = f"PID {pid}" if pid else f"not started by `seed ui` in this project (no live .tmp/ui/{server}.pid)"
    return f"{who}, port {port}"


def stop_ui() -> None:
    """``seed ui --stop``: stop the servers ``seed ui`` started, one line each naming the PID and port, or why
    there was nothing to stop."""
    from flows import servers
    from seed_app import services

    for server in ("prefect", "mlflow"):
        url, alive = servers.recorded_url(server), servers.recorded_pid(server)
        port = f", port {url.rsplit(':', 1)[1]}" if url else ""
        pid = servers.stop(server)
        if pid is not None and alive:
            typer.echo(f"{server}: stopped PID {pid}{port}")
        elif pid is not None:
            typer.echo(f"{server}: PID {pid}{port} had already exited; its PID file is removed")
        elif (live := servers.ui_url(server)) is not None:
            typer.echo(f"{server}: {live} answers, but `seed ui` did not start it here (no .tmp/ui/{server}.pid), "
                       "so it keeps running; stop it where it was started")
        else:
            typer.echo(f"{server}: not running (no .tmp/ui/{server}.pid), nothing to stop")
    services.forget_credentials()


def bindable(host: str) -> bool:
    """Whether a server here can listen on ``host``: it resolves, and a socket binds one of its addresses (port 0,
    so no port is taken). An address of another machine resolves but fails to bind (``EADDRNOTAVAIL``), which the
    servers would report only as a failed start in their logs, where it reads like a taken port."""
    try:
        addresses = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            try:
                sock.bind(address)
            except OSError:
                continue
            return True
    return False


def check_host(host: str) -> str:
    """``--host``: an address of this machine to bind (``0.0.0.0``: every one); else one line and exit 2."""
    if not bindable(host):
        typer.echo(f"seed ui: --host {host!r} is not an address of this machine (nothing here can listen on it); "
                   "use 0.0.0.0 (every address), this machine's name or one of its IP addresses", err=True)
        raise typer.Exit(2) from None
    return host


def shared_warning(host: str, auth: bool, ports: tuple[int, int]) -> str:
    """What ``seed ui --host`` says when other machines can reach the servers."""
    where = f"{host} ports {ports[0]} and {ports[1]}"
    if auth:
        return (f"seed ui: other machines reach Prefect and MLflow on {where} behind basic auth over plain HTTP "
                "(the password crosses the network in clear): use a trusted network or an HTTPS proxy")
    return (f"seed ui: WARNING: Prefect and MLflow on {where} have no authentication: anyone who reaches them can "
            "read, change and delete runs, flows and artifacts and start deployments; use a trusted network only, "
            "or add --auth")


@command(short_help="Start the Prefect and MLflow UIs on 127.0.0.1 (or --host), or stop them.")
def ui(prefect_port: Annotated[int, port_option("Prefect")] = 4200,
       mlflow_port: Annotated[int, port_option("MLflow")] = 5000,
       stop: Annotated[bool, typer.Option("--stop", help="Stop the servers that `seed ui` started.")] = False,
       auth: Annotated[bool, typer.Option("--auth", help="Protect both servers with basic auth (shared machines): "
                                                         "user seed, password $SEED_UI_PASSWORD or a random one, "
                                                         "printed once.")] = False,
       host: Annotated[str, typer.Option(metavar="HOST", help="The address both servers bind; 0.0.0.0 serves other "
                                                              "machines (a sweep's workers), with a warning: no "
                                                              "authentication without --auth.")] = "127.0.0.1"
       ) -> None:
    """Start the Prefect and MLflow UIs on 127.0.0.1 (or --host), or stop them.

    The servers run detached; each line names the URL, the PID and the port (a server that is already up is
    kept and named). `seed run` and `dvc repro` then report to this Prefect server; without it they record into
    the same database (.prefect/). Both servers accept web requests from their own origin only (CORS, CSRF,
    allowed hosts); --auth adds basic auth, whose credentials seed's own processes read from .tmp/ui/auth.json
    (mode 0600). --host 0.0.0.0 lets other machines in: the workers of `seed sweep --pool` and their MLflow runs.
    """
    from flows import servers
    from seed_app import services

    if stop:
        return stop_ui()
    commands = services.server_commands(prefect_port, mlflow_port, auth, check_host(host))
    if auth and (running := [f"{name} ({running_as(name, url)})" for name, (_, health, url) in commands.items()
                             if servers.healthy(health)]):
        typer.echo(f"seed: {' and '.join(running)} already running; `seed ui --stop` first (an --auth start sets "
                   "a new password)", err=True)
        raise typer.Exit(1)
    try:
        credentials = services.new_credentials() if auth else None
        if not auth and not any(servers.healthy(health) for _, health, _ in commands.values()):
            services.forget_credentials()  # an earlier `--auth` start's, not these servers'
        pids = services.start_all(commands, services.auth_env(*credentials[:2]) if credentials else None)
    except RuntimeError as err:
        if auth:
            services.forget_credentials()
        typer.echo(f"seed: {one_line(str(err))}", err=True)
        raise typer.Exit(1) from None
    for server, (_, _, url) in commands.items():
        state = f"already running, {running_as(server, url)}" if pids[server] == "already running" else \
            f"PID {pids[server]}, port {url.rsplit(':', 1)[1]}"
        typer.echo(f"{server}: {url}  ({state}; log .tmp/ui/{server}.log)")
    if credentials:
        user, password, generated = credentials
        shown = f"password {password}  (shown once; also in .tmp/ui/auth.json, mode 0600)" if generated else \
            f"password from ${services.PASSWORD_VAR}"
        typer.echo(f"basic auth: user {user}, {shown}; Prefect's UI asks for {user}:<password>")
    typer.echo(f"export PREFECT_API_URL=http://127.0.0.1:{prefect_port}/api   # flows then show in the Prefect UI")
    if servers.local_host(host) != servers.LOOPBACK or host in servers.ANY_HOST:
        public = f"http://{servers.public_host(host)}"
        typer.echo(f"other machines: export PREFECT_API_URL={public}:{prefect_port}/api "
                   f"MLFLOW_TRACKING_URI={public}:{mlflow_port}")
        typer.echo(shared_warning(host, auth, (prefect_port, mlflow_port)), err=True)
    typer.echo("stop with: seed ui --stop")


@command(short_help="Serve the Prefect UI deployment that triggers pipeline runs (needs `seed ui`).")
def serve() -> None:
    """Serve the Prefect UI deployment that triggers pipeline runs (needs `seed ui`).

    Runs of the seed-pipeline/ui deployment are triggered and scheduled from the Prefect UI. Each run holds the
    workspace like `seed run`; one that finds it in use fails naming the holder.
    """
    from flows import servers
    from seed_app.dvc_run import serve_deployment

    url = endpoint_env("PREFECT_API_URL") or "http://127.0.0.1:4200/api"
    if not servers.healthy(f"{url}/health"):
        typer.echo(f"seed: no Prefect server at {url}; start one with `seed ui` (or set PREFECT_API_URL)", err=True)
        raise typer.Exit(2)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    os.environ["PREFECT_API_URL"] = url  # served runs report to that server
    os.environ.update(servers.client_auth_env(url, None))  # with `seed ui --auth`'s credentials
    with temporary_settings({PREFECT_API_URL: url}):  # reads the environment again: Prefect is imported already
        serve_deployment()
