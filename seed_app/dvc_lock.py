"""DVC's own repository lock held for a whole pipeline run, so no other ``dvc`` changes the project under it.

Issue 43 item 4: ``dvc exp run -S rl.lr=0.5`` started beside a ``seed run`` rewrote ``params.yaml`` under the running
pipeline, which then lost a stage output and failed, and ``params.yaml`` stayed changed. The cause is in DVC: ``dvc
repro`` holds the repository lock (``.dvc/tmp/lock``) except while a stage's command runs (``unlocked_repo`` in
``dvc/stage/run.py`` releases it, so that a stage may call DVC itself), and ``dvc exp run`` takes that lock (``@locked``
on ``dvc.repo.experiments.run``) before it writes ``params.yaml``. So the lock was free for the whole of every
stage, and the other experiment wrote its params and ran its own stages beside ours.

The rule: ``hold`` takes DVC's lock in the ``seed`` process before ``params.yaml`` is written (a preset, a DVC
experiment) and keeps it until the run has put it back; the ``dvc`` the run starts inherits the descriptor that holds
it (``command``: ``python -m seed_app.dvc_lock <fd> <lock> dvc ...``) and is told that the lock is held
(``LockNoop`` for that file, DVC's own class for a repository that needs no lock), so it never lets it go between
or during stages. Another ``dvc exp run`` or ``dvc repro`` then fails to take the lock, after DVC's own 3 s of
retries, with DVC's own error ("Unable to acquire lock"), before it writes anything; another ``seed`` command is
refused earlier by the workspace lock (``seed_app.workspace``). A run that finds DVC's lock taken refuses at once
(``workspace.Busy``) naming the process that holds it.

The lock is ``zc.lockfile``'s: ``flock`` on ``.dvc/tmp/lock``, owned by the open file, not the process, so the
inherited descriptor holds it in ``dvc`` as in ``seed``, and the kernel drops it when the last of them exits (a killed
run leaves no stale lock). It is checked to be that file (same inode) before DVC runs. Not covered: a project with
``core.hardlink_lock`` set (DVC then uses a hard-link lock this does not take). Stages of this project never call
DVC's locking commands themselves; ``dvc status`` and ``dvc diff`` beside a run now wait or fail like an experiment
(``dvc --wait-for-lock status`` waits for the run), read-only ``dvc exp show`` / ``params diff`` still work.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import psutil

F = TypeVar("F", bound=Callable[..., Any])

LOCK = Path(".dvc") / "tmp" / "lock"
"""DVC's repository lock, under the project root (``Repo.tmp_dir``/lock)."""


def lock_path(root: Path) -> Path:
    return root / LOCK


def holder(path: Path) -> str:
    """``PID <pid> (<command line>)`` of the process that wrote its PID into DVC's lock file (``zc.lockfile`` writes
    `` <pid>``; so does ``hold``), else ``another process``."""
    try:
        pid = int(path.read_text().split()[0])
        return f"PID {pid} ({shlex.join(psutil.Process(pid).cmdline())})"
    except (OSError, ValueError, IndexError, psutil.Error):
        return "another process"


_held: dict[str, int] = {}  # project root -> the descriptor holding its DVC lock, while this process holds it


def exclusive(func: F) -> F:
    """``func`` runs holding this project's DVC lock (``hold``), which ``held_fd`` then names."""
    @functools.wraps(func)
    def held(*args: Any, **kwargs: Any) -> Any:
        from seed_core.config import project_root

        with hold(project_root()):
            return func(*args, **kwargs)
    return held  # type: ignore[return-value]


def held_fd(root: Path) -> int:
    """The descriptor this process holds ``root``'s DVC lock with (inside ``hold``)."""
    return _held[str(root.resolve())]


@contextlib.contextmanager
def hold(root: Path) -> Iterator[int]:
    """Hold DVC's repository lock of ``root`` for the block (without waiting: a taken lock raises
    ``workspace.Busy`` naming its holder); yields the descriptor to pass to ``command``. A nested hold of the same
    root in this process yields the same descriptor."""
    from seed_app.workspace import Busy

    if (key := str(root.resolve())) in _held:
        yield _held[key]
        return
    path = lock_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise Busy(f"DVC's lock {path} is held by {holder(path)}, a DVC command in this project; wait for it "
                       "or stop it (a seed run holds it from start to end)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f" {os.getpid()}\n".encode(), 0)  # as zc.lockfile does: who holds it
        _held[key] = fd
        yield fd
    finally:
        _held.pop(key, None)
        os.close(fd)  # releases the lock unless the dvc it was passed to still runs


def command(args: list[str], fd: int, root: Path) -> list[str]:
    """The command line that runs ``dvc <args>`` (``args`` starting with ``dvc``) holding the lock through ``fd``
    (to be passed with ``pass_fds``)."""
    assert args[0] == "dvc", args
    return [sys.executable, "-m", "seed_app.dvc_lock", str(fd), str(lock_path(root)), *args[1:]]


def _use_held_lock(fd: int, path: str) -> None:
    """Make DVC treat ``path`` as locked by this process for its whole life: every ``Repo`` DVC opens on it (the
    run's, an experiment executor's) gets a ``LockNoop``, whose lock/unlock only count. ``fd`` must hold
    ``flock`` on that very file."""
    import dvc.lock

    held, there = os.fstat(fd), os.stat(path)
    if (held.st_dev, held.st_ino) != (there.st_dev, there.st_ino):
        raise SystemExit(f"seed: descriptor {fd} does not hold DVC's lock {path}")
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours already (same open file): fails only if it is not
    real = dvc.lock.make_lock
    target = os.path.realpath(path)

    def make_lock(lockfile: str, *args: object, **kwargs: object) -> dvc.lock.LockBase:
        if os.path.realpath(lockfile) == target:
            return dvc.lock.LockNoop()
        return real(lockfile, *args, **kwargs)

    dvc.lock.make_lock = make_lock


def main(argv: list[str]) -> int:
    """``python -m seed_app.dvc_lock <fd> <lock file> <dvc arguments>``: DVC's command line, lock held."""
    _use_held_lock(int(argv[0]), argv[1])
    from dvc.cli import main as dvc_main

    return int(dvc_main(argv[2:]) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
