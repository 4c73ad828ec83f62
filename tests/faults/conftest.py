"""Fault tests: the loopback fault server (``fault_server``) and a Stage-1 config that talks to it."""

from __future__ import annotations

import pytest

from seed_core.config import SeedConfig
from seed_core.loader import with_overrides
from tests.faults.openai_server import fault_server  # noqa: F401  (re-exported fixture)


@pytest.fixture
def openai_cfg() -> SeedConfig:
    """Stage 1 with the ``openai`` client, tuned for a loopback server: short timeout, 3 retries."""
    return with_overrides(SeedConfig(), {
        "annotate.client": "openai", "annotate.model": "fake-model", "annotate.timeout_s": 0.5,
        "annotate.max_retries": 3, "annotate.concurrency": 4, "annotate.parse_attempts": 2,
    })
