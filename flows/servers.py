"""Local servers as flow processes use them: detached on 127.0.0.1 (``start``, ``healthy``, ``stop`` by PID group;
PIDs, URLs and logs in the git-ignored ``.tmp/ui/``), and the Prefect server a DVC stage process reports to
(``use_project_prefect``): ``seed ui``'s, else one temporary server on the project's database shared by the
stages of one ``dvc repro``. ``seed_app.services`` starts ``seed ui``'s servers with them."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil

from seed_core.config import project_root


def ui_dir() -> Path:
    path = project_root() / ".tmp" / "ui"
    path.mkdir(parents=True, exist_ok=True)
    return path


DEFAULT_PORTS = {"prefect": 4200, "mlflow": 5000}
"""The ports ``seed ui`` uses unless told otherwise."""


LOOPBACK = "127.0.0.1"
ANY_HOST = ("0.0.0.0", "::")


def local_host(host: str) -> str:
    """Where this machine reaches a server bound to ``host``: ``127.0.0.1`` for every address (``0.0.0.0``)."""
    return LOOPBACK if host in (*ANY_HOST, "localhost") else host


def public_host(host: str) -> str:
    """How other machines name a server bound to ``host``: this machine's name for every address (``0.0.0.0``)."""
    return socket.getfqdn() if host in ANY_HOST else host


def prefect_server_env(health_url: str, ui_url: str | None = None) -> dict[str, str]:
    """Prefect's own protections (its settings, no middleware of seed's) for a server seed starts on 127.0.0.1:
    CORS for the server's own origin only (its UI, as ``127.0.0.1`` or ``localhost`` on that port; Prefect's
    default is ``*``) and CSRF tokens on every POST/PUT/PATCH/DELETE (``PREFECT_SERVER_CSRF_PROTECTION_ENABLED``;
    Prefect's client and UI fetch them from ``/api/csrf-token``, its client by default:
    ``PREFECT_CLIENT_CSRF_SUPPORT_ENABLED``). So a web page of any other origin can neither read the API's answers
    nor change anything (issue 26 item 4). Prefect 3 has no Host-header check: ``seed ui --auth`` covers that.
    ``ui_url``: the origin other machines open the UI at (``seed ui --host``), allowed too."""
    port = health_url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
    origins = [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]
    origins += [ui_url.rstrip("/")] if ui_url and ui_url.rstrip("/") not in origins else []
    return {"PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS": ",".join(origins),
            "PREFECT_SERVER_CSRF_PROTECTION_ENABLED": "true"}


AUTH_FILE = "auth.json"
"""``.tmp/ui/auth.json`` (mode 0600): ``{"username", "password"}`` of ``seed ui --auth``'s servers, while they run."""
CLIENT_AUTH_VARS = ("PREFECT_API_AUTH_STRING", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")
"""What Prefect's and MLflow's clients read their basic-auth credentials from."""


def ui_credentials() -> tuple[str, str] | None:
    """(username, password) of ``seed ui --auth``'s servers, None when ``seed ui`` runs without ``--auth``."""
    path = ui_dir() / AUTH_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return str(data["username"]), str(data["password"])


def client_auth_env(prefect_api: str | None, mlflow_uri: str | None) -> dict[str, str]:
    """The client variables (``CLIENT_AUTH_VARS``) for whichever of ``prefect_api`` / ``mlflow_uri`` is ``seed ui
    --auth``'s server (``ui_url``): Prefect's client then sends the auth string (and its CSRF token), MLflow's the
    username and password. Empty for any other server, or without ``--auth``."""
    credentials = ui_credentials()
    if credentials is None:
        return {}
    user, password = credentials
    env: dict[str, str] = {}
    prefect_ui, mlflow_ui = ui_url("prefect"), ui_url("mlflow")
    if prefect_api and prefect_ui and prefect_api.rstrip("/") == f"{prefect_ui}/api":
        env["PREFECT_API_AUTH_STRING"] = f"{user}:{password}"
    if mlflow_uri and mlflow_ui and mlflow_uri.rstrip("/") == mlflow_ui:
        env |= {"MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": password}
    return env


def prefect_server(port: int | None = None, host: str = LOOPBACK) -> tuple[list[str], str, str]:
    """(command, health URL, UI URL) of this interpreter's Prefect server on ``host``:``port`` (None: any free); the
    health URL is this machine's way in (``local_host``), the UI URL other machines' (``public_host``)."""
    port = free_port() if port is None else port
    return ([str(Path(sys.executable).with_name("prefect")), "server", "start", "--host", host, "--port",
             str(port), "--analytics-off"], f"http://{local_host(host)}:{port}/api/health",
            f"http://{public_host(host)}:{port}")


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def record_url(name: str, url: str) -> None:
    """Remember where ``seed ui`` serves ``name`` (``.tmp/ui/<name>.url``), for ``ui_url``."""
    (ui_dir() / f"{name}.url").write_text(url)


TEMPORARY_SUFFIX = "-run"
"""Servers named ``<x>-run`` (``.tmp/ui/<x>-run.{pid,url,log}``) live for one pipeline run only."""


def temporary_urls() -> set[str]:
    """URLs of the temporary servers of pipeline runs that are up now (not worth a link: gone after the run)."""
    return {path.read_text().strip() for path in ui_dir().glob(f"*{TEMPORARY_SUFFIX}.url")}


def recorded_url(name: str) -> str | None:
    """The URL ``seed ui`` last started ``name`` on (``.tmp/ui/<name>.url``), whether or not it answers now."""
    recorded = ui_dir() / f"{name}.url"
    return recorded.read_text().strip() if recorded.is_file() else None


def recorded_pid(name: str) -> int | None:
    """The PID in ``.tmp/ui/<name>.pid`` while that process (group) lives, else None: never started, stopped,
    or exited on its own."""
    try:
        pid = int((ui_dir() / f"{name}.pid").read_text())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid, None) else None


