"""A warm stage server: one process per ``seed run`` pays the imports of Prefect, MLflow, torch, transformers
and seed_core once; each DVC stage process (``python -m flows.<stage>``) hands its argv, environment,
working directory and standard streams to a fork of it, waits, and exits with the fork's status.

Measured (``benchmarks/stage_fork_probe.py``): evaluate@vanilla 11.5 s as its own process, 6.4 s forked. The
server's objects are frozen (``gc.freeze``) before each fork: a collection in the fork would otherwise touch
every object the imports made and so copy their memory pages (measured: running ``flows.evaluate``'s module
code in a fork 0.31 s -> 0.04 s, a full collection there 0.19 s -> 0.001 s).

The client half (``run_in_server``, called first thing by ``flows/__init__``) imports the standard library
only. Without ``$SEED_STAGE_SERVER``, or when the server does not answer or ends before forking, the stage
runs in its own process as before (a plain ``dvc repro``). Signals the stage process gets (Ctrl-C, DVC stopping it) go on to the
fork; a stage process that disappears takes its fork with it, and a fork dies with its server
(``die_with_server``), which stops on SIGTERM.

Protocol on the Unix socket: the client sends an 8-byte length, then that many bytes of JSON
``{"module", "args", "cwd", "env"}`` with its fds 0, 1, 2 attached (``socket.send_fds``); the server answers
``<pid>\\n`` when the fork runs and ``<exit code>\\n`` when it has ended (128 + N for signal N). A module that is
not one of dvc.yaml's stage modules (``STAGE_MODULES``) is answered ``refused: <why>\\n`` and nothing runs.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import importlib
import json
import os
import runpy
import select
import signal
import socket
import struct
import sys
from typing import Any, Callable, Iterable

SOCKET_VAR = "SEED_STAGE_SERVER"
"""Run-context variable: the Unix socket of the current ``seed run``'s stage server."""
STAGE_MODULES = frozenset({"flows.prepare_model", "flows.generate_alfworld", "flows.collect", "flows.annotate",
                           "flows.sft", "flows.rl", "flows.evaluate", "flows.report"})
"""The modules dvc.yaml runs as stage commands (``python -m <module>``; a test checks both ways): all that the
server runs, whoever connects to its socket."""
REFUSED = "refused:"
"""How the server's answer to a request for any other module begins."""


def requested_module(argv: list[str]) -> tuple[str, list[str]] | None:
    """(module, its arguments) when ``argv`` (``sys.orig_argv``) is ``python [options] -m <stage module> ...``."""
    if "-m" not in argv[1:]:
        return None
    i = argv.index("-m", 1)
    if i + 1 >= len(argv) or argv[i + 1] not in STAGE_MODULES:
        return None
    return argv[i + 1], argv[i + 2:]


