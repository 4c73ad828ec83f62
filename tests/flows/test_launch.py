"""The DVC launcher and the `seed` CLI: exact DVC commands, typed overrides, and bad input stopping
before any work (no params.yaml change, no MLflow run, no DVC call)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from flows.common import parse_args
from seed_app.cli import parse_overrides
from seed_app.dvc_run import dvc_command, run_pipeline
from seed_core.config import ConfigError, project_root


def test_dvc_command_is_repro_unless_an_experiment_is_asked_for() -> None:
    assert dvc_command({}, None, experiment=False) == ["dvc", "repro"]
    assert dvc_command({"rl.opd_coef": 0.02, "eval.splits": ["a", "b"], "rl.algorithm": "grpo"}, "abl", False) == [
        "dvc", "exp", "run", "-n", "abl", "-S", "rl.opd_coef=0.02", "-S", 'eval.splits=["a", "b"]',
        "-S", "rl.algorithm=grpo"]
    assert dvc_command({}, None, experiment=True) == ["dvc", "exp", "run"]


def test_cli_overrides_are_typed_yaml_values() -> None:
    assert parse_overrides(["rl.opd_coef=0.02", "eval.splits=[a, b]", "rl.algorithm=grpo", "x.y=true"]) == {
        "rl.opd_coef": 0.02, "eval.splits": ["a", "b"], "rl.algorithm": "grpo", "x.y": True}
    with pytest.raises(ConfigError, match="KEY=VALUE"):  # the CLI prints it as one line, exit 2
        parse_overrides(["rl.opd_coef"])


def test_a_bad_preset_or_override_stops_before_any_work(tmp_path: Path, mlflow_uri: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    calls: list[object] = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: calls.append(a))  # would be the DVC call
    params_before = (project_root() / "params.yaml").read_text()
    preset = yaml.safe_load(params_before)
    preset["rl"]["gate_beta"] = "sharp"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(preset))
    with pytest.raises(ConfigError, match=r"rl.gate_beta = 'sharp'"):
        run_pipeline(bad)
    with pytest.raises(ConfigError, match="rl.opd_coeff"):
        run_pipeline(None, {"rl.opd_coeff": 0.1})
    assert calls == []
    assert (project_root() / "params.yaml").read_text() == params_before


def test_a_stage_with_a_malformed_params_file_exits_naming_the_key(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "params.yaml"
    bad.write_text("env:\n  max_step: 3\n")
    monkeypatch.setattr(sys, "argv", ["flows.collect", "--params", str(bad)])
    with pytest.raises(SystemExit) as stop:
        parse_args("collect")
    assert "env.max_step: unknown key" in str(stop.value.code)
