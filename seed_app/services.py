"""``seed ui``'s Prefect and MLflow servers on 127.0.0.1 (``flows.servers`` starts them detached and stops them by
PID: ``seed ui --stop`` ends exactly what ``seed ui`` started) and a pipeline run's servers (``pipeline_servers``)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterator

import psutil

from flows import servers, warm
from seed_app import reaper
from seed_core.config import endpoint_env, project_root
from seed_core.runtime import timing
from seed_core.tracking import artifact_location, tracking_uri


def server_commands(prefect_port: int, mlflow_port: int, auth: bool = False,
                    host: str = servers.LOOPBACK) -> dict[str, tuple[list[str], str, str]]:
    """name -> (command, health URL, UI URL); the binaries are the ones beside this interpreter. Both servers
    protect themselves with their own settings: Prefect's CORS and CSRF (``flows.servers.prefect_server_env``, set
    by ``spawn``), MLflow's allowed hosts and CORS origins (``mlflow_server``); ``auth``: MLflow's basic-auth app
    (its credentials and Prefect's come from ``auth_env``). ``host``: the address both bind (``seed ui --host``)."""
    return {"prefect": servers.prefect_server(prefect_port, host), "mlflow": mlflow_server(mlflow_port, auth, host)}


def mlflow_server(port: int, auth: bool = False, host: str = servers.LOOPBACK) -> tuple[list[str], str, str]:
    """(command, health URL, UI URL) of an MLflow server on ``host``:``port`` over the project's store. On
    127.0.0.1, artifacts stay where the store keeps them (``artifact_location``), written by the clients directly;
    bound for other machines, the server takes them over HTTP into that place (``--artifacts-destination``: a
    client elsewhere cannot write this machine's disk). MLflow's security settings: the ``Host`` header must be
    this server's (``--allowed-hosts``: no DNS rebinding) and state-changing API calls from a web origin other than
    its own are refused (``--cors-allowed-origins``; MLflow 3 also always lets ``localhost`` origins through).
    ``auth``: ``--app-name basic-auth``."""
    uri, public = tracking_uri(), servers.public_host(host)
    names = list(dict.fromkeys(["127.0.0.1", "localhost", public, *([] if host in servers.ANY_HOST else [host])]))
    command = [str(Path(sys.executable).with_name("mlflow")), "server", "--backend-store-uri", uri, "--host",
               host, "--port", str(port), "--workers", "1", "--allowed-hosts",
               ",".join(f"{name}:{port}" for name in names), "--cors-allowed-origins",
               ",".join(f"http://{name}:{port}" for name in names), *(["--app-name", "basic-auth"] if auth else [])]
    if artifact_location(uri) and host == servers.LOOPBACK:
        command += ["--default-artifact-root", str(artifact_location(uri))]
    elif artifact_location(uri):
        command += ["--artifacts-destination", str(artifact_location(uri)), "--default-artifact-root",
                    "mlflow-artifacts:/"]
    return command, f"http://{servers.local_host(host)}:{port}/health", f"http://{public}:{port}"


AUTH_USER = "seed"
"""The user name of ``seed ui --auth``'s servers (MLflow's admin user, Prefect's auth string ``seed:<password>``)."""
PASSWORD_VAR = "SEED_UI_PASSWORD"
"""Where ``seed ui --auth`` takes the password from, if set (else it generates one); at least 12 characters."""


def new_credentials() -> tuple[str, str, bool]:
    """(user, password, generated) for ``seed ui --auth``: ``$SEED_UI_PASSWORD`` or a random one, written to
    ``.tmp/ui/auth.json`` with mode 0600 (``flows.servers.ui_credentials``: the pipeline runs and stage processes
    read it there; nothing logs it). MLflow's user store of an earlier ``--auth`` start is dropped, so its admin
    user is created again with this password."""
    password = os.environ.get(PASSWORD_VAR) or secrets.token_urlsafe(24)  # a secret seed ui reads itself
    if len(password) < 12:  # MLflow's rule for its admin password
        raise RuntimeError(f"${PASSWORD_VAR} must have at least 12 characters (MLflow's basic-auth rule)")
    path = servers.ui_dir() / servers.AUTH_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # also when the file was there before
    with os.fdopen(fd, "w") as out:
        json.dump({"username": AUTH_USER, "password": password}, out)
    (servers.ui_dir() / "mlflow-auth.db").unlink(missing_ok=True)
    return AUTH_USER, password, not os.environ.get(PASSWORD_VAR)


def forget_credentials() -> None:
    """Remove ``seed ui --auth``'s credentials file (the servers are stopped, or started without ``--auth``)."""
    (servers.ui_dir() / servers.AUTH_FILE).unlink(missing_ok=True)


def auth_env(user: str, password: str) -> dict[str, dict[str, str]]:
    """name -> the environment ``seed ui --auth`` adds to each server: Prefect's basic-auth string
    (``PREFECT_SERVER_API_AUTH_STRING``), MLflow's basic-auth app config (``.tmp/ui/mlflow-auth.ini``: its own
    user store beside it, no permission for other users), admin user and password, and the random Flask secret
    its CSRF protection needs; secrets in the environment only, never on a command line."""
    ini = servers.ui_dir() / "mlflow-auth.ini"
    ini.write_text(f"[mlflow]\ndefault_permission = NO_PERMISSIONS\n"
                   f"database_uri = sqlite:///{servers.ui_dir() / 'mlflow-auth.db'}\nadmin_username = {user}\n"
                   "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n")
    return {"prefect": {"PREFECT_SERVER_API_AUTH_STRING": f"{user}:{password}"},
            "mlflow": {"MLFLOW_AUTH_CONFIG_PATH": str(ini), "MLFLOW_AUTH_ADMIN_USERNAME": user,
                       "MLFLOW_AUTH_ADMIN_PASSWORD": password, "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(32)}}


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could bind ``host:port`` now."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def start_all(commands: dict[str, tuple[list[str], str, str]],
              env: dict[str, dict[str, str]] | None = None) -> dict[str, int | str]:
    """Start every server that is not already up (healthy at its health URL), or none: a port held by
    something else is a ``RuntimeError`` naming it before anything starts, and a server that fails to
    start stops the ones started before it. ``env``: name -> variables added to that server's environment.
    Returns name -> PID (``already running`` for a live one)."""
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
                extra = (env or {}).get(name)
                started.append((name, servers.start(name, command, health, env={**os.environ, **extra} if extra
                                                    else None, ui_url=url)))
                out[name] = started[-1][1].pid
                servers.record_url(name, health.removesuffix("/health").removesuffix("/api"))  # this machine's way
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


def configured_mlflow() -> str | None:
    """$MLFLOW_TRACKING_URI (a server or a store the user chose)."""
    return endpoint_env("MLFLOW_TRACKING_URI")


def store_commands() -> dict[str, list[str]]:
    """name -> the command that creates or upgrades the project's store: Prefect's database (``prefect server
    database upgrade``, in ``flows.servers.prefect_home``) unless a Prefect server is configured, and MLflow's
    tables (``mlflow db upgrade``) when the tracking URI is a database (the project's ``mlflow.db``)."""
    bin_dir = Path(sys.executable).parent
    commands = {}
    if configured_prefect_api() is None:
        commands["prefect"] = [str(bin_dir / "prefect"), "server", "database", "upgrade", "--yes"]
    uri = tracking_uri()
    if uri.split(":", 1)[0].split("+", 1)[0] in DATABASE_SCHEMES:
        commands["mlflow"] = [str(bin_dir / "mlflow"), "db", "upgrade", uri]
    return commands


DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
"""Tracking URI schemes that are a database MLflow migrates (``mlflow db upgrade``); not a server or a folder."""


def init_stores() -> dict[str, float]:
    """Create (or upgrade) the project's Prefect database and MLflow tables side by side, as ``seed init`` and
    ``scripts/setup.sh`` do once per clone; returns name -> seconds. A pipeline run's temporary servers do the
    same on their first start in a fresh clone, inside the run: Prefect's migrations took 4.5 s of its
    8.6 s start and MLflow's tables 0.9 s of 6.5 s (measured), where the run waits for them. A failure raises
    ``RuntimeError`` with the command's output."""
    env = {**QUIET_ENV, **os.environ, "PREFECT_HOME": str(servers.prefect_home())}

    def create(command: list[str]) -> float:
        start = time.monotonic()
        done = subprocess.run(command, env=env, cwd=project_root(), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(command)}` failed (exit code {done.returncode}):\n"
                               f"{(done.stdout + done.stderr)[-2000:]}")
        return round(time.monotonic() - start, 2)

    commands = store_commands()
    with ThreadPoolExecutor(max_workers=max(len(commands), 1)) as pool:
        futures = {name: pool.submit(create, command) for name, command in commands.items()}
    return {name: future.result() for name, future in futures.items()}


def run_name(server: str, pid: int | None = None) -> str:
    """``<server>-<pid>-run``: the name (``.tmp/ui/<name>.{pid,url,log}``) of pipeline run ``pid``'s (default:
    this process's) temporary ``server`` (``prefect``, ``mlflow``, ``stages``: the warm stage server). The rule:
    each run's files carry its PID, so a run never overwrites ``seed ui``'s (``prefect.pid``, ``mlflow.pid``) or
    another run's, and stops exactly the servers it started (``stop_all`` reads only its own PID files)."""
    return f"{server}-{os.getpid() if pid is None else pid}{servers.TEMPORARY_SUFFIX}"


def _started_before(pid: int, path: Path) -> bool:
    """Whether process ``pid`` is alive and is the one a PID file ``path`` names: it started no later than the file
    was written (a PID reused since by another process started after it)."""
    try:
        return psutil.Process(pid).create_time() <= path.stat().st_mtime + 1
    except (psutil.Error, OSError):
        return False


def reclaim_dead_runs() -> dict[str, int]:
    """Stop the servers of pipeline runs that ended without stopping them (``.tmp/ui/<server>-<run pid>-run.pid``
    whose run is gone): a run killed together with its reaper (``seed_app.reaper``), or one from before the reaper
    existed (issue 43: 11.5 minutes after a kill -9 its servers still held 1.46 GB). A server is stopped only while
    its PID is still the process the file names (``_started_before``); its PID and URL files go either way, its
    log stays for ``prune_run_logs``. Returns server name -> the PID stopped."""
    stopped: dict[str, int] = {}
    for pid_file in servers.ui_dir().glob(f"*-*{servers.TEMPORARY_SUFFIX}.pid"):
        name = pid_file.name.removesuffix(".pid")
        run = name.removesuffix(servers.TEMPORARY_SUFFIX).rsplit("-", 1)[-1]
        if not run.isdigit() or int(run) == os.getpid() or _started_before(int(run), pid_file):
            continue  # this run's own, or a live run's
        with contextlib.suppress(OSError, ValueError):
            pid = int(pid_file.read_text())
            if _started_before(pid, pid_file):
                stopped[name] = servers.stop(name, timeout_s=5.0) or pid
        pid_file.unlink(missing_ok=True)
        (servers.ui_dir() / f"{name}.url").unlink(missing_ok=True)
    return stopped


def prune_run_logs() -> list[Path]:
    """Delete the server logs of pipeline runs that have ended (``.tmp/ui/<server>-<pid>-run.log`` whose process
    ``<pid>`` is gone and left no PID file): each run's logs stay until the next run starts. A killed run's PID
    files are gone by then (``reclaim_dead_runs`` runs first), so its logs go too. Returns the deleted files."""
    pruned = []
    for log in servers.ui_dir().glob(f"*-*{servers.TEMPORARY_SUFFIX}.log"):
        pid = log.name.removesuffix(f"{servers.TEMPORARY_SUFFIX}.log").rsplit("-", 1)[-1]
        if pid.isdigit() and not psutil.pid_exists(int(pid)) and not log.with_suffix(".pid").exists():
            log.unlink(missing_ok=True)
            pruned.append(log)
    return pruned


TEMPORARY_PREFECT_ENV = {"PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false",
                         "PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION": "false"}
"""A pipeline run's temporary Prefect server skips registering block types (seed uses none; 1.0-1.2 s of its
~11 s first start, measured) and so must not memoize that it did: ``seed ui``'s server on the same database
then registers them, and its Blocks page is complete. The user's own values win."""
QUIET_ENV = {"DO_NOT_TRACK": "true", "MLFLOW_DISABLE_TELEMETRY": "true", "DVC_NO_ANALYTICS": "1",
             "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "HF_HUB_OFFLINE": "1",
             "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90"}
"""Telemetry off and offline defaults for a pipeline run's processes (stack-notes §8.1); the user's own
values win."""


@contextlib.contextmanager
def pipeline_servers() -> Iterator[tuple[str, str]]:
    """(Prefect API URL, MLflow tracking URI) of a pipeline run, each the configured one ($PREFECT_API_URL,
    $MLFLOW_TRACKING_URI), else ``seed ui``'s server, else a temporary server on the project's database for
    the run; and the run's warm stage server (``flows.warm``). They all start side by side (their start-ups
    overlap: the stage server imports torch, Prefect and MLflow while the Prefect server migrates its
    database) and stop together afterwards. Inside, ``$MLFLOW_TRACKING_URI`` names the MLflow server and
    ``$SEED_STAGE_SERVER`` the stage server's socket, so the parent run and every stage process use them; a
    nested call (``seed run``'s pipeline flow calls ``run_pipeline``) starts nothing new. Their PID, URL and log
    files are this run's own (``run_name``: ``.tmp/ui/<server>-<pid>-run.*``), never ``seed ui``'s or another
    run's, and only the servers this call started are stopped: by this call on its way out, else by this
    process's reaper (``seed_app.reaper``) when the process dies, even by SIGKILL; a dead run's servers that are
    still up are stopped first (``reclaim_dead_runs``). With ``seed ui --auth``'s servers, their
    credentials reach this process's MLflow client, its Prefect settings from the next ``temporary_settings`` on
    (which read the environment again, as ``run_in_flow``'s), and the stage processes (``client_auth_env``).

    Why servers: without Prefect's, every stage process would start its own temporary one (~10 s each, and
    concurrent first starts race on the database: stack-notes pitfall 6). Without MLflow's, every stage
    process imports and opens the sqlite store itself: 1.25 s per process vs 0.14 s over HTTP (measured:
    client, one run, a param). Both record into the project's databases, so ``seed ui`` shows the runs later.
    """
    prefect_ui, mlflow_ui = servers.ui_url("prefect"), servers.ui_url("mlflow")
    prefect = configured_prefect_api() or (f"{prefect_ui}/api" if prefect_ui else None)
    mlflow = configured_mlflow() or mlflow_ui
    prefect_run = run_name("prefect")
    temporary: dict[str, tuple[list[str], str, str]] = {}  # name -> (command, health URL, base URL)
    if prefect is None:
        temporary[prefect_run] = servers.prefect_server()
        prefect = f"{temporary[prefect_run][2]}/api"
    if mlflow is None:
        temporary[run_name("mlflow")] = mlflow_server(servers.free_port())
        mlflow = temporary[run_name("mlflow")][2]
    if reclaimed := reclaim_dead_runs():
        print(f"seed: stopped the servers a killed run left behind: "
              f"{', '.join(f'{name} (PID {pid})' for name, pid in reclaimed.items())}", file=sys.stderr)
    prune_run_logs()
    started: list[tuple[str, subprocess.Popen[bytes]]] = []
    saved = {var: os.environ.get(var)
             for var in ("MLFLOW_TRACKING_URI", warm.SOCKET_VAR, *servers.CLIENT_AUTH_VARS)}
    socket_dir = None
    try:
        os.environ.update(servers.client_auth_env(prefect, mlflow))  # `seed ui --auth`'s: this process and stages
        for name, (command, health, _) in temporary.items():
            env = {**TEMPORARY_PREFECT_ENV, **os.environ} if name == prefect_run else None
            started.append((name, servers.spawn(name, command, health, env=env)))
            reaper.watch(started[-1][1].pid)  # its own session: the group dies with this run, even a killed one
        if not os.environ.get(warm.SOCKET_VAR):
            socket_dir = Path(tempfile.mkdtemp(prefix="seed-stages-"))
            env = {**QUIET_ENV, **os.environ, "PREFECT_API_URL": prefect, "MLFLOW_TRACKING_URI": mlflow}
            started.append((run_name("stages"), stage_server(socket_dir / "server.sock", env)))
            reaper.watch(started[-1][1].pid)
            os.environ[warm.SOCKET_VAR] = str(socket_dir / "server.sock")
        for name, proc in started:
            if name in temporary:
                servers.wait_healthy(name, proc, temporary[name][1])
                servers.record_url(name, temporary[name][2])
        timing.mark("servers_up")
        os.environ["MLFLOW_TRACKING_URI"] = mlflow
        yield prefect, mlflow
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        if prefect_run in temporary and "prefect" in sys.modules:
            flush_prefect_workers()
        servers.stop_all(started[::-1])
        for _, proc in started:
            reaper.forget(proc.pid)  # stopped: its PID may be reused
        for name in temporary:
            (servers.ui_dir() / f"{name}.url").unlink(missing_ok=True)
        if socket_dir is not None:
            shutil.rmtree(socket_dir, ignore_errors=True)


def flush_prefect_workers(timeout_s: float = 15.0) -> None:
    """Send the logs and events Prefect still queues to the server while it is up. Without this, the
    queues are flushed at interpreter exit against the stopped temporary server, which retries for ~90 s
    and prints "Error logging to API" (measured on a `seed run` of the embedded default)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        worker.drain_all(timeout=timeout_s)


def stage_server(path: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start a warm stage server (``flows.warm``) listening on ``path`` (in a private, 0700 directory) with the
    stage processes' environment, its PID and log beside the other servers' (``run_name("stages")``). It listens
    before it imports (~4 s), so a stage that comes early waits for it rather than importing on its own."""
    return servers.spawn(run_name("stages"), [sys.executable, "-m", "flows.warm", "--serve", str(path)], env=env,
                         cwd=project_root())
