"""One full SEED iteration (rollout -> self-analysis -> old/teacher/ref scoring -> update) per environment.

The tiny random model first gets a few SFT steps on the analyzer format (Stage 1 in miniature,
``seed_core.modeling.builders``), so its greedy self-analysis parses and the distillation term really runs.
"""

import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from seed_core.config import SeedConfig
from seed_core.runtime.io import read_records
from seed_core.loader import with_overrides
from seed_core.modeling.builders import build_tiny_analyzer_model
from seed_core.stages.rl import run_rl_round
from seed_core.types import AnnotationRecord


@pytest.fixture(scope="module")
def analyzer_model(tmp_path_factory) -> Path:
    return build_tiny_analyzer_model(tmp_path_factory.mktemp("seed_iter") / "analyzer")


def _cfg(model: Path, env: str) -> SeedConfig:
    return with_overrides(SeedConfig(), {
        "model.path": str(model), "model.device": "cpu", "env.name": env, "env.max_steps": 2,
        "rl.algorithm": "seed", "rl.tasks_per_round": 2, "rl.group_size": 2, "rl.lr": 1e-3,
        "rl.mini_batch_size": 8, "rl.micro_batch_size": 8, "generation.max_new_tokens": 12,
        "generation.max_prompt_tokens": 256, "rl.analyzer_max_new_tokens": 16,
    })


@pytest.mark.parametrize("env", ["sokoban", "ezpoints", "search_qa", "webshop"])
def test_one_seed_iteration(env, analyzer_model, tmp_path):
    metrics = run_rl_round(_cfg(analyzer_model, env), 0, analyzer_model, tmp_path / "rl")
    assert all(math.isfinite(v) for v in metrics.values()), metrics
    assert metrics["analysis/parse_ok_rate"] > 0, "self-analysis by the SFT'd policy should parse"
    assert metrics["rl/teacher_coverage"] > 0 and 0 < metrics["rl/gate_mean"] < 1
    assert metrics["rl/optimizer_steps"] >= 1
    # the mechanism monitors of the issue "does the mechanism bite?", present and finite every round
    for key in ("analysis/skill_words_mean", "analysis/distinct_skills", "rl/teacher_sample_ratio",
                "rl/teacher_gap_success", "rl/teacher_gap_failure", "rl/gate_mean", "rl/gate_active_ratio"):
        assert key in metrics, key
    assert metrics["analysis/skill_words_mean"] > 0 and metrics["analysis/distinct_skills"] >= 1
    assert metrics["rl/teacher_tokens_success"] + metrics["rl/teacher_tokens_failure"] > 0
    round_dir = tmp_path / "rl" / "round_000"
    assert (round_dir / "DONE").is_file()
    before = load_file(analyzer_model / "model.safetensors")
    after = load_file(round_dir / "checkpoint" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before), "parameters must change"
    notes = read_records(round_dir / "annotations.parquet", AnnotationRecord)
    assert notes and all(n.policy_version == "seed/round_000" for n in notes)
    # a rerun of a finished round is a no-op that returns the saved metrics
    assert run_rl_round(_cfg(analyzer_model, env), 0, analyzer_model, tmp_path / "rl") == metrics


@pytest.mark.alfworld
def test_one_seed_iteration_on_real_alfworld_games(analyzer_model, tmp_path, monkeypatch):
    """The same iteration on the real ALFWorld engine, training on the real valid_train games."""
    pytest.importorskip("alfworld", reason="the alfworld engine is an optional extra")
    data = Path(__file__).resolve().parents[3] / "shared" / "alfworld"
    assert (data / "json_2.1.1" / "valid_train").is_dir(), f"ALFWorld games expected at {data}"
    monkeypatch.setenv("ALFWORLD_DATA", str(data))
    cfg = with_overrides(_cfg(analyzer_model, "alfworld"), {"env.alfworld.train_split": "valid_train",
                                                           "rl.tasks_per_round": 1})
    metrics = run_rl_round(cfg, 0, analyzer_model, tmp_path / "rl")
    assert all(math.isfinite(v) for v in metrics.values()), metrics
    assert metrics["rollout/episodes"] == 2 and metrics["rl/optimizer_steps"] >= 1
    assert (tmp_path / "rl" / "round_000" / "DONE").is_file()
