"""Tasks of the rl stage: all rounds in one launch (accelerate), one RL round (resumable) and the final summary.

Each analyzing round's run also gets a sample of its analyses as an MLflow table (``log_skill_sample``), and the
stage's run names the registered analysis prompts it sends (``analysis_prompts``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from seed_core.algorithms import ALGORITHMS
from seed_core.analyzer.audit import round_skill_sample
from seed_core.analyzer.prompts import registry_prompts, registry_tags
from seed_core.config import SeedConfig
from seed_core.runtime import timing
from seed_core.stages.launch import run_stage
from seed_core.tracing import use_prompts
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
        from seed_core.runtime.io import read_metrics
        from seed_core.stages.rl import RoundCarry, round_dir, run_rl_round
    key, done = f"{Path(out_dir).resolve()}|{fingerprint}", round_dir(out_dir, round_idx)
    args = ["--init", str(init_checkpoint), "--out", str(out_dir), "--round", str(round_idx)]
    metrics = run_stage(cfg, "seed_core.stages.rl", args, lambda: run_rl_round(
        cfg, round_idx, init_checkpoint, out_dir, tracker=tracker, fingerprint=fingerprint,
        carry=_CARRIES.setdefault(key, RoundCarry())), outputs=done / "DONE")  # launched: normally by `rl_launch`
    if metrics is None:  # launched: read the round back
        metrics = read_metrics(done / "metrics.json")
        tracker.log_metrics(metrics, step=round_idx)
    log_skill_sample(cfg, done, tracker)
    return metrics


SKILL_SAMPLE_ROWS = 32
"""Analyses per round in the ``analyzer_skills.json`` table (evenly spaced over the round's)."""


def log_skill_sample(cfg: SeedConfig, round_path: Path, tracker: Tracker) -> int:
    """``SKILL_SAMPLE_ROWS`` of the round's analyses (``round_XXX/annotations.parquet``) as the table
    ``analyzer_skills.json`` of its MLflow run: each skill's text, whether it parsed (else why) and whether the
    environment's judge accepts it (``seed_core.analyzer.audit.skill_sample``). Returns the rows logged (0: tracking
    off or no analyses: an algorithm without an analyzer)."""
    if tracker.run_id is None or not (Path(round_path) / "annotations.parquet").is_file():
        return 0
    import pandas as pd

    rows = round_skill_sample(cfg, Path(round_path), SKILL_SAMPLE_ROWS)
    if not rows:
        return 0
    tracker.log_table(pd.DataFrame(rows), "analyzer_skills.json")
    return len(rows)


def analysis_prompts(cfg: SeedConfig, tracker: Tracker) -> dict[str, str]:
    """The registered versions of the prompts ``cfg.rl.algorithm``'s analyzer sends, named on the stage's run (none
    without an analyzer): ``seed_core.tracing.use_prompts``."""
    algorithm = ALGORITHMS.get(cfg.rl.algorithm)
    if algorithm.analyzer is None:
        return {}
    prompts = registry_prompts(step_skills=algorithm.step_skills and cfg.rl.max_step_skills > 0,
                               retry=cfg.annotate.parse_attempts > 1)
    return use_prompts(tracker, prompts, registry_tags())


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
