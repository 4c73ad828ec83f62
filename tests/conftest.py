"""Shared test setup: offline/no-telemetry environment, 2 torch threads, a tiny model, gpu/slow markers."""

from __future__ import annotations

import os

for _name, _value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "true",
                      "MLFLOW_DISABLE_TELEMETRY": "true", "TOKENIZERS_PARALLELISM": "false"}.items():
    os.environ[_name] = _value

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

# One intra-op thread: tiny models are dominated by per-op overhead, and test processes share the cores.
torch.set_num_threads(1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``gpu`` tests without CUDA; run ``slow`` tests only with SEED_RUN_SLOW=1 or ``-m slow``."""
    markexpr = config.getoption("markexpr") or ""
    run_slow = os.environ.get("SEED_RUN_SLOW") == "1" or ("slow" in markexpr and "not slow" not in markexpr)
    skip_gpu = pytest.mark.skip(reason="needs CUDA (no GPU on this machine)")
    skip_slow = pytest.mark.skip(reason="slow test: set SEED_RUN_SLOW=1 or pass -m slow")
    for item in items:
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(skip_gpu)
        if "slow" in item.keywords and not run_slow:
            item.add_marker(skip_slow)


def order_seed_line(config: pytest.Config) -> str | None:
    """``test order: --randomly-seed=N ...`` when pytest-randomly orders this run (the dev extras install it), else
    None (``-p no:randomly``)."""
    if not config.pluginmanager.hasplugin("randomly"):
        return None
    seed = config.getoption("randomly_seed")
    return (f"test order: random, --randomly-seed={seed} (pytest-randomly; rerun this order with that option, the "
            "file order with -p no:randomly)")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Print the order's seed first, also under -q (which drops pytest-randomly's header line, as in .ci/run)."""
    line, reporter = order_seed_line(session.config), session.config.pluginmanager.getplugin("terminalreporter")
    if line and reporter is not None:
        reporter.write_line(line)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """And again at the end, beside the failures a random order may have shown."""
    line = order_seed_line(config)
    if line:
        terminalreporter.write_line(line)


PREFECT_DRAIN_S = float(os.environ.get("SEED_TEST_PREFECT_DRAIN_S", "60"))
"""Seconds the session's end gives Prefect's queued events and logs (``EventsWorker``, ``APILogWorker``)."""
_EXIT_STATUS = pytest.StashKey[int]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Bound the test process's exit: Prefect sends what its workers still queue at interpreter exit, and to a server
    a test has stopped that costs ~7 s per event (reconnection attempts: 20 events took 145 s, measured), so a few
    hundred events queued for a stopped server hung a CI run for tens of minutes. Drain them for up to
    ``PREFECT_DRAIN_S`` while this process can still say so; whatever is left cannot be delivered, so the process ends
    now with the session's exit status (``os._exit``: the rest of atexit would only retry the dead server)."""
    import sys

    if "prefect" not in sys.modules:
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    pending = [f for worker in (APILogWorker, EventsWorker)
               for f in worker.drain_all(timeout=PREFECT_DRAIN_S)[1]]  # type: ignore[index]
    if pending:
        print(f"tests: {len(pending)} Prefect worker(s) still sending to a stopped server after "
              f"{PREFECT_DRAIN_S:.0f} s; ending the test process without them", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(config.stash.get(_EXIT_STATUS, 1))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~1M-parameter random Qwen2 + trained BPE tokenizer with a ChatML template (built once, < 1 s)."""
    from seed_core.modeling.builders import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("models") / "tiny-qwen2")


@pytest.fixture
def tiny_policy(tiny_model_dir: Path):
    """A fresh trainable Policy on the tiny model (cpu, fp32)."""
    from seed_core.config import ModelConfig
    from seed_core.modeling.models import load_policy

    return load_policy(ModelConfig(path=str(tiny_model_dir), device="cpu"))
