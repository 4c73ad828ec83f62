"""What a seed worker accepts as a cell (``flows.cell_guard``, issue 43 item 1), on the project's own params files:
the parameters ``seed sweep --pool`` builds (``flows.sweep_pool.pool_cells``) pass, labels a sweep may set pass,
and every way a cell could name something else on the worker's machine is refused with the key in the reason.
The worker, the server and the refused state are tested for real in ``tests/flows/test_worker_refusal.py``."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from flows.cell_guard import cell_refusal, free_text_keys
from flows.sweep_pool import pool_cells
from seed_core.config import project_root
from seed_core.loader import load_config, with_overrides
from seed_core.sweep.cells import cell_key

ROOT = project_root()


def sweep_cell(tmp_path: Path, preset: Path | None = None, **overrides: Any) -> dict[str, Any]:
    """Seed 0's flow-run parameters as ``seed sweep --pool`` builds them from ``preset`` (default params.yaml)."""
    cfg = load_config(preset or ROOT / "params.yaml", {"sweep.seeds": [0], **overrides})
    todo, _, _ = pool_cells(cfg.model_dump(mode="json"), tmp_path / "base", "", "sqlite:////tmp/mlflow.db", None)
    return todo[0].parameters


def test_the_cells_a_sweep_submits_pass(tmp_path: Path) -> None:
    assert cell_refusal(sweep_cell(tmp_path), ROOT) is None
    assert cell_refusal(sweep_cell(tmp_path, ROOT / "presets" / "smollm2-sokoban.yaml"), ROOT) is None
    labelled = sweep_cell(tmp_path, **{"tracking.experiment": "sweep-lab", "rl.lr": 2e-6})
    assert cell_refusal(labelled, ROOT) is None


@pytest.mark.parametrize("key, value", [("generation.vllm.python", "/bin/sh"), ("model.path", "/etc"),
                                        ("rl.static_skills_dir", "/home"), ("project.data_dir", "/tmp/x"),
                                        ("generation.vllm.extra_args", ["--worker-extension-cls", "evil.X"]),
                                        ("env.search_qa.retriever_url", "http://evil:1")])
def test_free_text_that_is_not_the_projects_is_refused(tmp_path: Path, key: str, value: Any) -> None:
    why = cell_refusal(sweep_cell(tmp_path, **{key: value}), ROOT)
    assert why and f"{key}={value!r}" in why and "unlike params.yaml" in why, why


def test_every_path_program_and_host_key_is_free_text() -> None:
    keys = set(free_text_keys())
    assert {"generation.vllm.python", "generation.vllm.extra_args", "model.path", "project.accelerate_config",
            "rl.analyzer_checkpoint", "env.search_qa.retriever_url", "generation.vllm.base_url"} <= keys
    assert not keys & {"rl.lr", "rl.algorithm", "sweep.methods", "tracking.experiment"}


def _with(parameters: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**parameters, **changes}


@pytest.mark.parametrize("change, named", [
    ({"key": "../../outside"}, "its key '../../outside' is not its config's"),
    ({"seed": 1}, "its parameter seed=1"),
    ({"cells_dir": "/home/user/.ssh"}, "its parameter cells_dir='/home/user/.ssh'"),
    ({"base_model": "relative/dir"}, "its parameter base_model"),
    ({"parent_host": "h; rm -rf /"}, "its parameter parent_host"),
    ({"tracking_uri": "ftp://x"}, "its parameter tracking_uri='ftp://x'"),
    ({"base_model_md5": "x" * 32}, "its parameter base_model_md5"),
    ({"extra": 1}, "its parameters are not a cell's (unknown extra)"),
    ({"config": {"rl": {"rounds": 10**9}}}, "rl.rounds = 1000000000"),
    ({"config": "x"}, "its parameter config is not a mapping"),
])
def test_parameters_that_are_not_a_cell_are_refused(tmp_path: Path, change: dict[str, Any], named: str) -> None:
    why = cell_refusal(_with(sweep_cell(tmp_path), **change), ROOT)
    assert why and named in why, why


def test_a_missing_parameter_is_refused(tmp_path: Path) -> None:
    parameters = sweep_cell(tmp_path)
    del parameters["key"]
    assert cell_refusal(parameters, ROOT) == "its parameters are not a cell's (missing key)"


def test_the_key_is_the_cells_own(tmp_path: Path) -> None:
    parameters = sweep_cell(tmp_path)
    cfg = with_overrides(load_config(ROOT / "params.yaml", {"sweep.seeds": [0]}), {"project.seed": 0})
    assert parameters["key"] == cell_key(cfg, "") and parameters["parent_host"] == socket.gethostname()
