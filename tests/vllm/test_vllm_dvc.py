"""A tiny ``seed run -S generation.backend=vllm`` through DVC (every stage its own process, as in real use):
collect, RL and evaluation generate on vLLM; the per-round weight-sync monitor lands in every ``curve.csv``.

The stages share one vLLM server (``generation.vllm.base_url``; dev mode, the seed flags), reloaded in place
with each stage's weights, so the run pays one engine start (~45 s on 2 CPU cores) instead of one per
generating stage (collect + 7 RL + 10 evaluation processes). Without base_url each stage process starts its own
engine from ``generation.vllm.python`` (tests/vllm/test_vllm_rl.py runs that path)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from seed_core.rollout.vllm_engine import SERVED_NAME
from tests.flows.conftest import write_tiny_params
from tests.flows.test_dvc_repro import PROJECT_FILES, _run, commit_project, copy_project
from tests.vllm.conftest import report, vllm_server

pytestmark = pytest.mark.vllm
DIFF_MEAN, DIFF_MAX = "rollout/sampling_logp_diff_mean", "rollout/sampling_logp_diff_max"
SEED_FLAGS = ("--logprobs-mode", "processed_logprobs", "--generation-config", "vllm")
"""What seed's own engines run with (``LaunchSpec.command``): log-probs after sampling, no model defaults."""


@pytest.mark.timeout(1500)
def test_tiny_seed_run_on_vllm_through_dvc(tiny_model_dir: Path, tmp_path: Path) -> None:
    root = tmp_path / "project"
    copy_project(root, PROJECT_FILES)
    with vllm_server(tiny_model_dir, SERVED_NAME, tmp_path / "logs", *SEED_FLAGS) as server:
        write_tiny_params(root / "params.yaml", tiny_model_dir, "data", tracking={"experiment": "vllm-dvc"},
                          generation={"vllm": {"base_url": server.url, "max_model_len": 1024}})
        mlflow_uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
        env = commit_project(root, "", mlflow_uri)
        env.pop("PREFECT_API_URL")  # seed run starts the project's own Prefect server, as for a user
        env["PREFECT_HOME"] = str(root / ".prefect")
        result = _run([sys.executable, "-m", "seed_app.cli", "run", "-S", "generation.backend=vllm"], root, env)
        log = server.log_path.read_text(errors="replace")
    print(result.stdout[-1500:])
    assert "| Method |" in result.stdout and "| SEED |" in result.stdout
    lock = yaml.safe_load((root / "dvc.lock").read_text())["stages"]
    rl_stages = sorted(name for name in lock if name.startswith("rl@"))
    assert "rl@seed" in rl_stages and "evaluate@seed" in lock
    params = yaml.safe_load((root / "data" / "params" / "collect.yaml").read_text())
    assert params["generation.backend"] == "vllm"  # what the stages ran with (the -S override)
    curves = {name: pd.read_csv(root / "data" / "rl" / name.partition("@")[2] / "curve.csv") for name in rl_stages}
    report("through DVC, sampling log-prob diff (mean, max) per rl stage: " + ", ".join(
        f"{name} ({c[DIFF_MEAN].max():.2e}, {c[DIFF_MAX].max():.2e})" for name, c in curves.items()))
    for name, curve in curves.items():  # every round of every RL stage logged it, far below the 0.1 limit
        assert DIFF_MEAN in curve and DIFF_MAX in curve and (curve[DIFF_MEAN] < 1e-2).all(), (name, curve)
    assert _mlflow_has_the_diff(mlflow_uri, "rl-seed")
    # the stages' generation went to the server, which loaded their weights in place (vLLM's reload_weights RPC)
    assert log.count("POST /v1/completions") > 0 and log.count("POST /collective_rpc") >= 2, log[-3000:]


def _mlflow_has_the_diff(uri: str, run_name: str) -> bool:
    """The stage run ``run_name`` logged the weight-sync monitor for its round (step 0)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("vllm-dvc")
    runs = client.search_runs([experiment.experiment_id], f"tags.mlflow.runName = '{run_name}'")
    history = [m for run in runs for m in client.get_metric_history(run.info.run_id, DIFF_MEAN)]
    return bool(history) and all(m.step == 0 and 0 <= m.value < 1e-2 for m in history)
