"""The RL engine itself (not only the flow) refuses finished rounds made from another config or --init, and
raising ``rl.rounds`` after a finished run continues with the saved optimizer state (issue 14)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import torch

from seed_core.config import SeedConfig, dump_resolved
from seed_core.runtime.io import DataFileError
from seed_core.loader import with_overrides
from seed_core.lineage.resume import StaleRoundsError, rl_fingerprint
from seed_core.stages.rl import finalize_rl, round_dir, run_rl, run_rl_round


def tiny_rl_config(model_dir: Path, rounds: int = 1) -> SeedConfig:
    """The smallest RL round: 1 task x 2 rollouts x 1 step x 4 tokens, GRPO, no reference model."""
    return with_overrides(SeedConfig(), {
        "model.path": str(model_dir), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 1,
        "rl.algorithm": "grpo", "rl.rounds": rounds, "rl.tasks_per_round": 1, "rl.group_size": 2,
        "rl.kl_coef": 0.0, "rl.micro_batch_size": 4, "rl.mini_batch_size": 1, "generation.max_new_tokens": 4,
        "generation.max_prompt_tokens": 256,
    })


@pytest.fixture(scope="module")
def finished_run(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[SeedConfig, Path]:
    torch.set_num_threads(1)
    cfg, out = tiny_rl_config(tiny_model_dir), tmp_path_factory.mktemp("rl") / "grpo"
    run_rl(cfg, tiny_model_dir, out)
    return cfg, out


def _steps(checkpoint: Path) -> float:
    state = torch.load(checkpoint / "optimizer.pt", map_location="cpu", weights_only=True)["state"]
    return max(float(s["step"]) for s in state.values())


@pytest.mark.parametrize("change", ["lr", "seed", "init"])
def test_a_finished_round_from_another_config_or_init_is_refused(
    change: str, finished_run: tuple[SeedConfig, Path], tiny_model_dir: Path, tmp_path: Path,
) -> None:
    cfg, out = finished_run
    resolved_before = (out / "resolved_config.json").read_text()
    init = tiny_model_dir
    if change == "lr":
        cfg = with_overrides(cfg, {"rl.lr": 1e-2})
    elif change == "seed":
        cfg = with_overrides(cfg, {"project.seed": 5})
    else:
        init = Path(shutil.copytree(tiny_model_dir, tmp_path / "other-init"))
        (init / "config.json").write_text((init / "config.json").read_text() + " ")
    saved, now = rl_fingerprint(finished_run[0], tiny_model_dir), rl_fingerprint(cfg, init)
    with pytest.raises(StaleRoundsError) as err:
        run_rl(cfg, init, out)
    text = str(err.value)
    assert f"{out} holds 1 finished RL round(s) (round_000..round_000) made from other inputs" in text
    assert f"their fingerprint is {saved[:16]}, this run's is {now[:16]}" in text
    assert f"Delete {out} (or pass another --out) to start over" in text
    assert (out / "resolved_config.json").read_text() == resolved_before  # nothing rewritten
    with pytest.raises(StaleRoundsError):
        run_rl_round(cfg, 0, init, out)  # the single-round entry point checks too


def test_a_missing_init_is_named_and_the_cli_exits_with_one_line(
    finished_run: tuple[SeedConfig, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from seed_core.stages.rl import main

    cfg, out = finished_run
    with pytest.raises(DataFileError, match=r"the starting checkpoint /nonexistent does not exist \(--init"):
        run_rl(cfg, Path("/nonexistent"), out)
    config = dump_resolved(with_overrides(cfg, {"rl.lr": 1e-2}), tmp_path / "cfg.json")
    monkeypatch.setattr(sys, "argv", ["rl", "--config", str(config), "--init", cfg.model.path, "--out", str(out)])
    with pytest.raises(SystemExit) as stop:
        main()
    assert str(stop.value.code).startswith(f"seed rl: {out} holds 1 finished RL round(s)")


def test_raising_rounds_continues_with_the_saved_optimizer_state(
    finished_run: tuple[SeedConfig, Path], tiny_model_dir: Path, tmp_path: Path,
) -> None:
    cfg, out = finished_run[0], Path(shutil.copytree(finished_run[1], tmp_path / "grpo"))
    first = _steps(round_dir(out, 0) / "checkpoint")  # finalize kept the last round's optimizer state
    assert first >= 1 and not list((out / "checkpoint").glob("optimizer*.pt"))  # not in the DVC output
    metrics = run_rl(with_overrides(cfg, {"rl.rounds": 2}), tiny_model_dir, out)
    assert metrics["algorithm_rounds"] == 2.0
    assert _steps(round_dir(out, 1) / "checkpoint") == 2 * first  # AdamW went on counting: not a fresh start
    assert not list((round_dir(out, 0) / "checkpoint").glob("optimizer*.pt"))  # older ones are pruned
    assert finalize_rl(with_overrides(cfg, {"rl.rounds": 2}), out)["algorithm_rounds"] == 2.0
