"""Process groups that die with the process that started them, however it ends (issue 43 item 2).

A pipeline run starts its servers (Prefect, MLflow, the warm stage server) and ``dvc`` each in a process group of its
own, and registers each group here (``watch``). The first ``watch`` starts this process's reaper: ``python -I
seed_app/reaper.py``, in a session of its own (a Ctrl-C or a hang-up of the terminal does not reach it), whose stdin
is a pipe from the run. The kernel closes that pipe when the run's process ends, whatever ends it (SIGKILL too), and
the reaper then stops every group still registered: SIGTERM, then SIGKILL to what is left after ``GRACE_S``. A run
that stops a group itself unregisters it afterwards (``forget``), so a PID reused later is never signalled.

Why a pipe and not ``PR_SET_PDEATHSIG`` in each server: the death signal reaches only the direct child, not the
workers and forks of its group (MLflow's uvicorn, the warm server's stage forks); it fires when the *thread* that
started the child ends, not the process (servers may be started off the main thread, in a served run); and it is
Linux only. EOF on a pipe whose only writer is the run has none of these limits. Why a process and not a thread: a
thread dies with the run. The reaper imports the standard library only (``-I``: ~20 ms, a few MB).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

GRACE_S = 3.0
"""Seconds the reaper gives a group after SIGTERM before SIGKILL: a run that died needs no graceful shutdown, and a
Prefect flow in a stage fork turns SIGTERM into an exception and tries to report to servers that are stopping."""

_guard = threading.Lock()
_reaper: subprocess.Popen[str] | None = None


def watch(pgid: int) -> None:
    """Stop process group ``pgid`` when this process ends, unless ``forget`` is called first."""
    _send(f"+{pgid}")


def forget(pgid: int) -> None:
    """This process stopped group ``pgid`` itself (or it ended): the reaper no longer stops it."""
    _send(f"-{pgid}")


def reaper_pid() -> int | None:
    """The PID of this process's reaper, None before the first ``watch``."""
    return _reaper.pid if _reaper is not None else None


def _send(line: str) -> None:
    global _reaper
    with _guard:
        if _reaper is None or _reaper.poll() is not None:
            if line.startswith("-"):
                return  # nothing registered with a reaper that is not there
            _reaper = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__)], stdin=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
                                       start_new_session=True)
        assert _reaper.stdin is not None
        _reaper.stdin.write(line + "\n")
        _reaper.stdin.flush()


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:  # a reused PID of another user's: not ours to stop
        return False


def stop_groups(groups: set[int], grace_s: float = GRACE_S) -> None:
    """SIGTERM every group, SIGKILL those left after ``grace_s``, and wait (up to 5 s) until they are gone."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        for pgid in groups:
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait_s
        while (groups := {pgid for pgid in groups if _alive(pgid)}) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not groups:
            return


def main() -> None:
    """The reaper: read ``+pgid`` / ``-pgid`` lines until EOF (the run has ended), then stop what is registered."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    for line in sys.stdin:
        line = line.strip()
        if line[1:].isdigit():
            (groups.add if line[0] == "+" else groups.discard)(int(line[1:]))
    stop_groups(groups)


if __name__ == "__main__":
    main()
