"""Fixed evaluation panels (issue 27 item 5): evaluation plays the committed manifest
``data/panels/<env>-<split>.json``, whatever the discovery order of the env's instances, the worker count
(``generation.batch_size``) and ``project.seed``; ``eval.repeats`` plays each instance k times (avg@k)."""

from __future__ import annotations

import importlib.util
import json
import os
import random
from pathlib import Path

import pytest

from seed_core.config import SeedConfig
from seed_core.envs import ENVS, make_env
from seed_core.runtime.io import read_records, write_records
from seed_core.loader import load_config, with_overrides
from seed_core.stages import evaluate
from seed_core.stages.evaluate import checkpoint_label, eval_tasks, per_instance, run_evaluate
from seed_core.data_gen.task_sets import PanelError, build_panel, held_out_splits, panel_path, panel_tasks, read_panel
from seed_core.types import EvalRecord

ROOT = Path(__file__).resolve().parents[2]
SHARED_ALFWORLD = ROOT.parent / "shared" / "alfworld"
GENERATED = ("ezpoints", "sokoban", "search_qa")
"""Environments whose committed panels come from params.yaml (WebShop's from its paper preset)."""


def _shuffled(items: list, seed: int = 3) -> list:
    items = list(items)
    random.Random(seed).shuffle(items)
    return items


def _shuffle_discovery(monkeypatch: pytest.MonkeyPatch, env_name: str) -> None:
    """The env's instance listing in another order: ALFWorld's game listing (what the file system returns,
    unsorted), the other envs' ``panel_universe``."""
    if env_name == "alfworld":
        import seed_core.alfworld.games as games

        listing = games.list_games
        monkeypatch.setattr(games, "list_games", lambda directory: listing(directory)[::-1])
        return
    cls = ENVS.get(env_name)
    universe = cls.panel_universe
    monkeypatch.setattr(cls, "panel_universe", lambda self, split: _shuffled(universe(self, split)))


def _alfworld(monkeypatch: pytest.MonkeyPatch) -> None:
    data = Path(os.environ.get("ALFWORLD_DATA") or SHARED_ALFWORLD)
    if importlib.util.find_spec("alfworld") is None or not (data / "json_2.1.1" / "valid_seen").is_dir():
        pytest.skip("needs the alfworld package and the real games ($ALFWORLD_DATA, else ../shared/alfworld)")
    monkeypatch.setenv("ALFWORLD_DATA", str(data))


def _params(env_name: str) -> SeedConfig:
    if env_name == "webshop":
        return load_config(ROOT / "presets" / "webshop-qwen2.5-1.5b.yaml")
    return load_config(ROOT / "params.yaml", {"env.name": env_name})


@pytest.mark.parametrize("env_name", [*GENERATED, "webshop", "alfworld"])
def test_the_committed_panels_are_what_the_writer_writes_in_any_discovery_order(env_name, monkeypatch) -> None:
    if env_name == "alfworld":
        _alfworld(monkeypatch)
    cfg = _params(env_name)
    env = make_env(cfg.env)
    splits = held_out_splits(env)
    assert splits == (["valid_seen", "valid_unseen"] if env_name == "alfworld" else ["test"])
    committed = {split: json.loads(panel_path(env_name, split).read_text()) for split in splits}
    _shuffle_discovery(monkeypatch, env_name)
    other = with_overrides(cfg, {"project.seed": 7, "generation.batch_size": 1})
    for split in splits:
        assert build_panel(other, make_env(other.env), split) == committed[split], f"{env_name}-{split} is stale"
        ids = committed[split]["ids"]
        assert len(set(ids)) == len(ids) and ids != sorted(ids), "distinct ids, in the panel's fixed order"
        if env_name == "alfworld":  # the whole split, paths relative to $ALFWORLD_DATA
            assert committed[split]["complete"] and all(i.startswith(f"json_2.1.1/{split}/") for i in ids)


