"""Evaluation: the policy alone (no analyzer, no skill), success per environment, split and task type.

    python -m seed_core.stages.evaluate --config params.yaml --checkpoint data/rl/seed/checkpoint --method seed --out data/eval/seed

A "*" method (``skill_grpo_star``, ``seed_core.methods``) plays every task with the static skill of its task
type in the prompt (``seed_core.skills.static``), never a skill derived from the episode being evaluated:
the paper's "*" rows (Skill-GRPO*). With ``eval.with_skills`` a plain method also plays those episodes,
recorded as its "*" method (``<method>_star``, metrics ``eval/with_skills/...``). With ``eval.skill_prompt``
it also runs the ``skill_prompt`` baseline: each task is played once, the policy analyses its own episode,
and the task is replayed with that skill in the prompt (rows ``<method>_replay``; a second attempt with
feedback, *not* the paper's "*" rows). All of these rows have ``skill_prompt = True``.

Which instances: each split's fixed panel ``data/panels/<env>-<split>.json`` (``seed_core.data_gen.task_sets``), its
first ``eval.num_tasks`` ids in panel order, the same on every machine; a missing panel stops the stage naming
the file and the command that writes it. Each instance is played ``eval.repeats`` times (repeat ``r`` samples
with ``task_seed(cfg, "eval", r)``, so repeat 0 is the same episode whatever ``eval.repeats``); the rates are
means over all episodes (the papers' avg@k) and ``episodes.parquet`` keeps one row per episode (``task_id``,
``repeat``): the per-instance results (``per_instance``).

Metrics (``metrics.json`` and the tracker): ``eval/success_rate``, ``eval/<split>/success_rate`` and
``eval/<split>/<task_type>/success_rate``; for environments with a partial task score (WebShop) the
same keys with ``score`` (mean score in [0, 1]; the paper's WebShop "Score" is it x 100). Score keys
exist only where episodes carry a score: no score is invented for success-only environments.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from seed_core.analyzer.annotate import annotate_trajectories, skills_by_traj
from seed_core.analyzer.clients import CLIENTS
from seed_core.config import SeedConfig, project_root
from seed_core.data_gen.task_sets import panel_tasks, task_seed
from seed_core.envs import make_env
from seed_core.loader import config_from_args, stage_errors, stage_parser
from seed_core.methods import METHODS, STAR
from seed_core.modeling.models import load_policy
from seed_core.repro.numerics import write_resolved
from seed_core.rollout.backends import make_backend
from seed_core.rollout.collector import group_by_trajectory, rollout, rollout_metrics
from seed_core.runtime.io import write_json, write_records
from seed_core.runtime.logs import Progress
from seed_core.runtime.services import ServiceUnavailableError, check_services
from seed_core.tracking import NullTracker, Tracker
from seed_core.types import EvalRecord, StepRecord, Task

if TYPE_CHECKING:
    from seed_core.envs.base import TextEnv

log = logging.getLogger(__name__)


def to_eval_records(records: Sequence[StepRecord], method: str, checkpoint: str, skill_prompt: bool,
                    repeat: int = 0) -> list[EvalRecord]:
    out = []
    for steps in group_by_trajectory(records).values():
        r = steps[0]
        out.append(EvalRecord(method=method, env=r.env, split=r.split, task_id=r.task_id, task_type=r.task_type,
                              seed=r.seed, success=r.success, episode_return=r.episode_return,
                              length=r.episode_length, skill_prompt=skill_prompt, checkpoint=checkpoint,
                              score=r.score, repeat=repeat,
                              format_valid_rate=sum(step.format_valid for step in steps) / len(steps)))
    return out


def per_instance(rows: Sequence[EvalRecord]) -> list[dict[str, object]]:
    """One row per (method, split, task_id): its episodes, their success rate and mean score (None without
    scores), in first-played order: the per-instance results behind an avg@k."""
    groups: dict[tuple[str, str, str], list[EvalRecord]] = {}
    for r in rows:
        groups.setdefault((r.method, r.split, r.task_id), []).append(r)
    out: list[dict[str, object]] = []
    for (method, split, task_id), eps in groups.items():
        scores = [e.score for e in eps if e.score is not None]
        out.append({"method": method, "split": split, "task_id": task_id, "task_type": eps[0].task_type,
                    "episodes": len(eps), "success_rate": sum(e.success for e in eps) / len(eps),
                    "score": sum(scores) / len(scores) if scores else None})
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
    metrics["eval/instances"] = float(len({(r.split, r.task_id) for r in plain}))
    skilled = [r for r, mine in zip(rows, own) if r.skill_prompt and not mine]
    if skilled:
        metrics[f"eval/{skilled_key}/success_rate"] = sum(r.success for r in skilled) / len(skilled)
        scores = [r.score for r in skilled if r.score is not None]
        if scores:
            metrics[f"eval/{skilled_key}/score"] = sum(scores) / len(scores)
    return metrics


def eval_tasks(cfg: SeedConfig, env: TextEnv) -> dict[str, list[Task]]:
    """split -> the tasks evaluation plays: the panel's first ``eval.num_tasks`` instances (``panel_tasks``)."""
    return {split: panel_tasks(cfg, env, split) for split in cfg.eval.splits}


