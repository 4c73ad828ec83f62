"""Engine logging (``seed_core.runtime.logs``): one format on stderr for the engine entry points, and the whole-stage
progress line with its ETA (mean seconds per finished unit x units left)."""

from __future__ import annotations

import logging
import re
from typing import Iterator

import pytest

from seed_core.runtime import logs


@pytest.fixture
def clean_seed_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger("seed_core")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    logger.handlers[:] = []  # an engine entry point run by an earlier test may have configured it
    yield logger
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


def test_progress_logs_each_unit_with_the_eta_from_the_mean_unit_time(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    clock = iter([100.0, 110.0, 130.0, 160.0])  # start, then three finished units: 10 s, 20 s, 30 s
    monkeypatch.setattr(logs.time, "monotonic", lambda: next(clock))
    caplog.set_level(logging.INFO, logger="seed_core")
    with logs.Progress(logging.getLogger("seed_core.test"), "sft", 4, "step", every_s=0.0, bar=False) as bar:
        bar.update(1, loss="0.500")
        bar.update(1)
        bar.update(2)
    assert [r.getMessage() for r in caplog.records] == [
        "sft: step 1/4 done, 0m10s elapsed, ETA 0m30s, loss 0.500",  # 10 s per step x 3 left
        "sft: step 2/4 done, 0m30s elapsed, ETA 0m30s",              # 15 s per step x 2 left
        "sft: step 4/4 done, 1m00s elapsed",
    ]


def test_progress_logs_at_most_every_every_s_and_always_at_the_end(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    clock = iter([0.0, 1.0, 2.0, 31.0, 32.0])
    monkeypatch.setattr(logs.time, "monotonic", lambda: next(clock))
    caplog.set_level(logging.INFO, logger="seed_core")
    bar = logs.Progress(logging.getLogger("seed_core.test"), "annotate", 4, "trajectory", every_s=30.0, bar=False)
    for _ in range(4):
        bar.update(1)
    assert [r.getMessage().split(",")[0] for r in caplog.records] == ["annotate: trajectory 3/4 done",
                                                                       "annotate: trajectory 4/4 done"]


def test_configure_writes_one_format_to_stderr_at_the_chosen_level(
        clean_seed_logger: logging.Logger, capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure("INFO")
    logs.configure("INFO")  # a second call adds no second handler
    logging.getLogger("seed_core.stages.collect").info("collect: %d tasks", 4)
    logging.getLogger("seed_core.stages.collect").debug("hidden")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO seed_core\.stages\.collect: collect: 4 tasks",
                        lines[0]), lines
