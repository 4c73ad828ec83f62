"""DVC stage ``collect``: Stage-1 trajectories of the base model -> ``data/collect``."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.common import finish, parse_args, stage_paths, stage_run
from flows.stage_graph import run_stage
from seed_core.loader import load_config
from tasks.collect import collect


@flow(name="collect")
def collect_flow(params_path: Path = Path("params.yaml"), parent_run_id: str | None = None) -> dict[str, float]:
    cfg = load_config(params_path)
    paths = stage_paths(cfg)
    with stage_run(cfg, "collect", "collect", [paths.base_model], parent_run_id) as tracker:
        return finish(tracker, paths.collect, collect(cfg, paths.base_model, paths.collect, tracker))


if __name__ == "__main__":
    run_stage(collect_flow, params_path=parse_args("collect").params)
