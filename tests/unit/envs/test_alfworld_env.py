"""The ``alfworld`` environment on the real engine with the real evaluation games (../shared/alfworld)."""

from __future__ import annotations

import importlib.util
import os
from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest

pytestmark = [
    pytest.mark.alfworld,
    pytest.mark.skipif(importlib.util.find_spec("alfworld") is None, reason="needs the alfworld package"),
]

from seed_core.alfworld.games import ALFWorldDataError  # noqa: E402
from seed_core.config import EnvConfig  # noqa: E402
from seed_core.types import HistoryItem, ParsedAction, Task  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "alfworld"
SEEN_GAME = "pick_and_place_simple-ToiletPaper-None-ToiletPaperHanger-406"
UNSEEN_GAME = "pick_clean_then_place_in_recep-SoapBar-None-Cabinet-424"
ANCHOR = "Now it's your turn to take an action."


@pytest.fixture(scope="module")
def real_data() -> Iterator[Path]:
    assert (SHARED_DATA / "json_2.1.1" / "valid_seen").is_dir(), f"real ALFWorld games missing under {SHARED_DATA}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ALFWORLD_DATA", str(SHARED_DATA))
        yield SHARED_DATA


@pytest.fixture(scope="module")
def env(real_data: Path):  # noqa: ANN201 - the env class is imported lazily
    from seed_core.envs.alfworld import ALFWorldEnv

    return ALFWorldEnv(EnvConfig(name="alfworld", max_steps=30, history_length=2))


def _task(env, split: str, game: str) -> Task:  # noqa: ANN001
    return next(t for t in env.make_tasks(split, 0, seed=0) if game in t.payload["gamefile"])


def test_real_splits_load_with_their_task_type_counts(env) -> None:  # noqa: ANN001
    seen, unseen = env.make_tasks("valid_seen", 0, seed=0), env.make_tasks("valid_unseen", 0, seed=0)
    assert Counter(t.task_type for t in seen) == {"pick": 35, "clean": 27, "cool": 25, "pick2": 24, "heat": 16,
                                                   "look": 13}
    assert Counter(t.task_type for t in unseen) == {"clean": 31, "pick": 24, "heat": 23, "cool": 21, "look": 18,
                                                     "pick2": 17}
    assert [t.payload["gamefile"] for t in seen] == sorted(t.payload["gamefile"] for t in seen)
    assert all(Path(t.payload["gamefile"]).is_file() and t.env == "alfworld" for t in seen + unseen)
    five = env.make_tasks("valid_seen", 5, seed=3)
    assert len(five) == 5 and five == env.make_tasks("valid_seen", 5, seed=3) != env.make_tasks("valid_seen", 5, seed=4)
    assert len(env.make_tasks("valid_unseen", 500, seed=0)) == 134
    with pytest.raises(ValueError, match="unknown split"):
        env.make_tasks("test", 1, seed=0)


def test_missing_data_says_what_to_set_or_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from seed_core.envs.alfworld import ALFWorldEnv

    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    cfg = EnvConfig(name="alfworld", alfworld={"generated_dir": str(tmp_path / "none")})
    with pytest.raises(ALFWorldDataError, match="ALFWORLD_DATA"):
        ALFWorldEnv(cfg).make_tasks("valid_seen", 1, seed=0)
    with pytest.raises(ALFWorldDataError, match="python -m seed_core.stages.generate_alfworld"):
        ALFWorldEnv(cfg).make_tasks("train", 1, seed=0)


@pytest.mark.parametrize(("split", "game"), [("valid_seen", SEEN_GAME), ("valid_unseen", UNSEEN_GAME)])
def test_walkthrough_played_through_the_env_wins_with_reward_10(env, split: str, game: str) -> None:  # noqa: ANN001
    task = _task(env, split, game)
    obs = env.reset(task)
    assert "Your task is to: " in obs and "Welcome" not in obs
    walkthrough = env.walkthrough()
    results = []
    for action in walkthrough:
        assert env.expert_action() == action
        results.append(env.step(action))
    assert [r.reward for r in results] == [0.0] * (len(walkthrough) - 1) + [10.0]
    assert results[-1].won and results[-1].done and not any(r.done for r in results[:-1])


