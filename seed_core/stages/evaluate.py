"""Evaluation: the policy alone (no analyzer, no skill), success per environment, split and task type.

    python -m seed_core.stages.evaluate --config params.yaml --checkpoint data/rl/seed/checkpoint --method seed --out data/eval/seed

A "*" method (``skill_grpo_star``, ``seed_core.methods``) plays every task with the static skill of its task
type in the prompt (``seed_core.static_skills``), never a skill derived from the episode being evaluated:
the paper's "*" rows (Skill-GRPO*). With ``eval.with_skills`` a plain method also plays those episodes,
recorded as its "*" method (``<method>_star``, metrics ``eval/with_skills/...``). With ``eval.skill_prompt``
it also runs the ``skill_prompt`` baseline: each task is played once, the policy analyses its own episode,
and the task is replayed with that skill in the prompt (rows ``<method>_replay``; a second attempt with
feedback, *not* the paper's "*" rows). All of these rows have ``skill_prompt = True``.

Metrics (``metrics.json`` and the tracker): ``eval/success_rate``, ``eval/<split>/success_rate`` and
``eval/<split>/<task_type>/success_rate``; for environments with a partial task score (WebShop) the
same keys with ``score`` (mean score in [0, 1]; the paper's WebShop "Score" is it x 100). Score keys
exist only where episodes carry a score: no score is invented for success-only environments.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Sequence

from seed_core.config import SeedConfig, dump_resolved
from seed_core.io import write_json, write_records
from seed_core.loader import config_from_args, stage_errors, stage_parser
from seed_core.logs import Progress
from seed_core.task_sets import require_tasks, task_seed
from seed_core.tracking import NullTracker, Tracker
from seed_core.types import EvalRecord, StepRecord

log = logging.getLogger(__name__)


def to_eval_records(records: Sequence[StepRecord], method: str, checkpoint: str, skill_prompt: bool) -> list[EvalRecord]:
    from seed_core.rollout.collector import group_by_trajectory

    out = []
    for steps in group_by_trajectory(records).values():
        r = steps[0]
        out.append(EvalRecord(method=method, env=r.env, split=r.split, task_id=r.task_id, task_type=r.task_type,
                              seed=r.seed, success=r.success, episode_return=r.episode_return,
                              length=r.episode_length, skill_prompt=skill_prompt, checkpoint=checkpoint,
                              score=r.score,
                              format_valid_rate=sum(step.format_valid for step in steps) / len(steps)))
    return out


def success_table(rows: Sequence[EvalRecord], skilled_key: str = "skill_prompt",
                  method: str | None = None) -> dict[str, float]:
    """success_rate (and score, where episodes have one) overall, per split, per split/task_type (keys
    ``eval/...``) for the method's own rows (``method``; None = the rows without skills);
    ``eval/<skilled_key>/...`` for the extra rows (``with_skills`` for the static-skill "*" rows)."""
    own = [r.method == method if method is not None else not r.skill_prompt for r in rows]
    plain = [r for r, mine in zip(rows, own) if mine]
    metrics: dict[str, float] = {}
    groups: dict[str, list[float]] = {"eval/success_rate": [float(r.success) for r in plain]}
    for r in plain:
        for scope in (f"eval/{r.split}", f"eval/{r.split}/{r.task_type}"):
            groups.setdefault(f"{scope}/success_rate", []).append(float(r.success))
            if r.score is not None:
                groups.setdefault(f"{scope}/score", []).append(r.score)
        if r.score is not None:
            groups.setdefault("eval/score", []).append(r.score)
    for key, values in groups.items():
        metrics[key] = sum(values) / len(values) if values else 0.0
    metrics["eval/episodes"] = float(len(plain))
    skilled = [r for r, mine in zip(rows, own) if r.skill_prompt and not mine]
    if skilled:
        metrics[f"eval/{skilled_key}/success_rate"] = sum(r.success for r in skilled) / len(skilled)
        scores = [r.score for r in skilled if r.score is not None]
        if scores:
            metrics[f"eval/{skilled_key}/score"] = sum(scores) / len(scores)
    return metrics


def run_evaluate(cfg: SeedConfig, checkpoint: Path, out_dir: Path, method: str,
                 tracker: Tracker | None = None) -> dict[str, float]:
    """Writes episodes.parquet (EvalRecord rows) and metrics.json; ``method`` names the rows, and a "*"
    method (``seed_core.methods``) plays with the static skills only."""
    from seed_core.analyzer.annotate import annotate_trajectories, skills_by_traj
    from seed_core.analyzer.clients import CLIENTS
    from seed_core.envs import make_env
    from seed_core.methods import METHODS, STAR
    from seed_core.models import load_policy
    from seed_core.rollout.backends import BACKENDS
    from seed_core.rollout.collector import group_by_trajectory, rollout, rollout_metrics

    from seed_core.preflight import check_services

    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    check_services(cfg)  # retriever / engines answer before the model loads
    env = make_env(cfg.env)
    seed = task_seed(cfg, "eval")
    split_tasks = {split: require_tasks(env.make_tasks(split, cfg.eval.num_tasks, seed=seed), cfg, split,
                                        cfg.eval.num_tasks) for split in cfg.eval.splits}  # before the model loads
    if cfg.eval.with_skills and cfg.eval.skill_prompt:
        raise ValueError("eval.with_skills and eval.skill_prompt both add skill-prompted rows; set one of them")
    starred = method in METHODS and METHODS.get(method).with_skills
    plain = not starred  # a "*" method plays with the static skills only; extra episodes belong to plain ones
    library = None
    if starred or cfg.eval.with_skills:  # "*" rows: the static skill of the task's type, never the episode's
        from seed_core.static_skills import for_config

        library = for_config(cfg)
    policy = load_policy(cfg.model, checkpoint, trainable=False)
    backend = BACKENDS.get(cfg.generation.backend)(policy, cfg.generation)
    rows: list[EvalRecord] = []
    tokens = 0
    passes = plain + (plain and cfg.eval.skill_prompt) + (library is not None)  # rollouts per split
    bar = Progress(log, f"evaluate {method}", passes * len(split_tasks), "rollout", every_s=0.0, bar=False)
    for split, tasks in split_tasks.items():
        play = dict(group_size=1, temperature=cfg.generation.eval_temperature,
                    max_new_tokens=cfg.generation.max_new_tokens, seed=seed, policy_version=method,
                    group_tag=f"eval:{split}:")
        if plain:
            records = rollout(cfg.env, tasks, backend, **play)
            tokens += sum(len(r.response_ids) for r in records)
            rows += to_eval_records(records, method, str(checkpoint), skill_prompt=False)
            bar.update(1, split=split, success=f"{rollout_metrics(records, 'eval')['eval/success_rate']:.3f}")
        if plain and cfg.eval.skill_prompt:
            client = CLIENTS.get("policy")(cfg, env=env, backend=backend)
            notes = annotate_trajectories(group_by_trajectory(records), {t.task_id: t for t in tasks}, client,
                                          parse_attempts=cfg.annotate.parse_attempts, policy_version=method, env=env)
            by_traj = skills_by_traj(notes)
            skills = {r.task_id: by_traj[r.traj_id] for r in records if r.traj_id in by_traj}
            replay = rollout(cfg.env, tasks, backend, skills=skills, **play)
            tokens += sum(len(r.response_ids) for r in replay)
            rows += to_eval_records(replay, f"{method}_replay", str(checkpoint), skill_prompt=True)
            bar.update(1, split=split, replay=True)
        if library is not None:
            static = {t.task_id: library.skill_for(t.task_type, t.task_id) for t in tasks}
            with_skills = rollout(cfg.env, tasks, backend, skills=static, **play)
            tokens += sum(len(r.response_ids) for r in with_skills)
            rows += to_eval_records(with_skills, method if starred else method + STAR, str(checkpoint),
                                    skill_prompt=True)
            bar.update(1, split=split, static_skills=True)
    bar.close()
    write_records(rows, out_dir / "episodes.parquet", EvalRecord)
    metrics = success_table(rows, "with_skills" if cfg.eval.with_skills else "skill_prompt", method)
    metrics["time/eval_s"] = time.perf_counter() - t0
    metrics["eval/tokens_per_s"] = tokens / max(metrics["time/eval_s"], 1e-9)
    write_json(out_dir / "metrics.json", metrics)
    dump_resolved(cfg, out_dir / "resolved_config.json")
    (tracker or NullTracker()).log_metrics(metrics)
    return metrics


def main() -> None:
    parser = stage_parser("Evaluate a checkpoint with the policy alone")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--method", required=True, help="row label in the tables, e.g. grpo, seed, vanilla")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    from seed_core.preflight import ServiceUnavailableError

    with stage_errors("evaluate", ServiceUnavailableError):  # the message names the service, its URL and the fix
        print(run_evaluate(config_from_args(args), Path(args.checkpoint), Path(args.out), args.method))


if __name__ == "__main__":
    main()
