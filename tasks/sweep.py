"""Tasks of the sweep: one seed's whole pipeline (a DVC ``foreach`` cell), and the statistics over seeds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from seed_core.runtime import timing
from seed_core.config import SeedConfig
from seed_core.tracking import Tracker


@task(name="sweep-cell", cache_policy=NO_CACHE, task_run_name="sweep-seed-{cfg.project.seed}")
def sweep_cell(cfg: SeedConfig, base_model: Path, out_dir: Path, tracker: Tracker) -> dict[str, Any]:
    """collect -> annotate -> SFT -> RL per algorithm -> evaluation per method, for ``cfg.project.seed``."""
    with timing.span("imports"):  # the stage module (torch, transformers) on first use
        from seed_core.sweep.cell import run_seed_cell

    with timing.span("engine"):
        return run_seed_cell(cfg, base_model, out_dir, cfg.sweep.methods, tracker=tracker)


@task(name="sweep-report", cache_policy=NO_CACHE)
def sweep_report(cfg: SeedConfig, cells: list[Path], out_dir: Path) -> dict[str, Any]:
    """``learning.json``, ``table.md`` and ``curve_success.png`` over the finished cells."""
    with timing.span("imports"):  # the stage module (torch, transformers) on first use
        from seed_core.sweep.cell import setting_of
        from seed_core.sweep.report import run_sweep_report

    with timing.span("engine"):
        return run_sweep_report(cells, out_dir, setting_of(cfg))
