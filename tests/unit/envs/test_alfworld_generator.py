"""The offline ALFWorld game generator: released text, one solvable game per task type, the stage contract."""

from __future__ import annotations

import importlib.util
import json
import re
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.alfworld,
    pytest.mark.skipif(importlib.util.find_spec("alfworld") is None, reason="needs the alfworld package"),
]

from seed_core.config import EnvConfig, SeedConfig  # noqa: E402
from seed_core.loader import with_overrides

SHARED_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "alfworld"
TASK_LINE = re.compile(r"Your task is to: [^\"]*")


def test_mangled_ids_match_alfworld_problems() -> None:
    from seed_core.alfworld.problems import mangle

    expected = "Cabinet_bar__plus_00_dot_68_bar__plus_00_dot_50_bar__minus_02_dot_20"
    assert mangle("Cabinet|+00.68|+00.50|-02.20") == expected
    assert mangle("loc|-4|18|0|30") == "loc_bar__minus_4_bar_18_bar_0_bar_30"


def test_generated_text_is_the_released_domain_and_grammar() -> None:
    from seed_core.alfworld.problems import release_logic
    from seed_core.alfworld.scenes import wheel_data

    domain, grammar = release_logic(wheel_data())
    real = json.loads(next((SHARED_DATA / "json_2.1.1" / "valid_seen").glob("*/*/game.tw-pddl")).read_text())
    assert domain == real["pddl_domain"]
    assert TASK_LINE.sub("TASK", grammar) == TASK_LINE.sub("TASK", real["grammar"])
    assert 'template :: "put {o} in/on {r}";' in grammar and "action help" not in grammar


def test_one_generated_game_per_task_type_is_solvable_on_the_real_engine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from seed_core.alfworld.scenes import UNSEEN_FLOOR_PLANS
    from seed_core.envs.alfworld import ALFWorldEnv
    from seed_core.stages.generate_alfworld import REPORT, run_generate_alfworld

    cfg = with_overrides(SeedConfig(), {"env.alfworld.num_generated_games": 6})
    start = time.perf_counter()
    metrics = run_generate_alfworld(cfg, tmp_path, max_object_types=4)
    seconds = time.perf_counter() - start
    print(f"generated 6 games in {seconds:.1f} s; {metrics}")
    assert metrics["generate/games"] == 6.0
    labels = ("pick", "look", "clean", "heat", "cool", "pick2")
    assert all(metrics[f"generate/games_{label}"] == 1.0 for label in labels)
    report = json.loads((tmp_path / REPORT).read_text())
    assert {g["floor_plan"] for g in report["games"]}.isdisjoint(UNSEEN_FLOOR_PLANS)

    monkeypatch.setenv("ALFWORLD_DATA", str(SHARED_DATA))  # it has no train split: train = the generated games
    env = ALFWorldEnv(EnvConfig(name="alfworld", max_steps=30, alfworld={"generated_dir": str(tmp_path)}))
    tasks = env.make_tasks("train", 0, seed=0)
    assert sorted(t.task_type for t in tasks) == ["clean", "cool", "heat", "look", "pick", "pick2"]
    for task in tasks:
        game = json.loads(Path(task.payload["gamefile"]).read_text())
        traj = json.loads((Path(task.payload["gamefile"]).parent / "traj_data.json").read_text())
        assert game["solvable"] is True and game["walkthrough"] == env.walkthrough(task)
        assert traj["task_type"] in task.payload["gamefile"]
        env.reset(task)
        results = [env.step(action) for action in game["walkthrough"]]
        assert results[-1].won and results[-1].reward == 10.0, (task.task_id, game["walkthrough"])
        assert sum(r.reward for r in results) == 10.0


def test_generator_refuses_to_overwrite_a_foreign_directory(tmp_path: Path) -> None:
    from seed_core.stages.generate_alfworld import run_generate_alfworld

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        run_generate_alfworld(SeedConfig(), tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"
