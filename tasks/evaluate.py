"""Task of the evaluate stage: the policy alone (no analyzer; no skill, or the static skill of each task's type
for a "*" method) on the evaluation splits."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from seed_core.runtime import timing
from seed_core.config import SeedConfig
from seed_core.tracking import Tracker


@task(name="evaluate", cache_policy=NO_CACHE, task_run_name="evaluate-{method}")
def evaluate(cfg: SeedConfig, checkpoint: Path, out_dir: Path, method: str, tracker: Tracker) -> dict[str, float]:
    """Play ``eval.num_tasks`` episodes per split -> ``out_dir/episodes.parquet`` and ``metrics.json``."""
    with timing.span("imports"):  # the stage module (torch, transformers) on first use
        from seed_core.stages.evaluate import run_evaluate

    with timing.span("engine"):
        return run_evaluate(cfg, checkpoint, out_dir, method, tracker=tracker)
