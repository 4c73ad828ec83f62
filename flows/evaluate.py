"""DVC stage ``evaluate@<method>``: the policy alone on the evaluation splits -> ``data/eval/<method>``.

``--method`` is ``vanilla`` (base model), ``sft`` (Stage-1 checkpoint), an RL algorithm name, or the "*"
method of one of them (``skill_grpo_star``: its checkpoint played with the static skills in the prompt).
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.common import dvc_lock_md5s, finish, model_name, parse_args, stage_paths, stage_run
from flows.stage_graph import run_stage
from seed_core.loader import load_config
from seed_core.methods import METHODS
from tasks.evaluate import evaluate


@flow(name="evaluate", flow_run_name="evaluate-{method}")
def evaluate_flow(params_path: Path = Path("params.yaml"), method: str = "seed",
                  parent_run_id: str | None = None) -> dict[str, float]:
    cfg = load_config(params_path)
    paths = stage_paths(cfg)
    checkpoint, out = paths.checkpoint(method), paths.eval(method)
    with stage_run(cfg, f"eval-{method}", "eval", [checkpoint], parent_run_id) as tracker:
        tracker.set_tags({"method": method})
        metrics = finish(tracker, out, evaluate(cfg, checkpoint, out, method, tracker))
        # the base model is not registered; a "*" score (skills in the prompt) must not move the checkpoint's alias
        if cfg.tracking.register_models and method != "vanilla" and not METHODS.get(method).with_skills:
            md5 = next(iter(dvc_lock_md5s([checkpoint]).values()), None)
            tracker.record_evaluation(model_name(cfg, method), metrics, md5)  # moves best-success_rate
        return metrics


if __name__ == "__main__":
    args = parse_args("evaluate", "method")
    run_stage(evaluate_flow, params_path=args.params, method=args.method)
