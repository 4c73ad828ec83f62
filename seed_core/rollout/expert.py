"""Expert demonstrations: the environment's expert plays, its actions wrapped in well-formed responses.

Used for the optional warm-start SFT and as the upper reference in the tables. The expert is an actor on
the one episode loop (``collector.play_episodes``), one task at a time so that the noise draws come task by
task, step by step. Responses are text only (``response_ids`` empty); the SFT trainer tokenises them.
"""

from __future__ import annotations

import random
from typing import Sequence

from seed_core.config import EnvConfig
from seed_core.rollout.collector import Episode, play_episodes
from seed_core.rollout.completion import Completion
from seed_core.types import StepRecord, Task


def play_expert(env_cfg: EnvConfig, tasks: Sequence[Task], policy_version: str = "expert", *, noise: float = 0.0,
                actions: Sequence[str] = (), seed: int = 0) -> list[StepRecord]:
    """One expert episode per task. With ``noise > 0`` each step takes a uniformly random action from
    ``actions`` with probability ``noise`` instead of the expert's (the testbed's epsilon-noisy expert)."""
    if noise > 0 and not actions:
        raise ValueError("play_expert: noise > 0 needs the set of actions to draw random ones from")
    rng = random.Random(seed)

    def act(active: list[Episode], prompts: list[str], t: int) -> list[Completion]:
        (ep,) = active  # one task at a time (module docstring)
        action = ep.env.expert_action()
        if noise > 0 and rng.random() < noise:
            action = rng.choice(list(actions))
        return [Completion(ep.env.format_response(action), [], [])]

    episodes = (Episode.start(env_cfg, task, f"expert:{task.task_id}") for task in tasks)  # started one by one
    return [rec for ep in episodes for rec in play_episodes(env_cfg, [ep], act, policy_version)]
