"""The analyzer audit: how sound a round's hindsight analyses are (issue 39), for every row that analyzes.

Every analyzing round logs, under ``<prefix>/`` (``analysis/`` for the round's own analyses, ``audit/`` for a
governance panel):

* ``analyses`` = #analyses (the denominator of every share below: the round's, over every process);
* ``parse_ok_rate`` = #{analyses with a non-empty parsed ``episode_skill``} / #analyses;
* the failure categories, each a share of all analyses, summing to 1 - parse_ok_rate (``failure_category``):
  ``fail_truncated`` (the answer used the whole ``analyzer_max_new_tokens`` budget and did not parse),
  ``fail_invalid_json`` (no JSON object), ``fail_missing_field`` (no ``episode_skill``), ``fail_empty_skill``
  (an empty one) and ``fail_call`` (the client returned no usable text);
* ``skill_correct`` = #{analyses whose parsed skill the environment's ``judge_skill`` accepts} / #analyses (a
  failed parse counts as wrong), where the environment has a judge.

Teacher coverage and the teacher gap at decision tokens come from the update (``rl/teacher_coverage``,
``rl/teacher_gap_decision``, ``seed_core.trainer.rl_step``). ``warn_if_unsound`` prints one warning line when a
round's parse rate falls below ``PARSE_WARN_BELOW``, or its parsed skills copy the answer skeleton's placeholder as
often (``placeholder_share``, ``seed_core.analyzer.parse.skill_metrics``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from seed_core.algorithms import ALGORITHMS
from seed_core.data_gen.task_sets import read_tasks
from seed_core.envs import ENVS
from seed_core.runtime.io import read_records
from seed_core.types import AnnotationRecord, StepRecord, Task

log = logging.getLogger(__name__)

FAILURES = ("truncated", "invalid_json", "missing_field", "empty_skill", "call")
"""The failure categories of an analysis that did not parse, in the order ``failure_category`` tests them."""

PARSE_WARN_BELOW = 0.5
"""A round whose analyses parse less often than this gets one warning line: its teacher is mostly absent (the
mechanism lab's live analyzer fell from 0.99 to 0.21 over 20 rounds; SEED-static's frozen one stayed >= 0.96)."""


def failure_category(record: AnnotationRecord, max_new_tokens: int) -> str | None:
    """Why ``record`` gave no skill (one of ``FAILURES``), or None when it parsed. Truncation wins over the parse
    error it causes: an answer cut at the token budget is a length problem, not a format one."""
    if record.ok:
        return None
    if record.completion_tokens >= max_new_tokens > 0:
        return "truncated"
    error = record.error or ""
    if "no JSON object" in error:
        return "invalid_json"
    if "is missing" in error:
        return "missing_field"
    if "is empty" in error or (record.parse_status == "ok" and not record.episode_skill.strip()):
        return "empty_skill"
    return "call"


def skill_correctness(judge: Any, annotations: Sequence[AnnotationRecord], tasks: dict[str, Task]) -> float | None:
    """#{analyses whose parsed episode skill ``judge(task, skill)`` accepts} / #analyses (a failed parse is a wrong
    skill); ``tasks``: traj_id -> Task. None without a judge or without analyses."""
    if judge is None or not annotations:
        return None
    return sum(bool(a.ok and judge(tasks[a.traj_id], a.episode_skill)) for a in annotations) / len(annotations)


def skill_correct_metrics(env: Any, annotations: Sequence[AnnotationRecord], records: Sequence[StepRecord],
                          tasks: dict[str, Task], prefix: str) -> dict[str, float]:
    """``<prefix>/skill_correct`` (``skill_correctness``) of a round's analyses, when the environment has a judge;
    ``tasks``: task_id -> Task, ``records`` give each trajectory's task."""
    by_traj = {r.traj_id: tasks[r.task_id] for r in records}
    value = skill_correctness(getattr(env, "judge_skill", None), [a for a in annotations if a.traj_id in by_traj],
                              by_traj)
    return {} if value is None else {f"{prefix}/skill_correct": value}


def audit_metrics(env: Any, annotations: Sequence[AnnotationRecord], records: Sequence[StepRecord],
                  tasks: dict[str, Task], max_new_tokens: int, prefix: str) -> dict[str, float]:
    """Parse rate, the failure categories and (with a judge) correctness of ``annotations`` (module docstring)."""
    n = max(len(annotations), 1)
    categories = [failure_category(a, max_new_tokens) for a in annotations]
    out = {f"{prefix}/analyses": float(len(annotations)),
           f"{prefix}/parse_ok_rate": sum(c is None for c in categories) / n}
    out.update({f"{prefix}/fail_{name}": categories.count(name) / n for name in FAILURES})
    out.update(skill_correct_metrics(env, annotations, records, tasks, prefix))
    return out


