"""Where a pipeline process spends its wall time: named marks (wall-clock instants) and exclusive spans.

Off unless ``$SEED_TIMING_DIR`` is set (``benchmarks/pipeline_overhead.py`` sets it). Then each process
that made a mark or closed a span writes ``<dir>/<label>-<pid>.json`` at exit with its start time (the OS
process creation time), its marks, the seconds per span and its exit time. The directory lies outside
the DVC outputs, so timing changes no hash.

Spans are exclusive: time inside a nested span counts for the inner one only, so ``engine`` inside
``mlflow`` (or the reverse) is never counted twice and the spans of a process add up to at most its wall.
The labels the pipeline uses: ``engine`` (a seed_core stage function called by a task), ``imports``
(the stage module a task imports lazily: torch, transformers), ``mlflow`` (opening and closing runs,
registering checkpoints), ``prefect`` (Prefect API calls made by seed itself).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import psutil

ENV = "SEED_TIMING_DIR"
"""Directory the timing files go to; unset = timing off (marks and spans cost one dict lookup)."""

_marks: dict[str, float] = {}
_spans: dict[str, float] = {}
_stack: list[list[Any]] = []  # [name, start of its current slice]
_registered = False


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def _register() -> None:
    global _registered
    if not _registered:
        atexit.register(write)
        _registered = True


def now() -> float:
    """Seconds on one clock shared by all processes and the OS process start times: ``CLOCK_BOOTTIME``
    (Linux). Not wall-clock time: on this VM it drifted tens of seconds within an hour from the process
    start times psutil derives from the boot time (measured here)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) if hasattr(time, "CLOCK_BOOTTIME") else time.time()


def mark(name: str) -> None:
    """Record the first time ``name`` is reached in this process (``now()``)."""
    if enabled():
        _marks.setdefault(name, now())
        _register()


@contextlib.contextmanager
def span(name: str) -> Iterator[None]:
    """Add the time spent inside (minus nested spans) to span ``name``."""
    if not enabled():
        yield
        return
    now = time.perf_counter()
    if _stack:  # pause the enclosing span
        outer = _stack[-1]
        _spans[outer[0]] = _spans.get(outer[0], 0.0) + now - outer[1]
    _stack.append([name, now])
    try:
        yield
    finally:
        now = time.perf_counter()
        inner = _stack.pop()
        _spans[inner[0]] = _spans.get(inner[0], 0.0) + now - inner[1]
        if _stack:
            _stack[-1][1] = now  # resume the enclosing span
        _register()


def label() -> str:
    """``$DVC_STAGE`` inside a DVC stage (``rl@seed``), else the program name (``seed``, ``pytest``)."""
    return os.environ.get("DVC_STAGE") or Path(sys.argv[0] or "python").name


def process_start() -> float:
    """When the OS created this process, on the ``now()`` clock (``/proc/self/stat`` start time; the
    interpreter start-up and imports come after it)."""
    stat = Path("/proc/self/stat")
    if hasattr(time, "CLOCK_BOOTTIME") and stat.is_file():
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of proc(5): starttime in clock ticks

    return psutil.Process().create_time()


def snapshot() -> dict[str, Any]:
    """This process's timing record so far (``exit`` = now; times on the ``now()`` clock)."""
    return {"label": label(), "pid": os.getpid(), "argv": sys.argv, "process_start": process_start(),
            "marks": dict(_marks), "spans_s": dict(_spans), "exit": now()}


def write() -> Path | None:
    """Write the record to ``$SEED_TIMING_DIR`` (atomic); called at exit once anything was recorded."""
    directory = os.environ.get(ENV)
    if not directory:
        return None
    record = snapshot()
    path = Path(directory) / f"{record['label'].replace('@', '_').replace('/', '_')}-{record['pid']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(path)
    return path