def ui_url(name: str) -> str | None:
    """Base URL of ``seed ui``'s ``name`` server (``prefect`` / ``mlflow``) if it answers, else None: the
    recorded URL, then the default port."""
    recorded = recorded_url(name)
    candidates = [recorded] if recorded else []
    candidates.append(f"http://127.0.0.1:{DEFAULT_PORTS[name]}")
    suffix = "/api/health" if name == "prefect" else "/health"
    return next((url for url in dict.fromkeys(candidates) if healthy(url + suffix)), None)


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def start(name: str, command: list[str], health_url: str, timeout_s: float = 120.0,
          env: dict[str, str] | None = None, ui_url: str | None = None) -> subprocess.Popen[bytes]:
    """Start ``command`` in its own session (log and PID in .tmp/ui/; ``env`` and ``ui_url`` as for ``spawn``) and
    poll its health URL."""
    return wait_healthy(name, spawn(name, command, health_url, env=env, ui_url=ui_url), health_url, timeout_s)


def spawn(name: str, command: list[str], health_url: str = "", env: dict[str, str] | None = None,
          cwd: Path | None = None, ui_url: str | None = None) -> subprocess.Popen[bytes]:
    """Start ``command`` in its own session (log and PID in .tmp/ui/, no stdin) without waiting for it: servers
    that start side by side (``wait_healthy`` each afterwards) overlap their start-up. ``env``: its environment
    instead of this process's (telemetry off and the project's ``PREFECT_HOME`` either way; a Prefect server
    gets its own origin's CORS and CSRF protection, ``prefect_server_env``; ``ui_url``: where other machines open a
    Prefect UI bound beyond 127.0.0.1, whose pages then call the API there)."""
    # MLflow's server otherwise forks 7 job consumers (~280 MB each) for GenAI jobs seed never uses.
    env = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **(os.environ if env is None else env),
           "DO_NOT_TRACK": "true", "MLFLOW_DISABLE_TELEMETRY": "true", "PREFECT_HOME": str(prefect_home())}
    if name.startswith("prefect") and health_url:  # its UI calls the API here: `--port` alone leaves it on 4200
        env["PREFECT_UI_API_URL"] = f"{ui_url.rstrip('/')}/api" if ui_url else health_url.removesuffix("/health")
        env |= prefect_server_env(health_url, ui_url)
    with open(ui_dir() / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env, cwd=cwd)
    (ui_dir() / f"{name}.pid").write_text(str(proc.pid))
    return proc


def wait_healthy(name: str, proc: subprocess.Popen[bytes], health_url: str,
                 timeout_s: float = 120.0) -> subprocess.Popen[bytes]:
    """Poll ``health_url`` until it answers; a server that exits or stays unhealthy for ``timeout_s`` is
    stopped and raises ``RuntimeError`` pointing at its log."""
    deadline = time.monotonic() + timeout_s
    while not healthy(health_url):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(name, proc)
            raise RuntimeError(f"{name} server did not become healthy; see {ui_dir() / name}.log")
        time.sleep(0.2)
    return proc


def _alive(pgid: int, proc: subprocess.Popen[bytes] | None) -> bool:
    """Whether any process of group ``pgid`` is left, not only its leader: a server's workers and the warm stage
    server's forks outlive a leader that exits on SIGTERM (a fork running a Prefect flow turns SIGTERM into an
    exception and went on retrying the stopped servers, issue 43), so ``stop_all`` waits for the whole group."""
    if proc is not None:
        proc.poll()  # reaps our own child, so its zombie does not keep the group alive
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pgid, os.WNOHANG)  # our own child without its Popen: reap it, a zombie looks alive
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def stop(name: str, proc: subprocess.Popen[bytes] | None = None, timeout_s: float = 30.0) -> int | None:
    """SIGTERM the process group started for ``name`` (its own session: the server and its workers,
    nothing else), wait until it is gone, SIGKILL after ``timeout_s``. Returns the PID (None: none)."""
    return stop_all([(name, proc)], timeout_s)[name]


