"""Task of the sft stage: Stage-1 hindsight-skill fine-tuning."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from seed_core.runtime import timing
from seed_core.config import SeedConfig
from seed_core.stages.launch import run_stage
from seed_core.tracking import Tracker


@task(name="sft", cache_policy=NO_CACHE)
def sft(cfg: SeedConfig, model_dir: Path, annotate_dir: Path, collect_dir: Path, out_dir: Path,
        tracker: Tracker) -> dict[str, float]:
    """Fine-tune ``model_dir`` on the annotated examples (+ the expert demonstrations of ``collect_dir``
    when ``sft.include_expert``) -> ``out_dir/checkpoint`` and ``out_dir/loss.csv``."""
    with timing.span("imports"):  # the stage module (torch, transformers) on first use
        from seed_core.stages.sft import run_sft
        from seed_core.runtime.io import read_metrics
    args = ["--model", str(model_dir), "--annotate", str(annotate_dir), "--collect", str(collect_dir), "--out",
            str(out_dir)]
    metrics = run_stage(cfg, "seed_core.stages.sft", args, lambda: run_sft(
        cfg, model_dir, annotate_dir, out_dir, tracker=tracker, collect_dir=collect_dir))
    if metrics is None:  # launched: read the outputs back
        metrics = read_metrics(out_dir / "metrics.json")
        tracker.log_metrics(metrics)
    return metrics
