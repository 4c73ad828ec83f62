"""Task of the annotate stage: hindsight skills for each Stage-1 trajectory (the only network-bound
stage with an ``openai`` analyzer, hence the only task with retries)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from seed_core.runtime import timing
from seed_core.config import SeedConfig
from seed_core.tracking import Tracker


NOT_RETRIED = ("AnalyzerSetupError", "AnnotationQualityError", "ConfigError", "DataFileError")
"""Failures a task retry cannot fix (setup, inputs, an endpoint that rejected every call after the client's
own per-call retries): the stage fails at once with its message instead of after 70 s of retries."""


def worth_retrying(task: Any, task_run: Any, state: Any) -> bool:
    error = state.result(raise_on_failure=False)
    return not any(cls.__name__ in NOT_RETRIED for cls in type(error).__mro__)


@task(name="annotate", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=[10, 60],
      retry_condition_fn=worth_retrying)
def annotate(cfg: SeedConfig, collect_dir: Path, out_dir: Path, tracker: Tracker) -> dict[str, float]:
    """Trajectories -> ``out_dir/annotations.parquet`` and the SFT examples ``out_dir/sft_examples.jsonl``."""
    with timing.span("imports"):  # the stage module (torch, transformers) on first use
        from seed_core.stages.annotate import run_annotate

    with timing.span("engine"):
        return run_annotate(cfg, collect_dir, out_dir, tracker=tracker)
