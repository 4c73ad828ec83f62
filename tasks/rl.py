"""Tasks of the rl stage: all rounds in one launch (accelerate), one RL round (resumable) and the final summary."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from seed_core import timing
from seed_core.config import SeedConfig
from seed_core.stages.launch import run_stage
from seed_core.tracking import Tracker

_CARRIES: dict[str, Any] = {}
"""One ``seed_core.stages.rl.RoundCarry`` per (output directory, fingerprint): the flow's rounds hand the live model
and optimizer to the next round in memory, so only resume points write checkpoints; ``rl_finalize`` drops it."""


@task(name="rl_round", cache_policy=NO_CACHE, task_run_name="rl-round-{round_idx}")
def rl_round(cfg: SeedConfig, round_idx: int, init_checkpoint: Path, out_dir: Path,
             tracker: Tracker, fingerprint: str | None = None) -> dict[str, float]:
    """Sample, self-analyze and update once -> ``out_dir/round_{round_idx:03d}/`` (with a DONE marker).

    The frozen analyzer of ``seed_static``-like algorithms is ``rl.analyzer_checkpoint``, by default
    ``init_checkpoint`` (the Stage-1 SFT checkpoint, a declared DVC dependency of the stage).
    """
    with timing.span("imports"):  # the stage module (torch, transformers) on first use
        from seed_core.io import read_metrics
        from seed_core.stages.rl import RoundCarry, round_dir, run_rl_round
    key, done = f"{Path(out_dir).resolve()}|{fingerprint}", round_dir(out_dir, round_idx)
    args = ["--init", str(init_checkpoint), "--out", str(out_dir), "--round", str(round_idx)]
    metrics = run_stage(cfg, "seed_core.stages.rl", args, lambda: run_rl_round(
        cfg, round_idx, init_checkpoint, out_dir, tracker=tracker, fingerprint=fingerprint,
        carry=_CARRIES.setdefault(key, RoundCarry())), outputs=done / "DONE")  # launched: normally by `rl_launch`
    if metrics is None:  # launched: read the round back
        metrics = read_metrics(done / "metrics.json")
        tracker.log_metrics(metrics, step=round_idx)
    return metrics


@task(name="rl_launch", cache_policy=NO_CACHE)
def rl_launch(cfg: SeedConfig, init_checkpoint: Path, out_dir: Path) -> None:
    """With ``project.accelerate_config``: every unfinished round in ONE ``accelerate launch`` (the processes, and
    their vLLM engines, start once per stage, not once per round), which the round tasks then read back.
    In-process it returns at once: each round runs in its own task."""
    run_stage(cfg, "seed_core.stages.rl", ["--init", str(init_checkpoint), "--out", str(out_dir)], lambda: None)


@task(name="rl_finalize", cache_policy=NO_CACHE)
def rl_finalize(cfg: SeedConfig, out_dir: Path) -> dict[str, float]:
    """The last round's policy -> ``out_dir/checkpoint``; per-round metrics -> ``out_dir/curve.csv``."""
    with timing.span("imports"):  # the stage module (torch, transformers) on first use
        from seed_core.stages.rl import finalize_rl

    for key in [k for k in _CARRIES if k.startswith(f"{Path(out_dir).resolve()}|")]:
        del _CARRIES[key]  # frees the model and optimizer held between rounds
    with timing.span("engine"):
        return finalize_rl(cfg, out_dir)