def stop_all(started: list[tuple[str, subprocess.Popen[bytes] | None]],
             timeout_s: float = 30.0) -> dict[str, int | None]:
    """``stop`` for several servers at once: SIGTERM to every group first, then wait for them together (their
    shut-downs overlap). Returns name -> PID (None: no PID file, nothing to stop)."""
    pids: dict[str, int | None] = {}
    waiting: list[tuple[int, subprocess.Popen[bytes] | None]] = []
    for name, proc in started:
        pid_file = ui_dir() / f"{name}.pid"
        pids[name] = int(pid_file.read_text()) if pid_file.is_file() else None
        if pids[name] is None:
            continue
        pid_file.unlink()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pids[name], signal.SIGTERM)
        waiting.append((pids[name], proc))
    waiting = _wait_gone(waiting, timeout_s)
    for pid, _ in waiting:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    _wait_gone(waiting, 5.0)  # SIGKILL is not instant: return once the group is really gone
    return pids


def _wait_gone(groups: list[tuple[int, subprocess.Popen[bytes] | None]],
               timeout_s: float) -> list[tuple[int, subprocess.Popen[bytes] | None]]:
    """Poll ``groups`` (pgid, Popen) until none is alive or ``timeout_s`` has passed; those still alive."""
    deadline = time.monotonic() + timeout_s
    while (groups := [(pid, proc) for pid, proc in groups if _alive(pid, proc)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return groups


def prefect_home() -> Path:
    """$PREFECT_HOME, else the project's ``.prefect/``: the database ``seed ui`` serves and temporary
    servers of ``seed run`` / ``dvc repro`` record into, so their history outlives them."""
    return Path(os.environ.get("PREFECT_HOME") or project_root() / ".prefect")


def use_project_prefect() -> str:
    """For a process about to import Prefect without ``$PREFECT_API_URL``: report to ``seed ui``'s server
    when it is up (with ``seed ui --auth``'s credentials), else to a temporary server on the project's database
    (``prefect_home``). Returns the API URL or the database directory used.

    Under ``dvc repro`` / ``dvc exp run`` the stages of one DVC process share that temporary server
    (``repro_prefect_api``): Prefect 3 would otherwise start a server per stage process (~8 s each on 2 cores).
    """
    if url := ui_url("prefect"):
        os.environ["PREFECT_API_URL"] = f"{url}/api"
        os.environ.update(client_auth_env(os.environ["PREFECT_API_URL"], None))  # `seed ui --auth`'s credentials
        return os.environ["PREFECT_API_URL"]
    os.environ["PREFECT_HOME"] = str(prefect_home())
    dvc_pid = dvc_ancestor()
    api = repro_prefect_api(dvc_pid) if dvc_pid else None
    if api:  # one server for all stages of this `dvc repro`, not one per stage process
        os.environ["PREFECT_API_URL"] = api
        return api
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    return os.environ["PREFECT_HOME"]


REPRO_SERVER = "prefect-repro"
"""Name (``.tmp/ui/prefect-repro-<dvc pid>.{url,pid,log}``) of the temporary Prefect server shared by the
stage processes of one DVC process."""


def dvc_ancestor(max_depth: int = 4) -> int | None:
    """PID of the ``dvc`` process (``dvc repro``, ``dvc exp run``, a queue worker) this process runs under
    (DVC starts a stage as ``sh -c <cmd>``), None if there is none within ``max_depth`` parents."""
    proc: psutil.Process | None = psutil.Process()
    for _ in range(max_depth):
        proc = proc.parent() if proc else None
        if proc is None:
            return None
        with contextlib.suppress(psutil.Error):
            cmdline = proc.cmdline()
            if any(Path(part).name == "dvc" for part in cmdline[:2]) or cmdline[1:3] == ["-m", "dvc"]:
                return proc.pid
    return None


def repro_prefect_api(dvc_pid: int) -> str | None:
    """The API of the temporary Prefect server (on the project's database) shared by the stages of DVC
    process ``dvc_pid``: the first stage starts it, the next ones find it healthy, and a detached watcher
    (``python -m flows.servers --stop-when-gone``) stops it when that DVC process has exited. None if
    it cannot start (the stage then falls back to Prefect's own per-process temporary server)."""
    name = f"{REPRO_SERVER}-{dvc_pid}"
    url_file = ui_dir() / f"{name}.url"
    if url_file.is_file() and healthy(f"{url_file.read_text().strip()}/api/health"):
        return f"{url_file.read_text().strip()}/api"
    command, health, base = prefect_server()
    try:
        start(name, command, health)
    except RuntimeError:
        return None
    url_file.write_text(base)
    env = {k: v for k, v in os.environ.items() if k not in ("DVC_STAGE", "PREFECT_API_URL")}
    subprocess.Popen([sys.executable, "-m", "flows.servers", "--stop-when-gone", str(dvc_pid), name],
                     cwd=project_root(), env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return f"{base}/api"


def stop_when_gone(pid: int, name: str, poll_s: float = 1.0) -> None:
    """Wait until process ``pid`` has exited, then stop server ``name`` and forget its URL and log."""
    with contextlib.suppress(psutil.NoSuchProcess):
        proc = psutil.Process(pid)
        while proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
            time.sleep(poll_s)
    stop(name)
    for suffix in ("url", "log"):
        (ui_dir() / f"{name}.{suffix}").unlink(missing_ok=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--stop-when-gone"]:
    stop_when_gone(int(sys.argv[2]), sys.argv[3])