def _tiny(tiny_model_dir: Path, **overrides) -> SeedConfig:
    return with_overrides(SeedConfig(), {
        "model.path": str(tiny_model_dir), "model.device": "cpu", "env.name": "ezpoints",
        "env.ezpoints.prompt": "paper", "env.max_steps": 2, "env.history_length": 0,
        "generation.max_new_tokens": 6, "generation.max_prompt_tokens": 256, "generation.eval_temperature": 0.0,
        "eval.num_tasks": 3, "eval.splits": ["test"], **overrides})


def _evaluate(cfg: SeedConfig, out: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[EvalRecord], list]:
    """run_evaluate's rows and every step it played as (task_id, step, prompt, response)."""
    played: list[tuple[str, int, str, str]] = []
    rollout = evaluate.rollout

    def spy(*args, **kwargs):
        records = rollout(*args, **kwargs)
        played.extend((r.task_id, r.step, r.prompt, r.response) for r in records)
        return records

    monkeypatch.setattr(evaluate, "rollout", spy)  # where the stage looks it up
    run_evaluate(cfg, Path(cfg.model.path), out, "vanilla")
    monkeypatch.setattr(evaluate, "rollout", rollout)
    return read_records(out / "episodes.parquet", EvalRecord), played


def test_evaluation_of_a_panel_is_identical_under_two_discovery_orders_and_1_vs_2_workers(
        tiny_model_dir, tmp_path, monkeypatch) -> None:
    one = _tiny(tiny_model_dir, **{"generation.batch_size": 1, "project.seed": 0})
    rows_a, steps_a = _evaluate(one, tmp_path / "a", monkeypatch)
    _shuffle_discovery(monkeypatch, "ezpoints")
    two = _tiny(tiny_model_dir, **{"generation.batch_size": 2, "project.seed": 5})
    rows_b, steps_b = _evaluate(two, tmp_path / "b", monkeypatch)
    panel = read_panel(one, "test")["ids"][:3]
    assert [r.task_id for r in rows_a] == [f"ezpoints-test-{i}" for i in panel]  # the panel's first 3, in order
    assert rows_a == rows_b  # greedy: the same instances give the same episodes on 1 or 2 workers
    assert steps_a == steps_b and len({response for *_, response in steps_a}) > 1


def test_alfworld_evaluates_its_panel_whatever_the_game_listing_order(tiny_model_dir, tmp_path, monkeypatch) -> None:
    _alfworld(monkeypatch)
    cfg = _tiny(tiny_model_dir, **{"env.name": "alfworld", "env.max_steps": 1, "eval.num_tasks": 2,
                                   "eval.splits": ["valid_seen", "valid_unseen"], "generation.batch_size": 1})
    plain = {split: [t.task_id for t in tasks] for split, tasks in eval_tasks(cfg, make_env(cfg.env)).items()}
    rows_a, steps_a = _evaluate(cfg, tmp_path / "a", monkeypatch)
    _shuffle_discovery(monkeypatch, "alfworld")
    other = with_overrides(cfg, {"generation.batch_size": 2, "project.seed": 9})
    assert {s: [t.task_id for t in ts] for s, ts in eval_tasks(other, make_env(other.env)).items()} == plain
    rows_b, steps_b = _evaluate(other, tmp_path / "b", monkeypatch)
    for split in ("valid_seen", "valid_unseen"):
        first = read_panel(cfg, split)["ids"][:2]
        assert plain[split] == [f"alfworld-{split}-{'-'.join(Path(i).parts[2:4])}" for i in first]
    assert [r.task_id for r in rows_a] == plain["valid_seen"] + plain["valid_unseen"]
    assert rows_a == rows_b and steps_a == steps_b


