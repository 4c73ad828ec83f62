"""Task of the prepare_model stage: build the base model directory the pipeline starts from."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from seed_core.config import SeedConfig


@task(name="prepare_model", cache_policy=NO_CACHE)
def prepare_model(cfg: SeedConfig, out_dir: Path) -> dict[str, float]:
    """``model.path`` -> a plain Hugging Face directory at ``out_dir`` (SmolLM2 GGUF converted once)."""
    from seed_core.stages.prepare_model import run_prepare_model

    return run_prepare_model(cfg, out_dir)
