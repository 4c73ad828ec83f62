"""Flow runs of seed's stages send no heartbeats unless the user chose a frequency: Prefect's sync engine waits
for its heartbeat thread (1-s sleeps) at the end of every flow run, ~0.8 s per stage process (flows.common)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings, temporary_settings

from flows import common

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_heartbeat_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in common.HEARTBEAT_VARS:
        monkeypatch.delenv(var, raising=False)


def test_a_stage_process_runs_its_flow_without_heartbeats(monkeypatch: pytest.MonkeyPatch) -> None:
    assert get_current_settings().flows.heartbeat_frequency == 180  # Prefect's default: on
    monkeypatch.setattr(sys, "argv", ["flows.report", "--params", str(ROOT / "params.yaml")])
    try:
        common.parse_args("report")  # what every stage's __main__ calls before its flow
        assert get_current_settings().flows.heartbeat_frequency is None
    finally:
        common._PROCESS_SETTINGS.close()
    assert get_current_settings().flows.heartbeat_frequency == 180


def test_a_frequency_the_user_chose_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    assert common.flow_run_settings() == {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
    monkeypatch.setenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "60")
    assert common.flow_run_settings() == {}
    monkeypatch.delenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY")
    with temporary_settings({PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 90}):  # e.g. from the user's Prefect profile
        assert common.flow_run_settings() == {}
