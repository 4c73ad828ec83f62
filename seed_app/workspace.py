"""The workspace lock: one seed command at a time writes ``params.yaml`` or runs stages in a project.

The rule: ``seed run`` (all but its read-only "every stage is up to date" path), ``seed sweep``, ``seed stage``
and every run of the ``seed serve`` deployment (``seed_app.dvc_run.run_pipeline``) hold ``.tmp/workspace.lock``
from before their first write to ``params.yaml`` and before any server starts, until they end. A second one
fails at once (``Busy``: exit code 2 and one line on the command line) naming the holder's PID and command line,
which the holder writes to ``.tmp/workspace.lock.json`` once it has the lock (and removes when it lets go).

Why: DVC's own lock is taken only when ``dvc repro`` starts, after a preset was copied over ``params.yaml``, so a
second ``seed run --preset X`` used to rewrite the params a running pipeline's next stage read (issue 26).

The lock is an OS lock (``flock``, through the maintained ``filelock``): the kernel drops it when its last
holder exits or is killed, so a killed run never leaves a stale lock, only a stale side file that the next
holder overwrites. The ``dvc`` process a holder starts inherits it (``inherited_fds``, for ``pass_fds``): a
``dvc repro`` left running by a killed ``seed run`` still holds the workspace. Nested holds in one process
(``seed run`` -> its flow -> ``run_pipeline``) share the one lock, from any thread.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import psutil
from filelock import FileLock, Timeout

from seed_core.config import project_root

LOCK_FILE, HOLDER_FILE = ".tmp/workspace.lock", ".tmp/workspace.lock.json"
"""The lock and the side file naming its holder, under the project root (git-ignored ``.tmp/``)."""
F = TypeVar("F", bound=Callable[..., Any])
_fds: dict[str, int] = {}  # lock path -> the descriptor holding it, while this process holds it


class Busy(RuntimeError):
    """Another process holds the workspace; the message names it and what to do."""


@functools.lru_cache(maxsize=None)
def _on_acquired(path: str) -> Callable[[int], None]:
    """Remembers the descriptor that holds ``path``; one callable per path, as the singleton lock (one instance per
    path and process) needs the same options every time."""
    return functools.partial(_fds.__setitem__, path)


def _lock(root: Path) -> FileLock:
    path = root / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(path, is_singleton=True, thread_local=False, on_acquired=_on_acquired(str(path)))


@contextlib.contextmanager
def hold(root: Path | None = None, command: str | None = None) -> Iterator[Path]:
    """Hold the workspace of ``root`` (default: this project) for the block, or raise ``Busy`` at once, without
    waiting. ``command``: what the side file names as the holder (default: this process's command line). A nested
    hold in the same process only counts (the outermost one names the holder and lets go). Yields the root."""
    root = (root or project_root()).resolve()
    lock = _lock(root)
    try:
        lock.acquire(blocking=False)
    except Timeout:
        raise Busy(busy_message(root)) from None
    outermost = lock.lock_counter == 1
    try:
        if outermost:
            _write_holder(root, command or command_line())
        yield root
    finally:
        if outermost:
            _fds.pop(str(root / LOCK_FILE), None)
            with contextlib.suppress(OSError):
                (root / HOLDER_FILE).unlink()
        lock.release()


def exclusive(func: F) -> F:
    """``func`` runs holding this project's workspace (``hold``)."""
    @functools.wraps(func)
    def held(*args: Any, **kwargs: Any) -> Any:
        with hold():
            return func(*args, **kwargs)
    return held  # type: ignore[return-value]


def inherited_fds(root: Path | None = None) -> tuple[int, ...]:
    """For ``subprocess`` ``pass_fds``: the descriptor this process holds the workspace lock with (none when
    it does not hold it), so the child (``dvc``) holds the workspace as long as it lives."""
    fd = _fds.get(str((root or project_root()).resolve() / LOCK_FILE))
    return () if fd is None else (fd,)


def command_line() -> str:
    """This process's command as the user typed it (``seed run --preset x``; ``python -m seed_app.cli`` reads as
    ``seed``), or the Prefect flow run a runner (``seed serve``) started this process for."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    if program in ("seed", "cli.py"):
        return shlex.join(["seed", *sys.argv[1:]])
    if flow_run := os.environ.get("PREFECT__FLOW_RUN_ID"):
        return f"Prefect flow run {flow_run}"
    return shlex.join([program, *sys.argv[1:]])


def _write_holder(root: Path, command: str) -> None:
    """The side file, atomically (written beside it, then renamed): a reader sees the whole record or none."""
    path = root / HOLDER_FILE
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"pid": os.getpid(), "command": command, "since": time.time(), "root": str(root)}))
    os.replace(tmp, path)


def holder(root: Path) -> dict[str, Any] | None:
    """The side file's record (pid, command, since, root) if it names a live process that existed when it took the
    lock (not a PID reused since) and holds this workspace, else None: no holder, a killed one, one that has not
    written it yet, or a side file copied along with the workspace from another one (``cp -a`` during a run)."""
    try:
        record = json.loads((root / HOLDER_FILE).read_text())
        started = psutil.Process(int(record["pid"])).create_time()
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return None
    if record.get("root", str(root)) != str(root):
        return None
    return record if started <= float(record.get("since", 0)) + 1 else None


def busy_message(root: Path, wait_s: float = 0.2) -> str:
    """``the workspace <root> is in use by PID <pid> (<command>); ...``: the holder read from the side file (waiting
    up to ``wait_s`` for a holder that has just taken the lock to write it), else the process that has the lock
    file open."""
    deadline = time.monotonic() + wait_s
    while (record := holder(root)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if record is None and (record := lock_opener(root)) is not None:
        record["command"] += ", left running by a seed command that has exited"
    who = f"PID {record['pid']} ({record['command']})" if record else "another process"
    return f"the workspace {root} is in use by {who}; wait for it or stop it"


def lock_opener(root: Path) -> dict[str, Any] | None:
    """The pid and command line of another process that has the lock file open (a ``dvc`` whose ``seed`` was
    killed still holds it), for when the side file names no live holder; None if none is visible."""
    path = str(root / LOCK_FILE)
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if proc.pid != os.getpid() and any(f.path == path for f in proc.open_files()):
                return {"pid": proc.pid, "command": shlex.join(proc.info["cmdline"] or ["?"])}
    return None


def check(root: Path | None = None) -> None:
    """Raise ``Busy`` when the side file names a live holder, without taking the lock or writing anything: a
    command refuses at once, before its slow first steps (the config load imports torch, ~1 s; ``dvc status``
    waits on DVC's lock), and ``hold`` still refuses the rare holder this misses (one that has not written
    the side file yet, or a ``dvc`` left by a killed holder)."""
    root = (root or project_root()).resolve()
    if holder(root) is not None:
        raise Busy(busy_message(root, wait_s=0))
