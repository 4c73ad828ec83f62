"""A launched rank stops when its launcher is gone (``die_with_parent``).

torch elastic, under ``accelerate launch``, starts every rank in a session of its own (``start_new_session``: its
``SubprocessHandler``), so neither a Ctrl-C in the terminal nor the run's process-group reaper
(``seed_app/reaper.py``) reaches the ranks; they are stopped only by their launcher. A launcher that dies first (the
reaper's SIGKILL after its grace, the OOM killer) leaves them re-parented and training on, holding memory, the
gloo ports and their vLLM engines: an interrupted rehearsal left both ranks of ``rl@seed_static`` running, found
2026-12-04. A daemon thread here notices the re-parenting (``os.getppid()`` changes) and ends the rank: SIGTERM to
itself (Python's default action ends the process; the vLLM engines watch their parent and stop with it), then
``os._exit`` should a handler keep it alive past ``grace_s``. Standard library only.
"""

from __future__ import annotations

import os
import signal
import threading
import time

ELASTIC_ENV = "TORCHELASTIC_RUN_ID"
"""Set by torch elastic in every rank it starts: where ``watch_launcher`` turns the watch on."""


def die_with_parent(poll_s: float = 1.0, grace_s: float = 10.0) -> threading.Thread:
    """Start the watch of this process's parent (as it is now) and return its daemon thread."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        os._exit(128 + signal.SIGTERM)

    thread = threading.Thread(target=watch, name="die-with-parent", daemon=True)
    thread.start()
    return thread


_watching: list[threading.Thread] = []


def watch_launcher() -> threading.Thread | None:
    """``die_with_parent`` once per process in a rank that torch elastic started, else nothing (a process of one's
    own choosing may outlive its parent)."""
    if os.environ.get(ELASTIC_ENV) and not _watching:
        _watching.append(die_with_parent())
    return _watching[0] if _watching else None
