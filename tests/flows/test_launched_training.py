"""With project.accelerate_config set, the rl task trains under `accelerate launch` (2 CPU processes here); the
launched processes load the flow's params file with the flow's overrides (no config is dumped for them)."""

import json
import subprocess
from pathlib import Path

import pytest

from seed_core.algorithms import effective_config
from seed_core.config import SeedConfig, dump_resolved
from seed_core.loader import load_config, with_overrides
from seed_core.tracking import NullTracker

ROOT = Path(__file__).resolve().parents[2]
LAUNCHED = {"project.accelerate_config": "configs/accelerate/cpu_2proc.yaml", "model.device": "cpu",
            "env.name": "sokoban", "env.max_steps": 2, "rl.algorithm": "grpo", "rl.tasks_per_round": 2,
            "rl.group_size": 2, "rl.mini_batch_size": 4, "rl.micro_batch_size": 2, "generation.max_new_tokens": 8,
            "generation.max_prompt_tokens": 256, "tracking.enabled": False}


def launched_cfg(tmp_path: Path, tiny_model_dir: Path, **extra: object) -> SeedConfig:
    """The config a flow would load: a params file (the schema's defaults) plus overrides."""
    params = dump_resolved(SeedConfig(), tmp_path / "params.json")
    return with_overrides(load_config(params, {"model.path": str(tiny_model_dir)}), {**LAUNCHED, **extra})


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The command lines run through subprocess.run (still run for real)."""
    calls: list[list[str]] = []
    real_run = subprocess.run

    def recording_run(cmd, *args, **kwargs):
        calls.append(list(cmd))
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", recording_run)
    return calls


def config_args(cmd: list[str]) -> tuple[str, set[str]]:
    """(--config value, the --set values) of a launch command."""
    return cmd[cmd.index("--config") + 1], {cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--set"}


@pytest.mark.timeout(600)
def test_rl_round_task_launches_the_configured_accelerate_layout(tiny_model_dir, tmp_path, launches):
    from tasks.rl import rl_round

    cfg = launched_cfg(tmp_path, tiny_model_dir)
    metrics = rl_round.fn(cfg, 0, tiny_model_dir, tmp_path / "rl", NullTracker())
    assert (tmp_path / "rl" / "round_000" / "DONE").is_file()
    assert metrics["rl/optimizer_steps"] >= 1 and metrics["rl/samples"] > 0
    (cmd,) = launches
    assert cmd[1:7] == ["launch", "--config_file", str(ROOT / LAUNCHED["project.accelerate_config"]), "-m",
                        "seed_core.stages.rl", "--config"]
    assert config_args(cmd) == (str((tmp_path / "params.json").resolve()), {
        f"{key}={json.dumps(value)}" for key, value in {"model.path": str(tiny_model_dir), **LAUNCHED}.items()})
    assert not list((tmp_path / "rl").glob("launch_config*"))  # nothing dumped for the launched processes
    # a finished round is read back, not launched again
    stamp = (tmp_path / "rl" / "round_000" / "DONE").stat().st_mtime_ns
    assert rl_round.fn(cfg, 0, tiny_model_dir, tmp_path / "rl", NullTracker()) == metrics
    assert (tmp_path / "rl" / "round_000" / "DONE").stat().st_mtime_ns == stamp and len(launches) == 1


def test_a_missing_accelerate_config_is_named(tmp_path):
    from seed_core.stages.launch import run_stage

    cfg = with_overrides(SeedConfig(), {"project.accelerate_config": "configs/accelerate/nope.yaml"})
    with pytest.raises(FileNotFoundError, match="nope.yaml.*configs/accelerate"):
        run_stage(cfg, "seed_core.stages.rl", [], lambda: None)


@pytest.mark.timeout(600)
def test_rl_launch_runs_every_round_in_one_launch(tiny_model_dir, tmp_path, launches):
    from tasks.rl import rl_launch, rl_round

    cfg = launched_cfg(tmp_path, tiny_model_dir, **{"rl.rounds": 2})
    rl_launch.fn(cfg, tiny_model_dir, tmp_path / "rl")
    assert all((tmp_path / "rl" / f"round_{i:03d}" / "DONE").is_file() for i in range(2))
    assert (tmp_path / "rl" / "checkpoint" / "model.safetensors").is_file()  # finalized by the launched run
    # only the last round keeps optimizer state (raising rl.rounds continues from it); the DVC output has none
    assert {p.parent.parent.name for p in (tmp_path / "rl").rglob("optimizer*.pt")} == {"round_001"}
    # the launched processes loaded the flow's config: params file + overrides, the algorithm's fixed values applied
    from seed_core.repro.numerics import RECORD_KEY

    resolved = json.loads((tmp_path / "rl" / "resolved_config.json").read_text())
    assert RECORD_KEY in resolved  # the numerics the launched processes ran under (seed_core.repro.numerics.record)
    resolved.pop(RECORD_KEY)
    assert resolved == effective_config(cfg).model_dump(mode="json") and len(launches) == 1
    # the round tasks then read the launched rounds back
    assert rl_round.fn(cfg, 1, tiny_model_dir, tmp_path / "rl", NullTracker()) == json.loads(
        (tmp_path / "rl" / "round_001" / "metrics.json").read_text())
    assert len(launches) == 1


@pytest.mark.timeout(600)
def test_a_launched_rounds_analysis_audit_covers_every_process(tiny_model_dir, tmp_path, launches):
    """Each process analyzes the trajectories it played; the round's ``analysis/*`` are over both processes' (the
    ALFWorld rehearsal at 609a0d8 logged rank 0's 100% beside rank 1's 0%, and its curve kept rank 0's)."""
    from tasks.rl import rl_round

    cfg = launched_cfg(tmp_path, tiny_model_dir, **{"rl.algorithm": "seed_oracle"})
    metrics = rl_round.fn(cfg, 0, tiny_model_dir, tmp_path / "rl", NullTracker())
    assert len(launches) == 1
    assert metrics["analysis/analyses"] == 4.0  # 2 tasks x group 2, one task per process
    assert metrics["analysis/parse_ok_rate"] == 1.0 and metrics["analysis/placeholder_share"] == 0.0
