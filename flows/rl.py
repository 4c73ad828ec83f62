"""DVC stage ``rl@<algorithm>``: RL from where the algorithm starts (``Algorithm.init``: the base model or the
Stage-1 checkpoint) -> ``data/rl/<algorithm>``.

One task and one MLflow child run per round; a rerun resumes after the last finished round
(``round_XXX/DONE``) when the config and starting checkpoint are unchanged, else starts over. With
``project.accelerate_config`` the rounds run in one ``accelerate launch`` first (``rl_launch``), then logged.
"""

from __future__ import annotations

import time
from pathlib import Path

from prefect import flow, get_run_logger

from flows.common import (finish, model_name, model_tags, parse_args, reset_stale_rounds, resume_key,
                          stage_paths, stage_run)
from flows.results import publish_audit
from flows.stage_graph import run_stage
from seed_core.algorithms import effective_config
from seed_core.runtime import timing
from seed_core.runtime.logs import progress_line
from seed_core.loader import load_config
from seed_core.tracking import open_run
from tasks.rl import analysis_prompts, rl_finalize, rl_launch, rl_round


@flow(name="rl", flow_run_name="rl-{algorithm}")
def rl_flow(params_path: Path = Path("params.yaml"), algorithm: str = "seed",
            parent_run_id: str | None = None) -> dict[str, float]:
    # the algorithm's fixed values applied before anything is logged: MLflow params = the values used
    cfg = effective_config(load_config(params_path, {"rl.algorithm": algorithm}, origin="--algorithm"))
    paths = stage_paths(cfg)
    init, out = paths.init(algorithm), paths.rl(algorithm)
    key = resume_key(cfg, init)
    reset_stale_rounds(out, key)  # the pipeline starts over on a change; the engine alone would refuse
    with stage_run(cfg, f"rl-{algorithm}", "rl", [init], parent_run_id) as tracker:
        analysis_prompts(cfg, tracker)  # the registered versions of the analyzer's prompts, named on the run
        rl_launch(cfg, init, out)  # launched: every round now, which the loop below then only reads back and logs
        start, durations = time.monotonic(), []
        for i in range(cfg.rl.rounds):
            resumed = (out / f"round_{i:03d}" / "DONE").is_file()
            began = time.monotonic()
            with open_run(cfg, f"rl-{algorithm}-round-{i:03d}", parent_run_id=tracker.run_id,
                          prefix="rl", tags={"round": i, "resumed": resumed}, log_config=False) as round_tracker:
                tracker.log_metrics(rl_round(cfg, i, init, out, round_tracker, key), step=i)
            durations += [] if resumed else [time.monotonic() - began]
            # whole-stage progress in the flow run's logs (the Prefect UI) and on the console
            get_run_logger().info("rl-%s: %s", algorithm,
                                  progress_line("round", i + 1, cfg.rl.rounds, time.monotonic() - start, durations))
        metrics = rl_finalize(cfg, out)
        publish_audit(out / "curve.csv", algorithm)  # the analyzer's audit, round by round, on this flow run
        if cfg.tracking.register_models:
            with timing.span("mlflow"):
                tracker.register_checkpoint(out / "checkpoint", model_name(cfg, algorithm), model_tags(cfg, algorithm),
                                            cfg.tracking.model_flavor)
        return finish(tracker, out, metrics)


if __name__ == "__main__":
    args = parse_args("rl", "algorithm")
    run_stage(rl_flow, params_path=args.params, algorithm=args.algorithm)
