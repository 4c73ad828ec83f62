"""Task of the collect stage: Stage-1 trajectories sampled by the base model."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from seed_core.runtime import timing
from seed_core.config import SeedConfig
from seed_core.tracking import Tracker


@task(name="collect", cache_policy=NO_CACHE)
def collect(cfg: SeedConfig, model_dir: Path, out_dir: Path, tracker: Tracker) -> dict[str, float]:
    """Roll out ``collect.num_tasks`` x ``collect.group_size`` episodes -> ``out_dir/trajectories.parquet``."""
    with timing.span("imports"):  # the stage module (torch, transformers) on first use
        from seed_core.stages.collect import run_collect

    with timing.span("engine"):
        return run_collect(cfg, model_dir, out_dir, tracker=tracker)
