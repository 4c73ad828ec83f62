"""DVC stage ``sft``: Stage-1 hindsight-skill SFT -> ``data/sft/checkpoint`` (registered in MLflow)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.common import finish, model_name, model_tags, parse_args, stage_paths, stage_run
from flows.stage_graph import run_stage
from seed_core.runtime import timing
from seed_core.loader import load_config
from tasks.sft import sft


@flow(name="sft")
def sft_flow(params_path: Path = Path("params.yaml"), parent_run_id: str | None = None) -> dict[str, float]:
    cfg = load_config(params_path)
    paths = stage_paths(cfg)
    inputs = [paths.base_model, paths.annotate / "sft_examples.jsonl", paths.collect / "expert.parquet"]
    with stage_run(cfg, "sft", "sft", inputs, parent_run_id) as tracker:
        metrics = sft(cfg, paths.base_model, paths.annotate, paths.collect, paths.sft, tracker)
        if cfg.tracking.register_models:
            with timing.span("mlflow"):
                tracker.register_checkpoint(paths.sft / "checkpoint", model_name(cfg, "sft"), model_tags(cfg, "sft"),
                                            cfg.tracking.model_flavor)
        return finish(tracker, paths.sft, metrics)


if __name__ == "__main__":
    run_stage(sft_flow, params_path=parse_args("sft").params)
