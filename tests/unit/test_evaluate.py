"""Evaluation records and metrics: WebShop's partial purchase score travels from the env through the rollout,
``EvalRecord`` and its parquet file into ``eval/.../score``; success-only environments get no score."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from seed_core.config import EnvConfig
from seed_core.envs import make_env
from seed_core.runtime.io import read_records, write_records
from seed_core.rollout.collector import rollout, rollout_metrics
from seed_core.stages.evaluate import success_table, to_eval_records
from seed_core.types import EvalRecord, Task
from seed_core.webshop.catalog import Catalog, Goal, Product
from seed_core.webshop.sim import ShopSearch

PATH = "electronics › headphones › earbud headphones"
EARBUDS = Product(
    asin="B0EARBUDS1", category="electronics", query="earbuds", product_category=PATH,
    title="Zolix Wireless Earbuds", title_nouns=("zolix", "earbuds"), attributes=("wireless", "noise cancelling"),
    bullet_points=("Wireless: pairs in seconds.", "Noise cancelling: blocks the street."),
    description="Compact earbuds.", options={"color": ("black", "white")}, price=25.99)
LAMP = Product(
    asin="B0LAMP0001", category="furniture", query="desk lamp", product_category="furniture › lighting › lamps",
    title="Lumo Desk Lamp", title_nouns=("lumo", "lamp"), attributes=("dimmable",), bullet_points=("Dimmable.",),
    description="A lamp.", options={}, price=19.0)


def _goal(color: str) -> Goal:
    return Goal(asin=EARBUDS.asin, category="electronics", query="earbuds", name=EARBUDS.title,
                name_nouns=EARBUDS.title_nouns, product_category=PATH,
                instruction_text=f"i want {color} wireless noise cancelling earbuds under 30 dollars",
                attributes=("wireless", "noise cancelling"), goal_options={"color": color}, price_upper=30.0)


CATALOG = Catalog(products=(EARBUDS, LAMP), goals=(_goal("black"), _goal("white")))


@dataclass(frozen=True)
class _Completion:
    text: str
    token_ids: list
    logprobs: list


class StepScript:
    """Answers every prompt of call k with the k-th scripted action."""

    def __init__(self, actions: list[str]):
        self.actions = actions
        self.calls = 0

    def generate(self, prompts, *, temperature, max_new_tokens, seed=None):
        action = self.actions[self.calls]
        self.calls += 1
        return [_Completion(f"<think>shop</think><action>{action}</action>", [1], [-0.1]) for _ in prompts]


@pytest.fixture
def webshop_cfg(monkeypatch: pytest.MonkeyPatch) -> EnvConfig:
    """The WebShop env over a two-goal hand-made catalogue (goal 0 wants black earbuds, goal 1 white ones)."""
    import seed_core.envs.webshop as webshop

    monkeypatch.setattr(webshop, "load_catalog", lambda settings: (CATALOG, ShopSearch(CATALOG.products)))
    return EnvConfig(name="webshop", max_steps=15, history_length=2)


def _tasks() -> list[Task]:
    return [Task(env="webshop", task_id=f"webshop-test-{i}", seed=i, split="test", task_type="electronics",
                 payload={"goal_index": i}) for i in (0, 1)]


def test_partial_purchase_score_reaches_eval_records_and_metrics(webshop_cfg: EnvConfig, tmp_path: Path) -> None:
    # Both goals: right product, attributes "wireless" + "noise cancelling" matched (2), price 25.99 <= 30 (1),
    # r_type = 1 (same query, all title nouns). The script picks colour white:
    #   goal 0 (black): option unmatched ("white" is not in the title/bullets/description) -> 1 * (2+0+1)/(2+1+1)
    #   goal 1 (white): option matched -> 1 * (2+1+1)/4 = 1.0, a success (reward 10).
    backend = StepScript(["search[earbuds]", "click[b0earbuds1]", "click[white]", "click[buy now]"])
    records = rollout(webshop_cfg, _tasks(), backend, group_size=1, temperature=0.0, max_new_tokens=8, seed=0,
                      policy_version="grpo", progress=False)
    assert backend.calls == 4 and len(records) == 8
    by_task = {r.task_id: r for r in records if r.done}
    assert by_task["webshop-test-0"].score == pytest.approx(0.75) and not by_task["webshop-test-0"].success
    assert by_task["webshop-test-1"].score == pytest.approx(1.0) and by_task["webshop-test-1"].success
    assert [r.score for r in records if r.task_id == "webshop-test-0"] == [0.75] * 4  # repeated on every step
    assert rollout_metrics(records, "collect")["collect/score"] == pytest.approx(0.875)

    rows = to_eval_records(records, "grpo", "ckpt", skill_prompt=False)
    path = write_records(rows, tmp_path / "episodes.parquet", EvalRecord)
    back = {r.task_id: r for r in read_records(path, EvalRecord)}
    assert back["webshop-test-0"].score == pytest.approx(0.75) and back["webshop-test-0"].episode_return == 0.0
    assert back["webshop-test-1"].score == pytest.approx(1.0) and back["webshop-test-1"].episode_return == 10.0

    metrics = success_table(rows)
    assert metrics["eval/score"] == pytest.approx(0.875)
    assert metrics["eval/test/score"] == pytest.approx(0.875)
    assert metrics["eval/test/electronics/score"] == pytest.approx(0.875)
    assert metrics["eval/test/success_rate"] == pytest.approx(0.5)
    assert "eval/skill_prompt/score" not in metrics


def test_skill_prompt_rows_get_their_own_score(webshop_cfg: EnvConfig) -> None:
    backend = StepScript(["search[earbuds]", "click[b0earbuds1]", "click[black]", "click[buy now]"])
    records = rollout(webshop_cfg, _tasks(), backend, group_size=1, temperature=0.0, max_new_tokens=8, seed=0,
                      policy_version="grpo", progress=False)
    rows = to_eval_records(records, "grpo", "ckpt", skill_prompt=True)
    metrics = success_table(rows)  # black: goal 0 scores 1.0, goal 1 scores 0.75
    assert metrics["eval/skill_prompt/score"] == pytest.approx(0.875)
    assert metrics["eval/skill_prompt/success_rate"] == pytest.approx(0.5)
    assert "eval/score" not in metrics and metrics["eval/episodes"] == 0.0


def test_success_only_env_gets_no_score() -> None:
    cfg = EnvConfig(name="sokoban", max_steps=2, history_length=1)
    tasks = make_env(cfg).make_tasks("test", 2, seed=0)
    backend = StepScript(["up", "left"])
    records = rollout(cfg, tasks, backend, group_size=1, temperature=0.0, max_new_tokens=8, seed=0,
                      policy_version="grpo", progress=False)
    rows = to_eval_records(records, "grpo", "ckpt", skill_prompt=False)
    assert all(r.score is None for r in records) and all(r.score is None for r in rows)
    metrics = success_table(rows)
    assert "eval/test/success_rate" in metrics
    assert not [k for k in metrics if k.endswith("/score")]
    assert "rollout/score" not in rollout_metrics(records, "rollout")


def test_each_episode_records_its_format_valid_rate(tmp_path: Path) -> None:
    """EvalRecord.format_valid_rate = the share of the episode's steps whose response parsed (the env's
    ParsedAction.valid, StepRecord.format_valid): one well-formed move and one unparsable answer -> 0.5; an
    episodes file written before the field existed loads with None."""
    import pyarrow.parquet as pq

    cfg = EnvConfig(name="sokoban", max_steps=2, history_length=1)
    tasks = make_env(cfg).make_tasks("test", 2, seed=0)
    records = rollout(cfg, tasks, StepScript(["up", "dance"]), group_size=1, temperature=0.0, max_new_tokens=8,
                      seed=0, policy_version="seed_star", progress=False)
    assert [r.format_valid for r in records if r.task_id == tasks[0].task_id] == [True, False]
    rows = to_eval_records(records, "seed_star", "ckpt", skill_prompt=True)
    shares = {t.task_id: [r.format_valid for r in records if r.task_id == t.task_id] for t in tasks}
    assert {r.task_id: r.format_valid_rate for r in rows} == {k: sum(v) / len(v) for k, v in shares.items()}
    assert rows[0].format_valid_rate == 0.5
    path = write_records(rows, tmp_path / "episodes.parquet", EvalRecord)
    assert [r.format_valid_rate for r in read_records(path, EvalRecord)] == [r.format_valid_rate for r in rows]
    pq.write_table(pq.read_table(path).drop(["format_valid_rate"]), path)
    assert [r.format_valid_rate for r in read_records(path, EvalRecord)] == [None, None]
