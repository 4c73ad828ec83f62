"""A pipeline run's ``dvc`` and what one Ctrl-C does to it: the run stops in one line and leaves nothing behind.

Issue 43 item 2: after one SIGINT during ``collect``, ``subprocess.run`` killed ``dvc`` 0.25 s later (its own rule
for a ``KeyboardInterrupt``), the run stopped Prefect and MLflow at once, and the stage, still unwinding, retried the
stopped servers for about a minute (29 lines of urllib3 retries and a Prefect ``EventsWorker`` dump), while its warm
server fork stayed behind. The order is now the other way round:

* ``run_dvc`` starts ``dvc`` in a process group of its own (the run's reaper stops that group if the run is killed,
  ``seed_app.reaper``), so the terminal's SIGINT reaches the ``seed`` process only, and pipes its output through
  this process (``_pump``; a pseudo-terminal when this process writes to one, so colours and line buffering stay).
* On a ``KeyboardInterrupt`` it sends one SIGINT to that group (DVC ignores it while a stage runs; the stage process
  hands it to its warm-server fork) and waits up to ``STOP_S`` for DVC to end, SIGKILL after that or at a second
  Ctrl-C, before it lets the interrupt go on: the servers stop after the stage is gone, never under it.
* ``reported`` (around a ``seed`` command) makes the first SIGINT send everything written afterwards, by this
  process and through the pipes, to a log (``.tmp/interrupted/<pid>.log``: Prefect's "crash" lines, DVC's error,
  the stage's traceback), and ends the command with exit code 130 and one line saying which stage was running,
  that finished stages are kept, the command that resumes, and where the log is.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

STOP_S = 30.0
"""Seconds a stage gets after Ctrl-C to end (a Prefect flow reports its crash, MLflow ends its run: ~1-3 s)."""
RUNNING = re.compile(rb"Running stage '([^']+)'")
"""DVC's line when it starts a stage (``dvc/stage/run.py`` ``cmd_run``)."""

_state: dict[str, Any] = {"stage": None, "log": None, "saved": None}


def log_path() -> Path:
    from seed_core.config import project_root

    return project_root() / ".tmp" / "interrupted" / f"{os.getpid()}.log"


def _quiet() -> None:
    """From now on fds 1 and 2 of this process (and so everything the pumps copy) go to ``log_path``."""
    if _state["saved"] is not None:
        return

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a flush inside a write it interrupted: RuntimeError (reentrant)
            stream.flush()
    path = log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    _state["saved"] = (os.dup(1), os.dup(2))
    _state["log"] = path
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def _restore() -> None:
    if _state["saved"] is None:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    for target, fd in zip((1, 2), _state["saved"]):
        os.dup2(fd, target)
        os.close(fd)
    _state["saved"] = None


def _on_sigint(signum: int, frame: Any) -> None:
    _quiet()
    raise KeyboardInterrupt


def line(command: str, resume: str) -> str:
    """The one line of an interrupted ``command``."""
    stage = _state["stage"]
    where = f"during stage {stage!r}" if stage else "before any stage ran"
    keep = (f"the stages that finished are kept; `{resume}` resumes from {stage!r}" if stage else
            f"`{resume}` starts it again")
    log = f"; what it printed after the interrupt is in {_state['log']}" if _state["log"] else ""
    return f"{command}: interrupted (Ctrl-C) {where}; {keep}{log}"


@contextlib.contextmanager
def reported(command: str, resume: str) -> Iterator[None]:
    """Around a command that runs the pipeline: its first SIGINT quiets the terminal (``_quiet``) and ends it with
    ``line`` on stderr and exit code 130 (``typer.Exit``), once the run has cleaned up after itself."""
    import typer

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    _state.update(stage=None, log=None)
    try:
        yield
    except KeyboardInterrupt:
        _restore()
        typer.echo(line(command, resume), err=True)
        raise typer.Exit(130) from None
    finally:
        _restore()
        signal.signal(signal.SIGINT, previous)


def _channel(target: int) -> tuple[int, int]:
    """(read end, write end) for a child's output bound for ``target``: a pseudo-terminal of the same size when
    ``target`` is a terminal (the child's own checks for one still hold), else a pipe."""
    if not os.isatty(target):
        return os.pipe()

    master, slave = pty.openpty()
    with contextlib.suppress(OSError):
        fcntl.ioctl(slave, termios.TIOCSWINSZ, fcntl.ioctl(target, termios.TIOCGWINSZ, b"\0" * 8))
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST  # bytes as written: no \n -> \r\n on the way
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    return master, slave


def _pump(src: int, target: int, seen: Callable[[bytes], None]) -> threading.Thread:
    """Copy ``src`` to this process's fd ``target`` until the child side closes (EOF, or EIO on a pty)."""
    def copy() -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(src, 1 << 16):
                seen(chunk)
                with contextlib.suppress(OSError):  # a closed terminal: keep draining, or the child blocks
                    while chunk:
                        chunk = chunk[os.write(target, chunk):]
        os.close(src)

    thread = threading.Thread(target=copy, name=f"seed-dvc-output-{target}", daemon=True)
    thread.start()
    return thread


def _track_stage() -> Callable[[bytes], None]:
    """A ``seen`` callback that records in ``_state`` the last stage DVC said it runs (lines may split chunks)."""
    tail = [b""]

    def seen(chunk: bytes) -> None:
        tail[0] = (tail[0] + chunk)[-4096:]
        if found := RUNNING.findall(tail[0]):
            _state["stage"] = found[-1].decode(errors="replace")
            tail[0] = tail[0][tail[0].rfind(b"Running stage") + 1:]

    return seen


def _stop(proc: subprocess.Popen[bytes]) -> int:
    """After Ctrl-C: one SIGINT to dvc's group, up to ``STOP_S`` for it to end, then (or at a second Ctrl-C)
    SIGKILL to the group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.wait(timeout=STOP_S)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


def _wait_group(pgid: int, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def run_dvc(args: list[str], root: Path, env: dict[str, str], pass_fds: tuple[int, ...] = (),
            watch: Callable[[bytes], None] | None = None) -> int:
    """Run ``args`` (a command line) in ``root`` as described above; its exit code. A ``KeyboardInterrupt`` goes on
    once dvc and its stage have ended. ``watch`` also sees each chunk of dvc's output as it passes
    (``flows.stage_graph.CachedStages``: the stages DVC skips); stdout only, from one thread."""
    from seed_app import reaper

    channels = [_channel(1), _channel(2)]
    if not all(os.isatty(fd) for fd in (1, 2)):
        env = {**env, "PYTHONUNBUFFERED": "1"}  # live lines through a pipe
    try:
        proc = subprocess.Popen(args, cwd=root, env=env, stdin=subprocess.DEVNULL, stdout=channels[0][1],
                                stderr=channels[1][1], pass_fds=pass_fds, process_group=0)
    except BaseException:
        for fds in channels:
            for fd in fds:
                os.close(fd)
        raise
    reaper.watch(proc.pid)
    seen = _track_stage()

    def seen_out(chunk: bytes) -> None:  # stdout, where dvc logs what it runs and skips (one thread: whole lines)
        seen(chunk)
        if watch is not None:
            watch(chunk)

    for _, write in channels:
        os.close(write)  # the child's ends: EOF once it and its children are done
    pumps = [_pump(read, target, callback) for (read, _), target, callback in zip(channels, (1, 2), (seen_out, seen))]
    try:
        return proc.wait()
    except KeyboardInterrupt:
        _stop(proc)
        raise
    finally:
        _wait_group(proc.pid)
        for pump in pumps:
            pump.join(timeout=5)
        reaper.forget(proc.pid)
