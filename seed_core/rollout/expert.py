"""Expert demonstrations: the environment's expert plays, its actions wrapped in well-formed responses.

Used for the optional warm-start SFT and as the upper reference in the tables. Responses are text
only (``response_ids`` empty); the SFT trainer tokenises them.
"""

from __future__ import annotations

import random
from typing import Sequence

from seed_core.config import EnvConfig
from seed_core.envs import make_env
from seed_core.types import HistoryItem, StepRecord, Task


def play_expert(env_cfg: EnvConfig, tasks: Sequence[Task], policy_version: str = "expert", *, noise: float = 0.0,
                actions: Sequence[str] = (), seed: int = 0) -> list[StepRecord]:
    """One expert episode per task. With ``noise > 0`` each step takes a uniformly random action from
    ``actions`` with probability ``noise`` instead of the expert's (the testbed's epsilon-noisy expert)."""
    if noise > 0 and not actions:
        raise ValueError("play_expert: noise > 0 needs the set of actions to draw random ones from")
    rng = random.Random(seed)
    records: list[StepRecord] = []
    for task in tasks:
        env = make_env(env_cfg)
        obs = env.reset(task)
        history: list[HistoryItem] = []
        steps: list[dict] = []
        won = False
        score: float | None = None
        for t in range(env_cfg.max_steps):
            window = history[-env_cfg.history_length:] if env_cfg.history_length > 0 else []
            prompt = env.build_prompt(obs, window, t)
            action = env.expert_action()
            if noise > 0 and rng.random() < noise:
                action = rng.choice(list(actions))
            response = env.format_response(action)
            parsed = env.parse_action(response)
            result = env.step(parsed.action)
            done = result.done or t == env_cfg.max_steps - 1
            steps.append(dict(
                env=task.env, split=task.split, task_id=task.task_id, task_type=task.task_type, seed=task.seed,
                group_id=f"expert:{task.task_id}", traj_id=f"expert:{task.task_id}/0", step=t, observation=obs,
                prompt=prompt, response=response, response_ids=[], sampling_logprobs=[], action=parsed.action,
                format_valid=parsed.valid, reward=float(result.reward), done=done, policy_version=policy_version,
            ))
            history.append(HistoryItem(step=t, observation=obs, action=parsed.action))
            obs = result.observation
            won = won or result.won
            score = result.score if result.score is not None else score
            if done:
                break
        ret = float(sum(s["reward"] for s in steps))
        records.extend(StepRecord(**s, episode_return=ret, success=won, episode_length=len(steps), score=score)
                       for s in steps)
    return records
