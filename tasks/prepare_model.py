"""Task of the prepare_model stage: build the base model directory the pipeline starts from."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from seed_core.runtime import timing
from seed_core.config import SeedConfig


@task(name="prepare_model", cache_policy=NO_CACHE)
def prepare_model(cfg: SeedConfig, out_dir: Path) -> dict[str, float]:
    """``model.path`` -> a plain Hugging Face directory at ``out_dir`` (SmolLM2 GGUF converted once)."""
    with timing.span("imports"):  # the stage module (torch, transformers) on first use
        from seed_core.stages.prepare_model import run_prepare_model

    with timing.span("engine"):
        return run_prepare_model(cfg, out_dir)