def test_repeats_play_each_instance_k_times_with_distinct_seeds_and_report_the_mean(
        tiny_model_dir, tmp_path, monkeypatch) -> None:
    sampled = {"generation.eval_temperature": 1.0, "generation.max_new_tokens": 4}
    rows_1, steps_1 = _evaluate(_tiny(tiny_model_dir, **sampled), tmp_path / "k1", monkeypatch)
    cfg = _tiny(tiny_model_dir, **sampled, **{"eval.repeats": 2})
    rows_2, steps_2 = _evaluate(cfg, tmp_path / "k2", monkeypatch)
    metrics = json.loads((tmp_path / "k2" / "metrics.json").read_text())
    assert [(r.task_id, r.repeat) for r in rows_2] == [(r.task_id, k) for k in (0, 1) for r in rows_1]
    assert [r for r in rows_2 if r.repeat == 0] == rows_1  # repeat 0 is the k = 1 evaluation
    assert steps_2[:len(steps_1)] == steps_1 and steps_2[len(steps_1):] != steps_1  # repeat 1: its own seed
    assert metrics["eval/episodes"] == 6 and metrics["eval/instances"] == 3 and metrics["eval/repeats"] == 2
    assert metrics["eval/success_rate"] == pytest.approx(sum(r.success for r in rows_2) / 6)
    table = per_instance(rows_2)
    assert [row["task_id"] for row in table] == [r.task_id for r in rows_1] and {row["episodes"] for row in table} == {2}


def test_an_old_episodes_file_without_repeat_loads_as_repeat_0(tmp_path) -> None:
    import pyarrow.parquet as pq

    row = EvalRecord(method="grpo", env="sokoban", split="test", task_id="t", task_type="sokoban", seed=1,
                     success=True, episode_return=10.0, length=3, skill_prompt=False, checkpoint="c", repeat=1)
    table = pq.read_table(write_records([row], tmp_path / "new.parquet", EvalRecord))
    pq.write_table(table.drop(["repeat"]), tmp_path / "old.parquet")
    assert read_records(tmp_path / "old.parquet", EvalRecord)[0].repeat == 0


def test_a_missing_or_unfit_panel_stops_evaluation_in_one_line_naming_the_file_and_the_command(
        tmp_path, monkeypatch) -> None:
    import seed_core.data_gen.task_sets as task_sets

    cfg = with_overrides(SeedConfig(), {"env.name": "sokoban", "model.path": str(tmp_path / "no-model")})
    monkeypatch.setattr(task_sets, "project_root", lambda: tmp_path)
    with pytest.raises(PanelError) as err:
        run_evaluate(cfg, tmp_path / "no-model", tmp_path / "eval", "vanilla")  # before the model loads
    message = str(err.value)
    assert "\n" not in message and str(tmp_path / "data" / "panels" / "sokoban-test.json") in message
    assert "python -m seed_core.data_gen.generate panels --config params.yaml --set env.name=sokoban" in message
    monkeypatch.undo()
    with pytest.raises(PanelError, match=r"sokoban-test.json holds 512 ids, eval.num_tasks asks for 600"):
        panel_tasks(with_overrides(cfg, {"eval.num_tasks": 600}), make_env(cfg.env), "test")
    webshop = with_overrides(SeedConfig(), {"env.name": "webshop"})  # 200 products: not the panel's catalogue
    with pytest.raises(PanelError, match=r"webshop-test.json holds ids of .*'env.webshop.num_products': 1000"):
        panel_tasks(webshop, make_env(webshop.env), "test")


def test_the_checkpoint_column_is_project_relative_so_two_workspaces_write_the_same_rows(
        tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(evaluate, "project_root", lambda: Path(tiny_model_dir).parent)
    rows, _ = _evaluate(_tiny(tiny_model_dir, **{"eval.num_tasks": 2}), tmp_path / "eval", monkeypatch)
    assert {r.checkpoint for r in rows} == {Path(tiny_model_dir).name}
    for workspace in ("a", "b"):
        monkeypatch.setattr(evaluate, "project_root", lambda: tmp_path / workspace)
        assert checkpoint_label(tmp_path / workspace / "data" / "rl" / "seed" / "checkpoint") == \
            "data/rl/seed/checkpoint"
    outside = tmp_path / "models" / "tiny"
    assert checkpoint_label(outside) == str(outside)  # a model outside the project keeps its path
