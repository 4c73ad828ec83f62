"""DVC stage ``annotate``: hindsight skills for the Stage-1 trajectories -> ``data/annotate``."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.common import finish, parse_args, stage_paths, stage_run
from flows.stage_graph import run_stage
from seed_core.loader import load_config
from tasks.annotate import annotate


@flow(name="annotate")
def annotate_flow(params_path: Path = Path("params.yaml"), parent_run_id: str | None = None) -> dict[str, float]:
    cfg = load_config(params_path)
    paths = stage_paths(cfg)
    inputs = [paths.collect / "trajectories.parquet"]
    with stage_run(cfg, "annotate", "annotate", inputs, parent_run_id) as tracker:
        return finish(tracker, paths.annotate, annotate(cfg, paths.collect, paths.annotate, tracker))


if __name__ == "__main__":
    run_stage(annotate_flow, params_path=parse_args("annotate").params)
