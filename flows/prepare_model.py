"""DVC stage ``prepare_model``: ``model.path`` -> ``data/models/base`` (the policy every stage starts from)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.common import finish, parse_args, stage_paths, stage_run
from flows.stage_graph import run_stage
from seed_core.loader import load_config
from tasks.prepare_model import prepare_model


@flow(name="prepare_model")
def prepare_model_flow(params_path: Path = Path("params.yaml"), parent_run_id: str | None = None) -> dict[str, float]:
    cfg = load_config(params_path)
    out = stage_paths(cfg).base_model
    with stage_run(cfg, "prepare_model", "prepare_model", [], parent_run_id) as tracker:
        return finish(tracker, out, prepare_model(cfg, out))


if __name__ == "__main__":
    run_stage(prepare_model_flow, params_path=parse_args("prepare_model").params)