def play_panel(cfg: SeedConfig, env: TextEnv, backend: Any, split: str, tasks: Sequence[Task], repeat: int,
               library: Any, method: str, checkpoint: str, bar: Progress) -> tuple[list[EvalRecord], int]:
    """Repeat ``repeat`` of every task of ``split`` (sampling seed ``task_seed(cfg, "eval", repeat)``): the
    method's rows, its ``_replay`` rows (``eval.skill_prompt``) and its static-skill rows (``library``).
    Returns the rows and the response tokens generated."""
    starred = method in METHODS and METHODS.get(method).with_skills
    play = dict(group_size=1, temperature=cfg.generation.eval_temperature, max_new_tokens=cfg.generation.max_new_tokens,
                seed=task_seed(cfg, "eval", repeat), policy_version=method,
                group_tag=f"eval:{split}:" + (f"r{repeat}:" if repeat else ""))
    rows: list[EvalRecord] = []
    tokens = 0

    def record(records: list[StepRecord], name: str, skilled: bool, **note: object) -> None:
        nonlocal tokens
        tokens += sum(len(r.response_ids) for r in records)
        rows.extend(to_eval_records(records, name, checkpoint, skill_prompt=skilled, repeat=repeat))
        bar.update(1, split=split, repeat=repeat, **note)

    if not starred:  # a "*" method plays with the static skills only; extra episodes belong to plain ones
        records = rollout(cfg.env, tasks, backend, **play)
        record(records, method, False, success=f"{rollout_metrics(records, 'eval')['eval/success_rate']:.3f}")
        if cfg.eval.skill_prompt:
            client = CLIENTS.get("policy")(cfg, env=env, backend=backend)
            notes = annotate_trajectories(group_by_trajectory(records), {t.task_id: t for t in tasks}, client,
                                          parse_attempts=cfg.annotate.parse_attempts, policy_version=method, env=env)
            by_traj = skills_by_traj(notes)
            skills = {r.task_id: by_traj[r.traj_id] for r in records if r.traj_id in by_traj}
            record(rollout(cfg.env, tasks, backend, skills=skills, **play), f"{method}_replay", True, replay=True)
    if library is not None:
        static = {t.task_id: library.skill_for(t.task_type, t.task_id) for t in tasks}
        record(rollout(cfg.env, tasks, backend, skills=static, **play), method if starred else method + STAR, True,
               static_skills=True)
    return rows, tokens


def checkpoint_label(checkpoint: str | Path) -> str:
    """The rows' ``checkpoint`` column: project-relative (``data/rl/seed/checkpoint``) for a checkpoint inside the
    project, else the path as given; an absolute path made the same evaluation another episodes.parquet (and DVC
    hash) in every workspace."""
    path, root = Path(checkpoint).absolute(), project_root().absolute()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(checkpoint)


def run_evaluate(cfg: SeedConfig, checkpoint: Path, out_dir: Path, method: str,
                 tracker: Tracker | None = None) -> dict[str, float]:
    """Writes episodes.parquet (EvalRecord rows, one per episode) and metrics.json; ``method`` names the rows,
    and a "*" method (``seed_core.methods``) plays with the static skills only. Every split plays its fixed
    panel (``eval_tasks``) ``eval.repeats`` times."""
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    check_services(cfg)  # retriever / engines answer before the model loads
    env = make_env(cfg.env)
    split_tasks = eval_tasks(cfg, env)  # before the model loads: a missing panel or empty split stops here
    if cfg.eval.with_skills and cfg.eval.skill_prompt:
        raise ValueError("eval.with_skills and eval.skill_prompt both add skill-prompted rows; set one of them")
    starred = method in METHODS and METHODS.get(method).with_skills
    library = None
    if starred or cfg.eval.with_skills:  # "*" rows: the static skill of the task's type, never the episode's
        from seed_core.skills.static import for_config

        library = for_config(cfg)
    policy = load_policy(cfg.model, checkpoint, trainable=False)
    backend = make_backend(policy, cfg.generation)
    rows: list[EvalRecord] = []
    tokens = 0
    passes = (not starred) * (1 + cfg.eval.skill_prompt) + (library is not None)  # rollouts per split and repeat
    bar = Progress(log, f"evaluate {method}", passes * len(split_tasks) * cfg.eval.repeats, "rollout", every_s=0.0,
                   bar=False)
    for split, tasks in split_tasks.items():
        for repeat in range(cfg.eval.repeats):
            new_rows, new_tokens = play_panel(cfg, env, backend, split, tasks, repeat, library, method,
                                              checkpoint_label(checkpoint), bar)
            rows += new_rows
            tokens += new_tokens
    bar.close()
    write_records(rows, out_dir / "episodes.parquet", EvalRecord)
    metrics = success_table(rows, "with_skills" if cfg.eval.with_skills else "skill_prompt", method)
    metrics["eval/repeats"] = float(cfg.eval.repeats)
    metrics["time/eval_s"] = time.perf_counter() - t0
    metrics["eval/tokens_per_s"] = tokens / max(metrics["time/eval_s"], 1e-9)
    write_json(out_dir / "metrics.json", metrics)
    write_resolved(cfg, out_dir / "resolved_config.json")  # with the numerics it ran under
    (tracker or NullTracker()).log_metrics(metrics)
    return metrics


def main() -> None:
    parser = stage_parser("Evaluate a checkpoint with the policy alone")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--method", required=True, help="row label in the tables, e.g. grpo, seed, vanilla")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    with stage_errors("evaluate", ServiceUnavailableError):  # the message names the service, its URL and the fix
        print(run_evaluate(config_from_args(args), Path(args.checkpoint), Path(args.out), args.method))


if __name__ == "__main__":
    main()
