"""Task of the report stage: the paper-style tables and the learning-curve plots."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from seed_core.runtime import timing
from seed_core.config import SeedConfig
from seed_core.tracking import Tracker


@task(name="report", cache_policy=NO_CACHE)
def report(eval_dirs: dict[str, Path], rl_dirs: dict[str, Path], out_dir: Path, cfg: SeedConfig,
           tracker: Tracker | None = None) -> dict[str, float]:
    """Evaluation episodes + RL curves -> ``out_dir/table.{md,csv}`` and ``out_dir/curve_*.png`` (and the
    table and curves to ``tracker``: MLflow ``log_table`` / ``log_figure``)."""
    with timing.span("imports"):  # the stage module (torch, transformers) on first use
        from seed_core.stages.report import run_report

    with timing.span("engine"):
        return run_report(eval_dirs, rl_dirs, out_dir, cfg, tracker)
