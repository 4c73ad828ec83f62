"""WebShop: the original score (golden cases), simulator pages and transitions, episodes, parsing, prompts,
catalogue generation and the real-WebShop adapter."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from seed_core.config_envs import EnvConfig, WebShopConfig
from seed_core.data_gen.webshop_catalog import CatalogSpec, generate_catalog
from seed_core.envs import ENVS
from seed_core.envs.webshop import WebShopEnv, page_text
from seed_core.losses.advantages import step_scores
from seed_core.skills.insert import insert_episode_skill
from seed_core.types import HistoryItem, Task
from seed_core.webshop import real
from seed_core.webshop.catalog import Goal, Product, read_catalog, write_catalog
from seed_core.webshop.reward import score_purchase, token_set_ratio

PATH = "electronics › headphones › earbud headphones"
EARBUDS = Product(
    asin="B0EARBUDS1", category="electronics", query="earbuds", product_category=PATH,
    title="Zolix Wireless Earbuds", title_nouns=("zolix", "earbuds"), attributes=("wireless", "noise cancelling"),
    bullet_points=("Wireless: pairs in seconds.", "Noise cancelling: blocks the street."),
    description="Compact earbuds.", options={"color": ("black", "white")}, price=25.99)
GOAL = Goal(asin="B0EARBUDS1", category="electronics", query="earbuds", name=EARBUDS.title,
            name_nouns=EARBUDS.title_nouns, product_category=PATH, instruction_text="i am looking for earbuds",
            attributes=("wireless", "noise cancelling"), goal_options={"color": "black"}, price_upper=30.0)


def _variant(**changes: object) -> Product:
    return Product(**{**EARBUDS.__dict__, **changes})


@pytest.fixture(scope="module")
def env() -> WebShopEnv:
    return WebShopEnv(EnvConfig(name="webshop", max_steps=15, history_length=2))


def _play(env: WebShopEnv, task: Task, policy) -> list:
    obs, history, results = env.reset(task), [], []
    for step in range(env.cfg.max_steps):
        env.build_prompt(obs, history[-2:], step)
        parsed = env.parse_action(policy())
        result = env.step(parsed.action)
        history.append(HistoryItem(step, obs, parsed.action))
        results.append((parsed, result))
        obs = result.observation
        if result.done:
            break
    return results


def test_registered_under_its_config_name() -> None:
    assert ENVS.get("webshop") is WebShopEnv


def test_token_set_ratio_golden_cases() -> None:
    assert token_set_ratio("noise cancelling", "Wireless Noise-Cancelling") == 100  # subset of tokens
    # shared "of pack" vs "of pack 6": 2*7/(7+9) = 0.875 -> 88 (why WebShop matches sizes exactly)
    assert token_set_ratio("pack of 6", "pack of 12") == 88
    # "machine wash" vs "machine washable": 2*12/(12+16) = 0.857 -> 86
    assert token_set_ratio("machine wash", "machine washable") == 86
    assert token_set_ratio("", "black") == 0 and token_set_ratio("black", "navy blue") < 85


def test_score_golden_cases() -> None:
    """(attr matches + option matches + price ok) / (2 attrs + 1 option + 1) * r_type."""
    assert score_purchase(EARBUDS, GOAL, {"color": "black"}).score == 1.0
    assert score_purchase(EARBUDS, GOAL, {}).score == 0.75                      # (2 + 0 + 1) / 4
    assert score_purchase(EARBUDS, GOAL, {"color": "white"}).score == 0.75
    over = score_purchase(_variant(price=35.0), GOAL, {"color": "black"})
    assert over.score == 0.75 and not over.price_ok                             # (2 + 1 + 0) / 4
    # same type, other brand, lacks "noise cancelling": title nouns 1/2 -> r_type 1; (1 + 1 + 1) / 4
    other = _variant(title="Mardo Wireless Earbuds", title_nouns=("mardo", "earbuds"),
                     attributes=("wireless",), bullet_points=("Wireless.",))
    details = score_purchase(other, GOAL, {"color": "black"})
    assert details.score == 0.75 and details.missing_attributes == ("noise cancelling",)
    # attribute found in the description instead of the attribute list still counts
    assert score_purchase(_variant(attributes=(), bullet_points=(), description="wireless and noise cancelling"),
                          GOAL, {"color": "black"}).score == 1.0


def test_type_reward_tiers() -> None:
    speaker = _variant(query="bluetooth speaker", product_category="electronics › audio › portable speakers",
                       title="Kelo Speaker", title_nouns=("kelo", "speaker"))
    assert score_purchase(speaker, GOAL, {"color": "black"}).score == 0.0       # no shared noun -> r_type 0
    five = Goal(**{**GOAL.__dict__, "name_nouns": ("a", "b", "c", "d", "zolix")})
    unrelated = _variant(query="case", product_category="x › y", title_nouns=("zolix", "q"))
    # title score 1/5 = 0.2 (not > 0.2), no query or category match -> r_type 0.5
    assert score_purchase(unrelated, five, {"color": "black"}).score == 0.5
    eleven = Goal(**{**GOAL.__dict__, "name_nouns": tuple("abcdefghij") + ("zolix",)})
    # title score 1/11 < 0.1 -> r_type 0.1 even though the search query matches
    assert score_purchase(EARBUDS, eleven, {"color": "black"}).score == pytest.approx(0.1)


def test_size_options_match_exactly_others_fuzzily() -> None:
    tea = _variant(options={"size": ("pack of 6", "pack of 12"), "flavor": ("mint",)})
    goal = Goal(**{**GOAL.__dict__, "goal_options": {"size": "pack of 6"}})
    assert score_purchase(tea, goal, {"size": "pack of 12"}).score == 0.75     # exact: 12 != 6
    assert score_purchase(tea, goal, {"flavor": "pack of 12"}).score == 1.0    # fuzzy: ratio 88 > 85


def test_simulator_pages_and_transitions(env: WebShopEnv) -> None:
    task = env.make_tasks("test", 1, 0)[0]
    first = env.reset(task)
    assert first == "'Search'" and env.admissible_actions() == ["search[<your query>]"]
    sim, goal = env.engine, env.engine.goal
    page = env.step(f"search[{goal.name.lower()}]").observation
    assert page.startswith("'Back to Search' [SEP] 'Page 1 (Total results: ")
    assert env.admissible_actions()[0] == "click[back to search]"
    assert f"click[{goal.asin.lower()}]" in env.admissible_actions()
    item = env.step(f"click[{goal.asin.lower()}]").observation
    assert "'Buy Now'" in item and "'Rating: N.A.'" in item and sim.state.kind == "item"
    value = next(iter(goal.goal_options.values()))
    assert env.step(f"click[{value}]").observation == item and sim.state.options[next(iter(goal.goal_options))] == value
    features = env.step("click[features]").observation
    assert features.startswith("'Back to Search' [SEP] '< Prev'") and sim.state.kind == "sub"
    assert env.step("click[< prev]").observation == item
    env.step("click[< prev]")
    assert sim.state.kind == "results" and sim.state.options == {}
    env.step("click[back to search]")
    assert sim.state.kind == "search"


def test_expert_wins_an_episode(env: WebShopEnv) -> None:
    task = env.make_tasks("test", 1, 3)[0]
    results = _play(env, task, lambda: env.format_response(env.expert_action()))
    parsed, last = results[-1]
    assert all(p.valid for p, _ in results) and parsed.action == "click[buy now]"
    assert last.won and last.done and last.reward == 10.0 and last.info["task_score"] == 1.0
    assert len(results) <= 15 and [r.reward for _, r in results[:-1]] == [0.0] * (len(results) - 1)


def test_buying_without_options_scores_the_documented_partial(env: WebShopEnv) -> None:
    task = env.make_tasks("test", 1, 5)[0]
    env.reset(task)
    goal = env.engine.goal
    env.step(f"search[{goal.name.lower()}]")
    env.step(f"click[{goal.asin.lower()}]")
    result = env.step("click[buy now]")
    expected = (len(goal.attributes) + 0 + 1) / (len(goal.attributes) + len(goal.goal_options) + 1)
    assert result.done and not result.won and result.reward == 0.0
    assert result.info["task_score"] == pytest.approx(expected) and expected < 1
    assert result.score == pytest.approx(expected)  # StepResult.score reads info["task_score"]


def test_malformed_actions_are_invalid_noops_with_the_penalty(env: WebShopEnv) -> None:
    env.reset(env.make_tasks("test", 1, 0)[0])
    env.step("search[earbuds]")
    before = env.engine.observation()
    cases = {
        "no tags": "I will click the first item",
        "no think": "<action>click[back to search]</action>",
        "unknown target": "<think>x</think><action>click[the cheapest one]</action>",
        "search on results page": "<think>x</think><action>search[shoes]</action>",
        "cjk": "<think>选择</think><action>click[back to search]</action>",
    }
    parsed = {name: env.parse_action(text) for name, text in cases.items()}
    assert not any(p.valid for p in parsed.values()), parsed
    assert parsed["no tags"].action == "click the first item"  # the last 20 characters
    result = env.step(parsed["unknown target"].action)
    assert env.engine.observation() == before and result.reward == 0.0 and not result.info["admissible"]
    assert env.parse_action("<think>ok</think><action>click[back to search]</action>").valid
    assert step_scores([0.0, 0.0], [False, True], penalty=0.1).tolist() == pytest.approx([-0.1, 0.0])


def test_episode_ends_after_max_steps(env: WebShopEnv) -> None:
    results = _play(env, env.make_tasks("test", 1, 0)[0], lambda: "<think>x</think><action>click[nothing]</action>")
    assert len(results) == 15 and results[-1][1].done and not results[-1][1].won


def test_prompt_layout_and_skill_insertion(env: WebShopEnv) -> None:
    first = env.reset(env.make_tasks("test", 1, 0)[0])
    instruction = env.task_description()
    prompt0 = env.build_prompt(first, [], 0)
    assert f"Your task is to: {instruction}.\nYour current observation is: 'Search'." in prompt0
    assert "[\nsearch[<your query>]\n]." in prompt0 and "Now it's your turn to take an action." in prompt0
    result = env.step("search[earbuds]")
    prompt1 = env.build_prompt(result.observation, [HistoryItem(0, first, "search[earbuds]")], 1)
    assert "[Observation 1: ''Search'', Action 1: 'search[earbuds]']" in prompt1
    assert "You are now at step 2" in prompt1 and instruction not in result.observation
    with_skill = insert_episode_skill(prompt1, "Search the type first.")
    assert with_skill.index("Your task is to:") < with_skill.index("**Episode-Level Skill**") < with_skill.index(
        "Prior to this step")


def test_oracle_skill_names_what_the_purchase_missed(env: WebShopEnv) -> None:
    task = env.make_tasks("test", 1, 5)[0]
    env.reset(task)
    goal = env.engine.goal
    actions = [f"search[{goal.name.lower()}]", f"click[{goal.asin.lower()}]", "click[buy now]"]
    lost = env.oracle_skill(task, actions, False)
    assert "were not clicked before buying" in lost["episode_skill"]
    assert all(v in lost["episode_skill"] for v in goal.goal_options.values())
    assert "bought nothing" in env.oracle_skill(task, ["click[zzz]"], False)["episode_summary"]
    assert env.oracle_skill(task, actions, True)["episode_skill"].startswith(f"Workflow: search[{goal.query}")


def test_catalogue_is_deterministic_consistent_and_round_trips(tmp_path: Path) -> None:
    spec = CatalogSpec(num_products=30)
    catalog = generate_catalog(spec)
    assert catalog == generate_catalog(spec) and len(catalog.goals) == 30
    by_asin = {p.asin: p for p in catalog.products}
    assert len(by_asin) == 30
    for goal in catalog.goals:
        product = by_asin[goal.asin]
        assert set(goal.attributes) <= set(product.attributes) and goal.price_upper > product.price
        assert all(v in product.options[k] for k, v in goal.goal_options.items())
        assert score_purchase(product, goal, goal.goal_options).score == 1.0
    write_catalog(catalog, tmp_path)
    assert read_catalog(tmp_path) == catalog
    env = WebShopEnv(EnvConfig(name="webshop", max_steps=15, history_length=2,
                               webshop=WebShopConfig(data_dir=str(tmp_path), num_test_goals=10)))
    test, train = env.make_tasks("test", 0, 0), env.make_tasks("train", 0, 0)
    assert len(test) == 10 and len(train) == 20 and not {t.seed for t in test} & {t.seed for t in train}


def test_real_backend_without_webshop_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "web_agent_site", None)
    env = WebShopEnv(EnvConfig(name="webshop", max_steps=15, history_length=2,
                               webshop=WebShopConfig(backend="real")))
    with pytest.raises(ImportError, match="princeton-nlp/WebShop"):
        env.make_tasks("test", 1, 0)


def test_real_backend_adapter_drives_a_webshop_text_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in with the real ``WebAgentTextEnv`` interface (reset/step/get_available_actions/server)."""
    goal = {"asin": "B0X", "query": "earbuds", "name": "Zolix Earbuds", "category": "electronics",
            "product_category": PATH, "instruction_text": "i want earbuds", "attributes": ["wireless"],
            "goal_options": {"color": "black"}, "price_upper": 30.0}

    class FakeTextEnv:
        def __init__(self, observation_mode: str, server=None, **kwargs) -> None:
            assert observation_mode == "text"
            self.server = server or SimpleNamespace(goals=[goal] * 3, user_sessions={})
            self.session, self.instruction_text = None, ""

        def reset(self, session=None):
            self.session, self.instruction_text = str(session), goal["instruction_text"]
            self.server.user_sessions[self.session] = {"goal": goal}
            return f"WebShop [SEP] Instruction: [SEP] {self.instruction_text} [SEP] Search", None

        def get_available_actions(self):
            return {"has_search_bar": True, "clickables": ["search"]}

        def step(self, action):
            return f"Instruction: [SEP] {self.instruction_text} [SEP] Thank you", 1.0, True, None

    fake = ModuleType("web_agent_site.envs")
    fake.WebAgentTextEnv = FakeTextEnv  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "web_agent_site", ModuleType("web_agent_site"))
    monkeypatch.setitem(sys.modules, "web_agent_site.envs", fake)
    monkeypatch.setattr(real, "_SHARED", {})  # sessions share one server per process; start from none
    env = WebShopEnv(EnvConfig(name="webshop", max_steps=15, history_length=2,
                               webshop=WebShopConfig(backend="real", num_test_goals=1)))
    task = env.make_tasks("train", 0, 0)[0]
    assert task.task_type == "electronics" and task.payload == {"goal_index": 1}
    assert env.reset(task) == "'Search'" and env.admissible_actions() == ["search[<your query>]"]
    assert env.parse_action("<think>x</think><action>search[earbuds]</action>").valid
    result = env.step("search[earbuds]")
    assert result.won and result.reward == 10.0 and result.observation == "'Thank you'"
    assert "search[earbuds wireless]" in env.oracle_skill(task, ["search[earbuds]"], True)["episode_skill"]
    with pytest.raises(RuntimeError, match="needs the sim backend"):
        env.expert_action()
