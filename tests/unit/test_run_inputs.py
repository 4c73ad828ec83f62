"""A run's inputs snapshot (``flows.run_inputs``) against DVC's own rewrite of params.yaml: ``dvc exp run -S``
(``seed run -S``) rewrites the file with ruamel and drops the quotes of ``"no"``; the snapshot must read the file as
DVC does (YAML 1.2), or every ``seed run -S`` stops its first stage with "params.yaml changed since this run began"
(the tiny vLLM pipeline test did, CI of stop 45)."""

from __future__ import annotations

import json
from pathlib import Path

from dvc.utils.serialize import modify_yaml

from flows import run_inputs

PARAMS = 'model:\n  mixed_precision: "no"\n  path: m\ngeneration:\n  backend: hf\n'


def test_dvcs_rewrite_of_the_run_s_own_override_is_no_change(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text(PARAMS)
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    record = json.loads(run_inputs.snapshot(tmp_path, ["generation.backend"]))
    with modify_yaml(str(tmp_path / "params.yaml")) as data:  # what `dvc exp run -S generation.backend=vllm` does
        data["generation"]["backend"] = "vllm"
    assert "mixed_precision: no\n" in (tmp_path / "params.yaml").read_text()  # the quotes are gone
    assert run_inputs.changed(record) == []


def test_a_changed_value_outside_the_override_is_seen(tmp_path: Path) -> None:
    (tmp_path / "params.yaml").write_text(PARAMS)
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    record = json.loads(run_inputs.snapshot(tmp_path, ["generation.backend"]))
    with modify_yaml(str(tmp_path / "params.yaml")) as data:
        data["model"]["mixed_precision"] = "bf16"
    assert run_inputs.changed(record) == ["params.yaml"]
