"""Task of the generate_alfworld stage: solvable ALFWorld training games built offline."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from seed_core.runtime import timing
from seed_core.config import SeedConfig


@task(name="generate_alfworld", cache_policy=NO_CACHE)
def generate_alfworld(cfg: SeedConfig, out_dir: Path) -> dict[str, float]:
    """``env.alfworld.num_generated_games`` games checked solvable on the real engine -> ``out_dir``."""
    with timing.span("imports"):  # the stage module (torch, transformers) on first use
        from seed_core.stages.generate_alfworld import run_generate_alfworld

    with timing.span("engine"):
        return run_generate_alfworld(cfg, out_dir)
