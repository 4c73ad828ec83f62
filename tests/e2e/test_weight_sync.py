"""Weight sync as a logged invariant on the ``hf`` backend (tiny model): every RL round logs
``rollout/sampling_logp_diff_mean`` / ``_max`` (|the engine's log-prob of each sampled token - the trainer's
under theta_old|) into its metrics, ``curve.csv`` and the tracker (MLflow); after an update the engine samples
from the new weights (the diff stays ~0), and an engine whose sync is skipped fails the next round on it.
The vLLM half is tests/vllm/test_vllm_rl.py."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch

from safetensors.torch import load_file

from seed_core.config import SeedConfig
from seed_core.loader import with_overrides
from seed_core.rollout.backends import HFBackend
from seed_core.stages.rl import run_rl, run_rl_round
from seed_core.stages.weight_sync import DIFF_MAX, DIFF_MEAN, StaleEngineWeightsError
from seed_core.tracking import NullTracker

FP32_SYNCED_MAX = 1e-3
"""fp32 hf, same weights: only batching (left-padded generate vs right-padded scoring) separates the two."""


def _cfg(model: Path, **extra: object) -> SeedConfig:
    return with_overrides(SeedConfig(), {
        "model.path": str(model), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 2,
        "rl.algorithm": "grpo", "rl.rounds": 2, "rl.tasks_per_round": 2, "rl.group_size": 2, "rl.lr": 3e-2,
        "rl.kl_coef": 0.0, "rl.mini_batch_size": 64, "rl.micro_batch_size": 8, "rl.save_every": 0,
        "generation.max_new_tokens": 12, "generation.max_prompt_tokens": 256, **extra})


def test_every_round_logs_the_diff_and_the_engine_follows_the_update(tiny_model_dir: Path, tmp_path: Path) -> None:
    tracker = NullTracker()
    run_rl(_cfg(tiny_model_dir), tiny_model_dir, tmp_path / "rl", tracker=tracker)
    curve = pd.read_csv(tmp_path / "rl" / "curve.csv")
    print(f"\nhf sampling log-prob diff per round: mean {curve[DIFF_MEAN].tolist()}, max {curve[DIFF_MAX].tolist()}")
    assert len(curve) == 2 and (curve[DIFF_MAX] < FP32_SYNCED_MAX).all() and (curve[DIFF_MEAN] >= 0).all()
    logged = {step: m for step, m in tracker.history if DIFF_MEAN in m}
    assert sorted(logged) == [0, 1] and all(DIFF_MAX in m for m in logged.values())  # the MLflow round metrics
    # round 1 sampled from round 0's update: the weights moved, yet the engine's log-probs are the new theta's
    start, after = load_file(tiny_model_dir / "model.safetensors"), load_file(tmp_path / "rl" / "checkpoint" /
                                                                              "model.safetensors")
    assert any(not torch.equal(start[k], after[k]) for k in start), "the update must move the weights"


def test_a_skipped_sync_fails_the_next_round_on_the_diff(tiny_model_dir: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine that keeps the weights it was first given (its sync skipped): round 0 agrees with theta_old,
    round 1 samples from round 0's start while the trainer holds round 0's update, and fails in one line."""
    stale: dict[str, torch.nn.Module] = {}
    synced_init = HFBackend.__init__

    def never_synced(self: HFBackend, policy, gen_cfg) -> None:
        model = stale.setdefault("model", copy.deepcopy(policy.model))
        synced_init(self, replace(policy, model=model), gen_cfg)

    monkeypatch.setattr(HFBackend, "__init__", never_synced)
    cfg = _cfg(tiny_model_dir, **{"rl.save_every": 1})  # round 0 a resume point: rerun round 1 below
    with pytest.raises(StaleEngineWeightsError) as err:
        run_rl(cfg, tiny_model_dir, tmp_path / "rl")
    print(f"\nskipped sync: {err.value}")
    assert "round 1: stale engine weights" in str(err.value) and "\n" not in str(err.value)
    assert (tmp_path / "rl" / "round_000" / "DONE").is_file()
    assert not (tmp_path / "rl" / "round_001").exists()  # nothing of the failed round was written
    # the same stale engine passes with the check off: the metric, not something else, failed the round
    metrics = run_rl_round(with_overrides(cfg, {"rl.max_sampling_logp_diff": 0.0}), 1, tiny_model_dir, tmp_path / "rl")
    assert metrics[DIFF_MEAN] > cfg.rl.max_sampling_logp_diff