def _read_line(sock: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(64)
        if not chunk:
            raise ConnectionError("the stage server closed the connection")
        data += chunk
    return data.decode().strip()


def run_in_server(module: str, args: list[str], path: str) -> int | None:
    """Run ``module`` with ``args`` in a fork of the stage server at ``path``; its exit code, or None when the
    server cannot be reached (the caller then runs the stage itself)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    with sock:
        payload = json.dumps({"module": module, "args": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
        try:
            socket.send_fds(sock, [struct.pack("!Q", len(payload)) + payload], [0, 1, 2])
            answer = _read_line(sock)  # waits while the server is still importing (it listens first)
            if answer.startswith(REFUSED):
                print(f"seed stage server: {answer}", file=sys.stderr)
                return 2
            pid = int(answer)
        except (OSError, ValueError):  # the server died before forking (its warm-up failed, or it was stopped)
            return None
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda signum, _frame: os.kill(pid, signum))
        return int(_read_line(sock))


def client_main() -> None:
    """For ``flows/__init__``: hand this stage process to the stage server if there is one, and exit with its
    code; otherwise return and let the stage run here."""
    path = os.environ.get(SOCKET_VAR)
    wanted = requested_module(list(getattr(sys, "orig_argv", [])))
    if not path or wanted is None:
        return
    code = run_in_server(*wanted, path)
    if code is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, 8 + (1 << 16), 3)
    (size,) = struct.unpack("!Q", head[:8])
    body = head[8:]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ConnectionError("the stage process hung up mid-request")
        body += chunk
    return json.loads(body), list(fds)


PR_SET_PDEATHSIG = 1
"""Linux ``prctl`` option: the signal this process gets when its parent ends (``man 2 prctl``)."""


def die_with_server(server_pid: int) -> None:
    """In a fork: be SIGKILLed when the server that forked it ends (``PR_SET_PDEATHSIG``; the server forks from its
    only thread, so the signal comes when the server process ends). A fork running a Prefect flow turns SIGTERM into
    an exception and reports a crash; left without its server (issue 43) it went on retrying the run's stopped
    servers for a minute with PPID 1. A server that ended before this call: the fork exits at once. No-op off
    Linux."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != server_pid:
        os._exit(128 + int(signal.SIGKILL))


def _run_fork(request: dict[str, Any], fds: list[int]) -> None:
    """In the fork: become the stage process (its streams, directory, environment, argv), run the stage module
    as ``__main__``, run the exit handlers (Prefect's log flush, seed's timing file), exit with its code."""
    gc.enable()  # the server's objects stay frozen: collections here never touch (and so copy) their pages
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    module = request["module"]
    sys.argv = [os.path.join(request["cwd"], *module.split(".")) + ".py", *request["args"]]
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if isinstance(exc.code, int) or exc.code is None:
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - as the interpreter reports it: sys.excepthook, which the stage may
        sys.excepthook(*sys.exc_info())  # have set (seed_core.loader.one_line_errors: a known error in one line)
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(conn: socket.socket, pid: int) -> int:
    """The fork's exit code (128 + N for signal N); SIGTERM to it when the stage process hangs up first."""
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code
        readable, _, _ = select.select([conn], [], [], 0.2)
        if readable and not conn.recv(1):
            os.kill(pid, signal.SIGTERM)


def warm_up(modules: Iterable[str], calls: Iterable[Callable[[], object]] = ()) -> None:
    """Import what every stage imports (the ``sys.modules`` its fork starts with), then fill the caches in
    ``calls`` that the stages would each fill on first use."""
    for name in modules:
        importlib.import_module(name)
    for call in calls:
        call()


def mlflow_requirements_map() -> None:
    """MLflow's map of installed modules to their packages, which it builds the first time a model's requirements
    are checked: in every checkpoint registration of the transformers flavor (``mlflow.transformers.save_model``),
    ~0.6 s of a first registration's ~1.0 s (a second one takes 0.4 s; measured on the testbed checkpoint)."""
    from mlflow.utils.requirements_utils import warn_dependency_requirement_mismatches

    warn_dependency_requirement_mismatches(["mlflow"])


WARM_MODULES = ("flows.common", "prefect", "prefect.flow_engine", "mlflow", "torch", "transformers",
                "seed_core.loader", "seed_core.algorithms", "seed_core.losses", "seed_core.envs",
                "seed_core.rollout.backends", "seed_core.modeling.models", "mlflow.transformers", "mlflow.pyfunc", "peft",
                "tasks.evaluate", "tasks.rl", "tasks.sft",
                "tasks.collect", *(f"seed_core.stages.{stage}" for stage in (
                    "prepare_model", "generate_alfworld", "collect", "annotate", "sft", "rl", "evaluate", "report")))
"""Imported once by the server; a stage's own further imports happen in its fork. The stage modules are here
because the tasks import them lazily: ``seed_core.modeling.models`` loads transformers' modeling code (torch._dynamo
and friends, ~1.5 s), which every stage that loads a model paid inside its engine time before. ``mlflow.pyfunc``
and ``peft`` are what a checkpoint registration imports (``mlflow.transformers.save_model``)."""
WARM_CALLS: tuple[Callable[[], object], ...] = (mlflow_requirements_map,)
"""Caches filled once by the server after its imports, so that no stage fills its own."""


def refusal(request: Any, stages: frozenset[str]) -> str | None:
    """The ``refused:`` answer to a request whose module is not one of ``stages``, None for a stage module."""
    module = request.get("module") if isinstance(request, dict) else None
    if isinstance(module, str) and module in stages:
        return None
    return (f"{REFUSED} {module!r} is not a stage module of dvc.yaml; the stage server runs only "
            f"{', '.join(sorted(stages))}")


def serve(path: str, modules: Iterable[str] = WARM_MODULES,
          calls: Iterable[Callable[[], object]] = WARM_CALLS, stages: Iterable[str] = STAGE_MODULES) -> None:
    """Accept stage processes on ``path`` one at a time (DVC runs stages one after another) and run each in a
    fork; a request for a module not in ``stages`` (default: dvc.yaml's ``STAGE_MODULES``) is refused with one
    line and runs nothing. It listens before it imports ``modules``: a stage process that connects meanwhile
    waits for the warm-up instead of importing everything itself. Nothing may start threads or parallel torch
    work here before forking."""
    allowed = frozenset(stages)
    server_pid = os.getpid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    gc.disable()  # Python's recipe for fork without exec (gc.freeze docs): no collections leave holes in pages
    warm_up(modules, calls)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # stops on SIGTERM whatever an import installed; forks die with it
    while True:
        conn, _ = listener.accept()
        with conn:
            try:
                request, fds = _receive(conn)
            except (ConnectionError, ValueError):
                continue
            if refused := refusal(request, allowed):
                for fd in fds:
                    os.close(fd)
                with contextlib.suppress(OSError):
                    conn.sendall(f"{refused}\n".encode())
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            gc.freeze()  # everything so far: the fork's collections skip it (0.31 -> 0.04 s to start a stage)
            pid = os.fork()
            if pid == 0:
                die_with_server(server_pid)
                listener.close()
                conn.close()
                _run_fork(request, fds)
            for fd in fds:
                os.close(fd)
            conn.sendall(f"{pid}\n".encode())
            code = _wait(conn, pid)
            try:
                conn.sendall(f"{code}\n".encode())
            except OSError:
                pass


if __name__ == "__main__" and sys.argv[1:2] == ["--serve"]:
    serve(sys.argv[2])
