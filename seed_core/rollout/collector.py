"""The one episode loop, ``play_episodes``, and the batched multi-turn policy rollout on it (GRPO groups).

The loop steps a batch of episodes until each env says ``done`` (``TimeLimit`` in ``seed_core.envs.base``
owns ``env.max_steps``; the loop has no limit of its own). An *actor* ``act(active, prompts, t)`` answers
each step: the policy (``rollout``, for RL, collect and evaluation: one ``backend.generate`` call per step,
seed ``seed * 1000 + t``) or the expert (``seed_core.rollout.expert``).

Every environment step becomes one ``StepRecord`` (seed-algorithm.md §1.1): the prompt is the env's
template over a window of the last ``history_length`` (observation, action) pairs, the response is the
actor's answer for that step only. The ``group_size`` episodes of a task share ``group_id`` and
seed (they play the same game); finished episodes stop early and leave the batch.

Episode-level fields repeated on every step: ``episode_return`` (sum of rewards), ``success`` (won at
any step), ``episode_length`` and ``score`` (the last partial task score the env reported, e.g.
WebShop's purchase score; ``None`` for envs that report none, see ``seed_core.types``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count
from typing import Any, Callable, Sequence

from tqdm.auto import tqdm

from seed_core.config import EnvConfig
from seed_core.envs import make_env
from seed_core.envs.base import TextEnv, TimeLimit
from seed_core.rollout.completion import Completion
from seed_core.skills.insert import insert_episode_skill
from seed_core.types import HistoryItem, StepRecord, Task


@dataclass
class Episode:
    task: Task
    group_id: str
    traj_id: str
    env: TextEnv
    observation: str
    skill: str = ""
    history: list[HistoryItem] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    won: bool = False
    score: float | None = None

    @classmethod
    def start(cls, env_cfg: EnvConfig, task: Task, group_id: str, j: int = 0, skill: str = "") -> Episode:
        """Episode ``j`` of ``group_id``: a fresh env reset to ``task`` (trajectory id ``<group_id>/<j>``)."""
        env = make_env(env_cfg)
        return cls(task, group_id, f"{group_id}/{j}", env, env.reset(task), skill)


Actor = Callable[[list[Episode], list[str], int], Sequence[Completion]]  # one completion per active episode


def _finish(ep: Episode) -> list[StepRecord]:
    episode_return = float(sum(s["reward"] for s in ep.steps))
    return [
        StepRecord(**s, episode_return=episode_return, success=ep.won, episode_length=len(ep.steps), score=ep.score)
        for s in ep.steps
    ]


def rollout(
    env_cfg: EnvConfig,
    tasks: Sequence[Task],
    backend: Any,
    *,
    group_size: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    policy_version: str,
    group_tag: str = "",
    skills: dict[str, str] | None = None,
    progress: bool = True,
) -> list[StepRecord]:
    """Play ``group_size`` episodes of every task with ``backend`` and return their step records.

    ``skills`` maps task ids to an episode skill inserted into every prompt (the ``skill_prompt``
    evaluation baseline); training rollouts never pass it. ``group_tag`` makes group ids unique
    across rounds.
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    episodes = [Episode.start(env_cfg, task, f"{group_tag}{task.task_id}", j, (skills or {}).get(task.task_id, ""))
                for task in tasks for j in range(group_size)]

    def act(active: list[Episode], prompts: list[str], t: int) -> Sequence[Completion]:
        return backend.generate(prompts, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed * 1000 + t)

    return play_episodes(env_cfg, episodes, act, policy_version, progress)


def play_episodes(env_cfg: EnvConfig, episodes: list[Episode], act: Actor, policy_version: str,
                  progress: bool = False) -> list[StepRecord]:
    """Step every episode until its env says ``done``; the records, episode by episode. An env that does not
    subclass ``TimeLimit`` is refused: nothing would end it. (``env.max_steps`` sizes the progress bar only.)"""
    if bad := [type(ep.env).__name__ for ep in episodes if not isinstance(ep.env, TimeLimit)]:
        raise TypeError(f"play_episodes: {bad[0]} does not subclass seed_core.envs.base.TimeLimit (env.max_steps)")
    bar = tqdm(total=env_cfg.max_steps, desc="rollout", unit="step", disable=not progress, leave=False)
    for t in count():
        active = [ep for ep in episodes if not ep.done]
        if not active:
            break
        prompts = []
        for ep in active:
            window = ep.history[-env_cfg.history_length:] if env_cfg.history_length > 0 else []
            prompt = ep.env.build_prompt(ep.observation, window, t)
            prompts.append(insert_episode_skill(prompt, ep.skill) if ep.skill else prompt)
        for ep, prompt, comp in zip(active, prompts, act(active, prompts, t), strict=True):
            parsed = ep.env.parse_action(comp.text)
            result = ep.env.step(parsed.action)
            ep.steps.append(dict(
                env=ep.task.env, split=ep.task.split, task_id=ep.task.task_id,
                task_type=ep.task.task_type, seed=ep.task.seed, group_id=ep.group_id,
                traj_id=ep.traj_id, step=t, observation=ep.observation, prompt=prompt,
                response=comp.text, response_ids=list(comp.token_ids),
                sampling_logprobs=[float(x) for x in comp.logprobs], action=parsed.action,
                format_valid=parsed.valid, reward=float(result.reward), done=result.done,
                policy_version=policy_version,
            ))
            ep.history.append(HistoryItem(step=t, observation=ep.observation, action=parsed.action))
            ep.observation = result.observation
            ep.won = ep.won or result.won
            ep.score = result.score if result.score is not None else ep.score
            ep.done = result.done
        bar.update(1)
        bar.set_postfix(active=len(active), won=sum(ep.won for ep in episodes))
    bar.close()
    return [rec for ep in episodes for rec in _finish(ep)]


def group_by_trajectory(records: Sequence[StepRecord]) -> dict[str, list[StepRecord]]:
    """traj_id -> its steps in step order (insertion order of trajectories is kept)."""
    out: dict[str, list[StepRecord]] = {}
    for rec in records:
        out.setdefault(rec.traj_id, []).append(rec)
    for steps in out.values():
        steps.sort(key=lambda r: r.step)
    return out


def rollout_metrics(records: Sequence[StepRecord], prefix: str) -> dict[str, float]:
    """Episode-level success/return/length, step-level format validity, and ``<prefix>/score`` (mean
    partial task score) only when the episodes carry one (WebShop)."""
    trajs = group_by_trajectory(records)
    if not trajs:
        return {f"{prefix}/episodes": 0.0}
    firsts = [steps[0] for steps in trajs.values()]
    n = len(firsts)
    metrics = {
        f"{prefix}/episodes": float(n),
        f"{prefix}/success_rate": sum(r.success for r in firsts) / n,
        f"{prefix}/mean_return": sum(r.episode_return for r in firsts) / n,
        f"{prefix}/mean_length": sum(r.episode_length for r in firsts) / n,
        f"{prefix}/format_valid_rate": sum(r.format_valid for r in records) / len(records),
        f"{prefix}/response_tokens": float(sum(len(r.response_ids) for r in records)),
    }
    scores = [r.score for r in firsts if r.score is not None]
    if scores:
        metrics[f"{prefix}/score"] = sum(scores) / len(scores)
    return metrics
