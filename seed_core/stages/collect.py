"""Stage 1a: collect ordinary agent trajectories with the base policy (paper: 180 tasks x 8 rollouts).

    python -m seed_core.stages.collect --config params.yaml --model data/models/smollm2-135m-instruct --out data/collect
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from seed_core.config import SeedConfig
from seed_core.data_gen.task_sets import require_tasks, task_seed, write_tasks
from seed_core.envs import make_env
from seed_core.loader import config_from_args, stage_errors, stage_parser
from seed_core.modeling.models import load_policy
from seed_core.repro.numerics import write_resolved
from seed_core.rollout.backends import make_backend
from seed_core.rollout.collector import rollout, rollout_metrics
from seed_core.rollout.expert import play_expert
from seed_core.runtime.io import write_json, write_records
from seed_core.runtime.services import ServiceUnavailableError, check_services
from seed_core.tracking import NullTracker, Tracker
from seed_core.types import StepRecord

log = logging.getLogger(__name__)


def run_collect(cfg: SeedConfig, model_dir: Path, out_dir: Path, tracker: Tracker | None = None) -> dict[str, float]:
    """Writes trajectories.parquet, tasks.json, expert.parquet (empty unless collect.expert_episodes > 0), metrics.json."""
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    check_services(cfg)  # retriever / engines answer before the model loads
    env = make_env(cfg.env)
    seed = task_seed(cfg, "collect")
    tasks = require_tasks(env.make_tasks("train", cfg.collect.num_tasks, seed=seed), cfg, "train",
                          cfg.collect.num_tasks)
    policy = load_policy(cfg.model, model_dir, trainable=False)
    backend = make_backend(policy, cfg.generation)
    log.info("collect: %d %s tasks x %d episodes with %s", len(tasks), cfg.env.name, cfg.collect.group_size, model_dir)
    records = rollout(cfg.env, tasks, backend, group_size=cfg.collect.group_size,
                      temperature=cfg.generation.temperature, max_new_tokens=cfg.generation.max_new_tokens,
                      seed=seed, policy_version="base", group_tag="collect:")
    metrics = rollout_metrics(records, "collect")
    expert_tasks = env.make_tasks("train", cfg.collect.expert_episodes, seed=seed + 1) if cfg.collect.expert_episodes else []
    expert = play_expert(cfg.env, expert_tasks)
    if expert:
        metrics.update(rollout_metrics(expert, "expert"))
    write_records(expert, out_dir / "expert.parquet", StepRecord)
    all_tasks = list(tasks) + list(expert_tasks)
    write_records(records, out_dir / "trajectories.parquet", StepRecord)
    write_tasks(all_tasks, out_dir / "tasks.json")
    metrics["time/collect_s"] = time.perf_counter() - t0
    log.info("collect: success rate %.3f over %d episodes in %.0f s", metrics["collect/success_rate"],
             int(metrics["collect/episodes"]), metrics["time/collect_s"])
    write_json(out_dir / "metrics.json", metrics)
    write_resolved(cfg, out_dir / "resolved_config.json")  # with the numerics it ran under
    (tracker or NullTracker()).log_metrics(metrics)
    return metrics


def main() -> None:
    parser = stage_parser("Stage 1: collect trajectories with the base policy")
    parser.add_argument("--model", required=True, help="base model directory")
    parser.add_argument("--out", required=True, help="output directory, e.g. data/collect")
    args = parser.parse_args()

    with stage_errors("collect", ServiceUnavailableError):  # the message names the service, its URL and the fix
        print(run_collect(config_from_args(args), Path(args.model), Path(args.out)))


if __name__ == "__main__":
    main()
