from dataclasses import dataclass

import pytest

from seed_core.config import EnvConfig
from seed_core.envs import make_env
from seed_core.envs.base import TimeLimit
from seed_core.rollout.collector import group_by_trajectory, rollout, rollout_metrics
from seed_core.rollout.expert import play_expert
from seed_core.types import ParsedAction, StepResult, Task


@dataclass(frozen=True)
class _Completion:
    text: str
    token_ids: list
    logprobs: list


class ScriptedBackend:
    """Answers every prompt with the same response; records what it was asked."""

    def __init__(self, response: str):
        self.response = response
        self.calls: list[list[str]] = []

    def generate(self, prompts, *, temperature, max_new_tokens, seed=None):
        self.calls.append(list(prompts))
        return [_Completion(self.response, [1, 2, 3], [-0.1, -0.2, -0.3]) for _ in prompts]


def test_groups_share_task_and_seed_and_episodes_stop_at_max_steps():
    cfg = EnvConfig(name="sokoban", max_steps=3, history_length=1)
    tasks = make_env(cfg).make_tasks("train", 2, seed=7)
    backend = ScriptedBackend("<think>go</think><action>up</action>")
    records = rollout(cfg, tasks, backend, group_size=3, temperature=1.0, max_new_tokens=8, seed=0,
                      policy_version="v0", group_tag="r0:")
    trajs = group_by_trajectory(records)
    assert len(trajs) == 6
    assert len(backend.calls[0]) == 6  # one batched generate call per step for all episodes
    by_group: dict[str, set] = {}
    for steps in trajs.values():
        assert [s.step for s in steps] == list(range(len(steps))) and len(steps) <= 3
        assert steps[-1].done and all(s.episode_return == sum(x.reward for x in steps) for s in steps)
        by_group.setdefault(steps[0].group_id, set()).add((steps[0].task_id, steps[0].seed))
    assert all(len(v) == 1 for v in by_group.values()) and len(by_group) == 2
    assert all(r.group_id.startswith("r0:") and r.policy_version == "v0" for r in records)
    m = rollout_metrics(records, "rollout")
    assert m["rollout/episodes"] == 6 and m["rollout/response_tokens"] == 3 * len(records)
    assert all(r.score is None for r in records) and "rollout/score" not in m  # Sokoban has no partial score


def test_finished_episodes_leave_the_batch_and_history_is_windowed():
    cfg = EnvConfig(name="ezpoints", max_steps=4, history_length=1)
    tasks = make_env(cfg).make_tasks("train", 1, seed=3)
    backend = ScriptedBackend('{"thoughts": "end", "action": "="}')  # '=' ends the episode at once
    records = rollout(cfg, tasks, backend, group_size=2, temperature=1.0, max_new_tokens=8, seed=0,
                      policy_version="v0")
    assert len(backend.calls) == 1 and len(records) == 2
    assert all(r.done and not r.success for r in records)


def test_skill_is_inserted_into_every_prompt():
    cfg = EnvConfig(name="sokoban", max_steps=2, history_length=2)
    tasks = make_env(cfg).make_tasks("test", 1, seed=1)
    backend = ScriptedBackend("<think>go</think><action>left</action>")
    records = rollout(cfg, tasks, backend, group_size=1, temperature=0.0, max_new_tokens=8, seed=0,
                      policy_version="v0", skills={tasks[0].task_id: "push boxes away from walls"})
    assert all("[push boxes away from walls]" in r.prompt for r in records)
    assert all("Episode-Level Skill" in p for call in backend.calls for p in call)


class Countdown(TimeLimit):
    """Terminal after ``task.seed`` steps; ``seed = 0`` is never terminal, so only ``TimeLimit`` ends it, at the
    env's own limit: 2 steps more than the config the loop was given (the loop must not cut it short)."""

    name = "countdown"

    def __init__(self, cfg: EnvConfig) -> None:
        self.cfg = cfg.model_copy(update={"max_steps": cfg.max_steps + 2})

    def _reset(self, task: Task) -> str:
        self.task = task
        return "start"

    def build_prompt(self, observation, history, step):
        return f"{observation} at {step}"

    def parse_action(self, response):
        return ParsedAction(response, True)

    def _step(self, action):
        terminal = self._steps + 1 == self.task.seed
        return StepResult(f"after {self._steps + 1}", 1.0, terminal, terminal)

    def expert_action(self):
        return "go"

    def format_response(self, action):
        return action


class Endless:
    """Never done, and no ``TimeLimit``: the loop must refuse it (this fails rather than hangs if it does not)."""

    def __init__(self, cfg: EnvConfig) -> None:
        self.cfg, self.calls = cfg, 0

    def reset(self, task: Task) -> str:
        return "start"

    def step(self, action):
        self.calls += 1
        assert self.calls < 50, "the loop kept stepping an env that never ends"
        return StepResult("again", 0.0, False, False)

    build_prompt, parse_action = Countdown.build_prompt, Countdown.parse_action
    expert_action, format_response = Countdown.expert_action, Countdown.format_response


TASKS = [Task(env="countdown", task_id="early", seed=2, split="train"),
         Task(env="countdown", task_id="late", seed=0, split="train")]
PLAYERS = {
    "policy": lambda cfg: rollout(cfg, TASKS, ScriptedBackend("go"), group_size=1, temperature=1.0, max_new_tokens=4,
                                  seed=0, policy_version="v0", progress=False),
    "expert": lambda cfg: play_expert(cfg, TASKS),
}


@pytest.mark.parametrize("player", PLAYERS)
def test_one_loop_stops_exactly_when_the_env_says_done(player: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Policy and expert both play through play_episodes: a terminal at step 2 ends 'early', the env's TimeLimit
    (7 steps) ends 'late'; the loop adds no limit of its own (breaking the shared loop fails both players)."""
    monkeypatch.setattr("seed_core.rollout.collector.make_env", Countdown)
    trajs = group_by_trajectory(PLAYERS[player](EnvConfig(name="sokoban", max_steps=5)))
    early, late = (next(s for t, s in trajs.items() if t.endswith(f"{name}/0")) for name in ("early", "late"))
    assert [r.done for r in early] == [False, True] and early[0].success and early[0].episode_length == 2
    assert [r.done for r in late] == [False] * 6 + [True] and not late[0].success and late[0].episode_length == 7
    assert [r.observation for r in late] == ["start"] + [f"after {k}" for k in range(1, 7)]


@pytest.mark.parametrize("player", PLAYERS)
def test_an_env_outside_time_limit_is_refused(player: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("seed_core.rollout.collector.make_env", Endless)
    with pytest.raises(TypeError, match="Endless does not subclass seed_core.envs.base.TimeLimit"):
        PLAYERS[player](EnvConfig(name="sokoban", max_steps=5))
