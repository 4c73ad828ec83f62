"""The mechanism-lab variant of EZPoints (``target_rule: suit``, ``action_unit: operator``, ``reward: binary``) and
the testbed corpus that goes with it (``plain_policy: naive``, ``mismatch_fraction``): issue 25."""

from __future__ import annotations

import random

import pytest

from seed_core.config import EnvConfig
from seed_core.envs.ezpoints import RED_SUITS, STATED_FORMULA, EZPointsEnv, deal_suit
from seed_core.types import Task

HIDDEN = {"target_rule": "suit", "action_unit": "operator", "reward": "binary", "prompt": "compact"}


@pytest.fixture
def env() -> EZPointsEnv:
    return EZPointsEnv(EnvConfig(name="ezpoints", max_steps=1, ezpoints=HIDDEN))


def task(seed: int) -> Task:
    return Task(task_id=f"t{seed}", env="ezpoints", split="train", seed=seed)


def find(colour: str) -> Task:
    """The first task seed whose first card is ``colour`` (red: hearts/diamonds)."""
    for seed in range(100):
        _, labels, _ = deal_suit(seed)
        if (labels[0].rsplit(" ", 1)[-1] in RED_SUITS) == (colour == "red"):
            return task(seed)
    raise AssertionError(colour)


def test_the_hidden_target_is_the_sum_on_red_and_the_product_on_black() -> None:
    """Hand-checked rule on 400 deals, and both colours occur about equally (never two 2s: sum = product)."""
    reds = 0
    for seed in range(400):
        (a, b), labels, target = deal_suit(seed)
        red = labels[0].rsplit(" ", 1)[-1] in RED_SUITS
        reds += red
        assert (a, b) != (2, 2) and 2 <= a <= 10 and 2 <= b <= 10
        assert target == (a + b if red else a * b)
    assert 160 < reds < 240


def test_the_prompt_never_states_the_target_or_the_rule(env: EZPointsEnv) -> None:
    t = find("black")
    prompt = env.build_prompt(env.reset(t), [], 0)
    (a, b), _, target = deal_suit(t.seed)
    assert "the sum or the product" in prompt and str(target) not in prompt.replace(f"values {a} and {b}", "")
    assert "black" not in prompt and "red" not in prompt and '"<operator>"' in prompt


@pytest.mark.parametrize("colour,op", [("red", "+"), ("black", "*")])
def test_one_operator_ends_the_episode_with_a_binary_reward(env: EZPointsEnv, colour: str, op: str) -> None:
    t = find(colour)
    (a, b), _, _ = deal_suit(t.seed)
    env.reset(t)
    assert env.expert_action() == op
    won = env.step(env.parse_action(env.format_response(op)).action)
    assert (won.reward, won.done, won.won, won.info["formula"]) == (1.0, True, True, f"{a}{op}{b}")
    env.reset(t)
    lost = env.step("*" if op == "+" else "+")
    assert (lost.reward, lost.done, lost.won) == (0.0, True, False)  # binary: no -1 for a wrong formula


def test_parse_reads_exactly_one_operator_after_action(env: EZPointsEnv) -> None:
    assert env.parse_action('{"thoughts": "3+4?", "action": "*"}').action == "*"
    assert not env.parse_action('{"thoughts": "x", "action": "7"}').valid
    assert not env.parse_action('{"thoughts": "x", "action": "+*"}').valid
    assert not env.parse_action("*").valid


def test_naive_player_always_adds_and_random_actions_are_operators(env: EZPointsEnv) -> None:
    env.reset(find("black"))
    assert env.naive_action() == "+" and env.expert_action() == "*"
    rng = random.Random(0)
    assert {env.random_action(rng) for _ in range(50)} == {"+", "*"}


def test_suit_skills_are_judged_and_their_plan_read(env: EZPointsEnv) -> None:
    """The oracle's skill (success and failure) states the operator, which the judge accepts and ``plan_action``
    reads; a skill with the other operator (another task's whose first card has the other colour) or none is
    rejected; the skill names no card value (it is type-level)."""
    t = find("black")
    (a, b), _, _ = deal_suit(t.seed)
    for success in (True, False):
        skill = env.oracle_skill(t, ["+"], success)["episode_skill"]
        assert "black" in skill and "product" in skill and skill.endswith("answer '*'.")
        assert env.judge_skill(t, skill) and env.plan_action(skill) == "*"
        assert f" {a} " not in f" {skill} " and str(a * b) not in skill
    assert not env.judge_skill(t, "the first card is red, so the target is the sum: answer '+'.")
    assert not env.judge_skill(t, env.oracle_skill(find("red"), [], True)["episode_skill"])
    assert not env.judge_skill(t, "multiply the two numbers") and env.plan_action("no plan here") is None


def test_a_sentence_period_after_a_formula_still_counts_but_a_decimal_does_not() -> None:
    assert STATED_FORMULA.findall("Answer 7*10.") == [("7", "*", "10")]
    assert STATED_FORMULA.findall("use 4*6.5 or 1.4+8") == []


def test_operator_actions_need_the_compact_prompt() -> None:
    with pytest.raises(ValueError, match="env.ezpoints.prompt=compact"):
        EZPointsEnv(EnvConfig(name="ezpoints", ezpoints={**HIDDEN, "prompt": "paper"}))


def test_the_corpus_teaches_following_another_tasks_skill() -> None:
    """``testbed.mismatch_fraction``: a skill turn with another task's skill has *that* skill's answer as its target;
    with the fraction 0 every skill turn has the own skill and the expert's action."""
    from seed_core.modeling.testbed import skill_turn

    e = EZPointsEnv(EnvConfig(name="ezpoints", max_steps=1, ezpoints=HIDDEN))
    mine, theirs = find("black"), find("red")
    e.reset(theirs)
    their_skill = e.oracle_skill(theirs, [], True)["episode_skill"]
    their_plan = e.expert_action()
    e.reset(mine)
    own = e.oracle_skill(mine, [], True)["episode_skill"]
    prompt = e.build_prompt(e.reset(mine), [], 0)
    always = skill_turn(e, prompt, own, [their_skill], random.Random(0), mismatch_fraction=1.0)
    assert their_skill in always[0] and f'"action": "{their_plan}"' in always[1]
    never = skill_turn(e, prompt, own, [their_skill], random.Random(0), mismatch_fraction=0.0)
    assert own in never[0] and f'"action": "{e.expert_action()}"' in never[1]