def token_budget(cfg: Any, algorithm: Any) -> int:
    """The answer's token budget that marks a truncated analysis: the self-analyzer's (``rl.analyzer_max_new_tokens``),
    the Stage-1 client's (``annotate.max_tokens``) for the ``annotate`` analyzer, none (0) for any other."""
    if algorithm.analyzer_governance:
        return cfg.rl.analyzer_max_new_tokens
    return cfg.annotate.max_tokens if algorithm.analyzer == "annotate" else 0


def skill_sample(env: Any, annotations: Sequence[AnnotationRecord], records: Sequence[StepRecord],
                 tasks: dict[str, Task], max_new_tokens: int, rows: int) -> list[dict[str, Any]]:
    """Up to ``rows`` of the analyses, evenly spaced in their order, one row each: the trajectory, its task and
    outcome, the skill text, whether it parsed (else its ``failure_category`` and error) and whether the environment's
    ``judge_skill`` accepts it (None without a judge); ``tasks``: task_id -> Task."""
    judge = getattr(env, "judge_skill", None)
    episode = {r.traj_id: r for r in records}  # any step: task and outcome are the episode's
    out = []
    for a in list(annotations)[::max(1, -(-len(annotations) // max(rows, 1)))][:rows]:
        step = episode.get(a.traj_id)
        task = tasks.get(step.task_id) if step is not None else None
        correct = None if judge is None or task is None else bool(a.ok and judge(task, a.episode_skill))
        out.append({"traj_id": a.traj_id, "task_id": getattr(step, "task_id", ""),
                    "task_type": getattr(step, "task_type", ""), "episode_success": getattr(step, "success", None),
                    "parsed": a.ok, "failure": failure_category(a, max_new_tokens) or "", "correct": correct,
                    "skill": a.episode_skill, "error": a.error[:300]})
    return out


def round_skill_sample(cfg: Any, round_path: Path, rows: int) -> list[dict[str, Any]]:
    """``skill_sample`` of a finished RL round's directory (its annotations, trajectories and tasks), judged by the
    configured environment where it has a judge; [] when the round has no analyses."""
    annotations = read_records(round_path / "annotations.parquet", AnnotationRecord)
    if not annotations:
        return []
    env_class = ENVS.get(cfg.env.name)  # built only when it can judge a skill
    env = env_class(cfg.env) if hasattr(env_class, "judge_skill") else None
    return skill_sample(env, annotations, read_records(round_path / "trajectories.parquet", StepRecord),
                        read_tasks(round_path / "tasks.json"), token_budget(cfg, ALGORITHMS.get(cfg.rl.algorithm)),
                        rows)


def warn_if_unsound(metrics: dict[str, float], algorithm: str, round_idx: int, prefix: str = "analysis") -> bool:
    """One warning line when the round's parse rate is below ``PARSE_WARN_BELOW``, or when as many of its parsed
    skills copied the answer skeleton's placeholder (``<prefix>/placeholder_share``); returns whether it warned."""
    rate = metrics.get(f"{prefix}/parse_ok_rate")
    copied = metrics.get(f"{prefix}/placeholder_share", 0.0)
    if rate is not None and rate >= PARSE_WARN_BELOW and copied >= PARSE_WARN_BELOW:
        log.warning("rl %s round %d: %.0f%% of the analyzer's parsed skills are the answer skeleton's placeholder "
                    "(at least %.0f%%): its teacher is shown no skill this round; see %s/* in curve.csv", algorithm,
                    round_idx, 100 * copied, 100 * PARSE_WARN_BELOW, prefix)
        return True
    if rate is None or rate >= PARSE_WARN_BELOW:
        return False
    worst = max(FAILURES, key=lambda name: metrics.get(f"{prefix}/fail_{name}", 0.0))
    log.warning("rl %s round %d: the analyzer parsed %.0f%% of its analyses (below %.0f%%; most failures: %s, "
                "%.0f%%): its teacher is mostly absent this round; see %s/* in curve.csv", algorithm, round_idx,
                100 * rate, 100 * PARSE_WARN_BELOW, worst, 100 * metrics.get(f"{prefix}/fail_{worst}", 0.0), prefix)
    return True
