"""Expert demonstrations: the environment's expert plays, its actions wrapped in well-formed responses.

Used for the optional warm-start SFT and as the upper reference in the tables. The expert is an actor on
the one episode loop (``collector.play_episodes``), one task at a time so that the noise draws come task by
task, step by step. Responses are text only (``response_ids`` empty); the SFT trainer tokenises them.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Sequence

from seed_core.config import EnvConfig
from seed_core.rollout.collector import Episode, play_episodes
from seed_core.rollout.completion import Completion
from seed_core.types import StepRecord, Task


RandomAction = Sequence[str] | Callable[[Any, random.Random], str]
"""The noisy expert's random actions: a set to draw uniformly from, or ``(env, rng) -> action`` for an environment
whose actions depend on the state (EZPoints formulas of the two cards: ``EZPointsEnv.random_action``)."""


def play_expert(env_cfg: EnvConfig, tasks: Sequence[Task], policy_version: str = "expert", *, noise: float = 0.0,
                actions: RandomAction = (), seed: int = 0, player: str = "expert") -> list[StepRecord]:
    """One expert episode per task. With ``noise > 0`` each step takes a random action (``actions``) with
    probability ``noise`` instead of the player's (the testbed's epsilon-noisy expert). ``player``: ``expert``
    (``env.expert_action``) or ``naive`` (``env.naive_action``: one who ignores what the task line does not state)."""
    if noise > 0 and not actions:
        raise ValueError("play_expert: noise > 0 needs the set of actions to draw random ones from")
    if player not in ("expert", "naive"):
        raise ValueError(f"play_expert: player={player!r}; expected 'expert' or 'naive'")
    rng = random.Random(seed)

    def act(active: list[Episode], prompts: list[str], t: int) -> list[Completion]:
        (ep,) = active  # one task at a time (module docstring)
        action = ep.env.expert_action() if player == "expert" else ep.env.naive_action()
        if noise > 0 and rng.random() < noise:
            action = actions(ep.env, rng) if callable(actions) else rng.choice(list(actions))
        return [Completion(ep.env.format_response(action), [], [])]

    episodes = (Episode.start(env_cfg, task, f"expert:{task.task_id}") for task in tasks)  # started one by one
    return [rec for ep in episodes for rec in play_episodes(env_cfg, [ep], act, policy_version)]