def test_prompts_carry_task_history_anchor_and_admissible_actions(env) -> None:  # noqa: ANN001
    from seed_core.skills.insert import insert_episode_skill

    task = _task(env, "valid_seen", SEEN_GAME)
    obs = env.reset(task)
    first = env.build_prompt(obs, [], 0)
    assert "Your current observation is: You are in the middle of a room" in first
    assert "Your task is to: put a toiletpaper in toiletpaperhanger." in first
    assert "'go to toilet 1'" in first and "'help'" not in first
    assert first.rstrip().endswith("inside <action> </action> tags.") and ANCHOR in first
    with_skill = insert_episode_skill(first, "Look on the toilet first.")
    assert with_skill.index("Look on the toilet first.") > with_skill.index("Your task is to:")
    assert with_skill.index("Look on the toilet first.") < with_skill.index("Your admissible actions")

    history = []
    for step, action in enumerate(env.walkthrough()[:2]):
        history.append(HistoryItem(step=step, observation=obs, action=action))
        obs = env.step(action).observation
    later = env.build_prompt(obs, history[-2:], 2)
    assert later.splitlines()[0].endswith("Your task is to: put a toiletpaper in toiletpaperhanger.")
    assert "you have already taken 2 step(s)" in later and "most recent 2 observations" in later
    assert f"[Observation 2: '{history[1].observation}', Action 2: '{history[1].action}']" in later
    assert f"You are now at step 3 and your current observation is: {obs}" in later
    assert ANCHOR in later and "<think>" in later


def test_parse_action_follows_the_verl_agent_projection(env) -> None:  # noqa: ANN001
    parse = env.parse_action
    assert parse("<think>the toilet</think><action>Go To Toilet 1</action>") == ParsedAction("go to toilet 1", True)
    assert parse("<action>look</action>") == ParsedAction("look", False)  # no think block
    assert parse("<think>厕所</think><action>look</action>") == ParsedAction("look", False)  # CJK text
    no_tags = "I think I should now go to the Toilet 1 and look"
    assert parse(no_tags) == ParsedAction("ow go to the toilet 1 and look", False)  # the last 30 characters
    assert parse("<think>x</think><action>look") == ParsedAction("<think>x</think><action>look", False)


def test_inadmissible_actions_do_nothing_and_max_steps_ends_the_episode(real_data: Path) -> None:
    from seed_core.envs.alfworld import ALFWorldEnv

    env = ALFWorldEnv(EnvConfig(name="alfworld", max_steps=2))
    env.reset(_task(env, "valid_seen", SEEN_GAME))
    first = env.step("fly to the moon")
    assert (first.observation, first.reward, first.done, first.info["admissible"]) == ("Nothing happens.", 0.0,
                                                                                       False, False)
    second = env.step("look")
    assert second.info["admissible"] and second.done and not second.won and second.reward == 0.0


def test_expert_replans_after_a_deviation_and_wins(env) -> None:  # noqa: ANN001
    task = _task(env, "valid_unseen", UNSEEN_GAME)
    env.reset(task)
    detour = next(a for a in ("go to toilet 1", "go to garbagecan 1") if a != env.walkthrough()[0])
    result = env.step(detour)
    for _ in range(12):
        result = env.step(env.expert_action())
        if result.done:
            break
    assert result.won and result.reward == 10.0


def test_oracle_skill_for_a_success_and_a_failure(env) -> None:  # noqa: ANN001
    task = _task(env, "valid_seen", SEEN_GAME)
    walkthrough = env.walkthrough(task)
    take = next(a for a in walkthrough if a.startswith("take "))
    win = env.oracle_skill(task, walkthrough, True)
    assert win["episode_skill"].startswith("Workflow: take the " + take[len("take "):].replace(" from ", " from the "))
    assert "toiletpaperhanger" in win["episode_skill"]
    loss = env.oracle_skill(task, ["look", "look", "look"], False)
    assert f"First divergence at step 1: it did 'look' where the walkthrough does '{walkthrough[0]}'" in \
           loss["episode_summary"]
    assert "never picked up a toiletpaper" in loss["episode_skill"] and f"'{take}'" in loss["episode_skill"]
    assert os.environ["ALFWORLD_DATA"] == str(SHARED_DATA)
