"""Engine logging: one format, levels, and a whole-stage progress line with an ETA.

Every engine module logs through ``logging.getLogger(__name__)`` (under the ``seed_core`` logger) and never
configures handlers itself. Who runs the engine decides where the lines go:

* an engine entry point (``python -m seed_core.stages.<stage>``) calls ``configure`` (``--log-level``, default
  ``$SEED_LOG_LEVEL`` or INFO) so lines go to stderr in ``FORMAT``;
* a Prefect flow process (``flows/__init__.py``) names ``seed_core`` in ``PREFECT_LOGGING_EXTRA_LOGGERS``, so the
  same lines also reach the flow run's logs in the Prefect UI.

``Progress`` is the whole-stage progress of long work (rounds, trajectories, optimizer steps, evaluation
rollouts): a tqdm bar on a terminal, and a log line at most every ``every_s`` seconds and at the end,
``sft: step 120/400 done, 1m02s elapsed, ETA 2m25s``, where ETA = mean seconds per unit so far x units left.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from tqdm.auto import tqdm

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LEVEL_VAR = "SEED_LOG_LEVEL"


def configure(level: str | int | None = None) -> None:
    """stderr handler in ``FORMAT`` on the ``seed_core`` logger, at ``level`` (default ``$SEED_LOG_LEVEL``
    or INFO); calling it again only changes the level."""
    logger = logging.getLogger("seed_core")
    logger.setLevel(level or os.environ.get(LEVEL_VAR, "INFO"))
    if not any(getattr(h, "_seed", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(FORMAT))
        handler._seed = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False


def duration(seconds: float) -> str:
    """``2m03s`` / ``1h04m`` / ``0m07s``."""
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{secs:02d}s"


def progress_line(unit: str, done: int, total: int, elapsed_s: float, durations: list[float]) -> str:
    """``round 3/10 done, 2m03s elapsed, ETA 4m47s``: the ETA is the mean of the ``durations`` of the units run
    so far (resumed ones left out: they cost nothing) times the units left."""
    line = f"{unit} {done}/{total} done, {duration(elapsed_s)} elapsed"
    if done < total and durations:
        line += f", ETA {duration(sum(durations) / len(durations) * (total - done))}"
    return line


class Progress:
    """Whole-stage progress over ``total`` units of ``unit``: ``update(n)`` after each finished unit(s)."""

    def __init__(self, logger: logging.Logger, desc: str, total: int, unit: str, every_s: float = 30.0,
                 bar: bool = True) -> None:
        self.logger, self.desc, self.total, self.unit, self.every_s = logger, desc, total, unit, every_s
        self.done, self.start = 0, time.monotonic()
        self.last_log = self.start
        self.bar = tqdm(total=total, desc=desc, unit=unit, leave=False, disable=not bar or None)

    def update(self, n: int = 1, **postfix: Any) -> None:
        self.done += n
        self.bar.update(n)
        if postfix:
            self.bar.set_postfix(**postfix)
        now = time.monotonic()
        if self.done >= self.total or now - self.last_log >= self.every_s:
            self.last_log = now
            elapsed = now - self.start
            per_unit = [elapsed / self.done] if self.done else []
            extra = "".join(f", {k} {v}" for k, v in postfix.items())
            self.logger.info("%s: %s%s", self.desc, progress_line(self.unit, self.done, self.total, elapsed,
                                                                  per_unit), extra)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
