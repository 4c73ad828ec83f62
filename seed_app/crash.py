"""The one error path of an unexpected exception in a ``seed`` command: one line on stderr, the traceback in a log.

A bad input has its own line and exit code 2 (``seed_app.cli_base``); anything else a command did not foresee
(a bug, a read-only workspace, a checkpoint without weights) used to end in typer's two pretty tracebacks, 137-170
lines that buried the cause. ``SeedGroup.main`` hands such an exception to ``report``, which writes the full
traceback to a log file and returns the one line to print (exit code 1):

    seed preflight: unexpected OSError: <message> (at seed_core/modeling/models.py:88 in load_policy); traceback in <log>

The place is the innermost frame of this project's own code (not a library's), so the line says where our code
failed even when the exception came from deep inside transformers or DVC.

Where the log goes (``log_dir``): ``$XDG_STATE_HOME/seed/errors`` (default ``~/.local/state/seed/errors``), the
XDG base-directory place for logs, outside the workspace so that a read-only or broken checkout still gets one;
when that is not writable, ``<tmp>/seed-errors-<uid>``. The newest ``KEEP`` logs are kept.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Sequence

KEEP = 50
"""How many error logs ``write_log`` keeps (the oldest beyond these are deleted)."""
MAX_MESSAGE = 300
"""The exception's message is cut to this many characters on the line (the log holds all of it)."""
ROOT = Path(__file__).resolve().parents[1]
"""The project root: frames of files under it (but not under a hidden folder such as ``.venv``) are ours."""


def log_dir() -> Path:
    """``$XDG_STATE_HOME/seed/errors``, else ``~/.local/state/seed/errors`` (the XDG default)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "seed" / "errors"


def fallback_dir() -> Path:
    """Where the log goes when ``log_dir`` cannot be written: a per-user folder of the system's temp dir."""
    return Path(tempfile.gettempdir()) / f"seed-errors-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


def project_frame(err: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of ``err``'s traceback in this project's own files; the innermost frame at all when
    none is ours (an error inside a library called from typer itself); None without a traceback."""
    frames = traceback.extract_tb(err.__traceback__)
    ours = [f for f in frames if is_ours(f.filename)]
    return (ours or frames or [None])[-1]


def is_ours(filename: str) -> bool:
    """Whether ``filename`` is a file of this checkout, not of an environment inside it (``.venv/``)."""
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return False
    return not any(part.startswith(".") or part == "site-packages" for part in rel.parts)


def where(frame: traceback.FrameSummary | None) -> str:
    """``seed_core/modeling/models.py:88 in load_policy`` (relative to the project when ours)."""
    if frame is None:
        return "no traceback"
    path = Path(frame.filename)
    shown = path.resolve().relative_to(ROOT).as_posix() if is_ours(frame.filename) else str(path)
    return f"{shown}:{frame.lineno} in {frame.name}"


def log_text(err: BaseException, argv: Sequence[str]) -> str:
    """What the log holds: the command line, where it ran, and the whole traceback (chained causes too)."""
    head = [f"command: seed {' '.join(argv)}", f"cwd: {os.getcwd()}", f"project: {ROOT}",
            f"python: {sys.executable} {sys.version.split()[0]}", f"time: {time.strftime('%Y-%m-%d %H:%M:%S')}", ""]
    return "\n".join(head) + "".join(traceback.format_exception(err))


def write_log(err: BaseException, argv: Sequence[str], command: str) -> Path:
    """Write ``log_text`` to a new file in ``log_dir`` (or ``fallback_dir``); its path. Raises OSError when
    neither can be written."""
    name = f"seed-{command or 'seed'}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    text = log_text(err, argv)
    failure: OSError | None = None
    for folder in (log_dir(), fallback_dir()):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(text)
        except OSError as exc:
            failure = exc
            continue
        prune(folder)
        return folder / name
    assert failure is not None
    raise failure


def prune(folder: Path, keep: int = KEEP) -> None:
    """Delete all but the newest ``keep`` error logs in ``folder`` (a failure to delete is no error)."""
    logs = sorted(folder.glob("seed-*.log"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in logs[keep:]:
        try:
            old.unlink()
        except OSError:
            pass


def message(err: BaseException) -> str:
    """The exception's message on one line, cut to ``MAX_MESSAGE`` characters."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    text = "; ".join(lines) or "(no message)"
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def report(err: BaseException, argv: Sequence[str], command: str) -> str:
    """The one line for ``err`` raised by ``seed <command>``, after writing its traceback to a log (the line
    names the log, or why none could be written)."""
    try:
        saved = f"traceback in {write_log(err, argv, command)}"
    except OSError as exc:
        saved = f"no traceback log: {log_dir()} and {fallback_dir()} cannot be written ({exc.strerror or exc})"
    name = f"seed {command}" if command else "seed"
    return f"{name}: unexpected {type(err).__name__}: {message(err)} (at {where(project_frame(err))}); {saved}"
