from dataclasses import dataclass

from seed_core.config import EnvConfig
from seed_core.envs import make_env
from seed_core.rollout.collector import group_by_trajectory, rollout, rollout_metrics


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
