"""With project.accelerate_config set, the rl task trains under `accelerate launch` (2 CPU processes here)."""

from pathlib import Path

import pytest

from seed_core.config import SeedConfig
from seed_core.loader import with_overrides
from seed_core.tracking import NullTracker

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_rl_round_task_launches_the_configured_accelerate_layout(tiny_model_dir, tmp_path):
    from tasks.rl import rl_round

    cfg = with_overrides(SeedConfig(), {
        "project.accelerate_config": "configs/accelerate/cpu_2proc.yaml",
        "model.path": str(tiny_model_dir), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 2,
        "rl.algorithm": "grpo", "rl.tasks_per_round": 2, "rl.group_size": 2, "rl.mini_batch_size": 4,
        "rl.micro_batch_size": 2, "generation.max_new_tokens": 8, "generation.max_prompt_tokens": 256,
        "tracking.enabled": False})
    metrics = rl_round.fn(cfg, 0, tiny_model_dir, tmp_path / "rl", NullTracker())
    assert (tmp_path / "rl" / "round_000" / "DONE").is_file()
    assert metrics["rl/optimizer_steps"] >= 1 and metrics["rl/samples"] > 0
    assert (tmp_path / "rl" / "launch_config.rl.json").is_file()
    # a finished round is read back, not launched again
    stamp = (tmp_path / "rl" / "round_000" / "DONE").stat().st_mtime_ns
    assert rl_round.fn(cfg, 0, tiny_model_dir, tmp_path / "rl", NullTracker()) == metrics
    assert (tmp_path / "rl" / "round_000" / "DONE").stat().st_mtime_ns == stamp


def test_a_missing_accelerate_config_is_named(tmp_path):
    from tasks.launch import run_launched

    cfg = with_overrides(SeedConfig(), {"project.accelerate_config": "configs/accelerate/nope.yaml"})
    with pytest.raises(FileNotFoundError, match="nope.yaml.*configs/accelerate"):
        run_launched(cfg, "seed_core.stages.rl", tmp_path, [])


@pytest.mark.timeout(600)
def test_rl_launch_runs_every_round_in_one_launch(tiny_model_dir, tmp_path):
    from tasks.rl import rl_launch

    cfg = with_overrides(SeedConfig(), {
        "project.accelerate_config": "configs/accelerate/cpu_2proc.yaml", "model.path": str(tiny_model_dir),
        "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 2, "rl.algorithm": "grpo", "rl.rounds": 2,
        "rl.tasks_per_round": 2, "rl.group_size": 2, "rl.mini_batch_size": 4, "rl.micro_batch_size": 2,
        "generation.max_new_tokens": 8, "generation.max_prompt_tokens": 256, "tracking.enabled": False})
    rl_launch.fn(cfg, tiny_model_dir, tmp_path / "rl")
    assert all((tmp_path / "rl" / f"round_{i:03d}" / "DONE").is_file() for i in range(2))
    assert (tmp_path / "rl" / "checkpoint" / "model.safetensors").is_file()  # finalized by the launched run
    # only the last round keeps optimizer state (raising rl.rounds continues from it); the DVC output has none
    assert {p.parent.parent.name for p in (tmp_path / "rl").rglob("optimizer*.pt")} == {"round_001"}
