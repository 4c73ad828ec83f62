"""DVC stage ``generate_alfworld``: ALFWorld training games -> ``env.alfworld.generated_dir``.

The ``alfworld`` environment trains on them when ``$ALFWORLD_DATA`` has no ``train`` split. Other
environments need no games: the stage then leaves an empty directory (in seconds), so the DAG is
the same for every environment and preset.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from prefect import flow

from flows.common import finish, join_pipeline_run, parse_args, stage_run
from flows.stage_graph import run_stage
from seed_core.config import project_root
from seed_core.loader import load_config
from tasks.generate_alfworld import generate_alfworld


@flow(name="generate_alfworld")
def generate_alfworld_flow(params_path: Path = Path("params.yaml"),
                           parent_run_id: str | None = None) -> dict[str, float]:
    cfg = load_config(params_path)
    out = project_root() / cfg.env.alfworld.generated_dir
    if cfg.env.name != "alfworld":
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        join_pipeline_run()  # no MLflow run for an empty stage, but its flow run is grouped with the pipeline's
        return {}
    with stage_run(cfg, "generate_alfworld", "generate", [], parent_run_id) as tracker:
        return finish(tracker, out, generate_alfworld(cfg, out))


if __name__ == "__main__":
    run_stage(generate_alfworld_flow, params_path=parse_args("generate_alfworld").params)
