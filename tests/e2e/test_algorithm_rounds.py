"""One short RL round per registered algorithm, end to end on the tiny model (rollout -> skills ->
teacher scoring -> update), with the static library of a temporary directory (``rl.static_skills_dir``)."""

import math

import pytest

from seed_core.algorithms import ALGORITHMS
from seed_core.config import SeedConfig
from seed_core.runtime.io import read_records
from seed_core.loader import with_overrides
from seed_core.stages.rl import run_rl_round
from seed_core.skills.static import StaticSkills
from seed_core.types import StepRecord

SKILL = "Push the box toward the target, never into a corner."


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    lib = StaticSkills(general=f"- {SKILL}", texts={"sokoban.md": "- Count the steps."},
                       mapping={"sokoban": "sokoban.md"})
    return lib.write(tmp_path_factory.mktemp("static") / "lib")


@pytest.mark.parametrize("name", ALGORITHMS.names())
def test_one_round(name, tiny_model_dir, library, tmp_path):
    cfg = with_overrides(SeedConfig(), {
        "model.path": str(tiny_model_dir), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 1,
        "rl.algorithm": name, "rl.tasks_per_round": 1, "rl.group_size": 2, "rl.lr": 1e-3, "rl.kl_coef": 0.0,
        "rl.mini_batch_size": 8, "rl.micro_batch_size": 8, "generation.max_new_tokens": 4,
        "generation.max_prompt_tokens": 512, "rl.analyzer_max_new_tokens": 4, "rl.gate_beta": 3.0,
        "rl.static_skills_dir": str(library), "annotate.client": "oracle",
    })
    m = run_rl_round(cfg, 0, tiny_model_dir, tmp_path / "rl")
    assert all(math.isfinite(v) for v in m.values()), m
    algo = ALGORITHMS.get(name)
    assert m["rl/optimizer_steps"] == 1.0 and m["algo/pg_coef"] == dict(algo.fixed).get("pg_coef", 1.0)
    assert dict(algo.fixed).get("pg_coef", 1.0) == (0.0 if name in ("opsd", "opsd_oracle") else 1.0)
    if algo.skill_source == "static" and algo.context is not None:
        assert m["rl/teacher_sample_ratio"] == 1.0  # every task type has a static skill
    if algo.distill:
        assert "rl/opd_loss" in m and m["algo/lambda"] == (0.001 if name == "skill_sd" else 0.01)
    if name == "grpo_opsd":
        assert m["algo/beta"] == 0.0 and m["rl/gate_mean"] == pytest.approx(0.5)
    if name == "sdar":
        assert m["algo/beta"] == 3.0
    if name == "opid":  # the external (here: oracle) analyzer always parses
        assert m["analysis/parse_ok_rate"] == 1.0 and m["rl/teacher_sample_ratio"] == 1.0
    steps = read_records(tmp_path / "rl" / "round_000" / "trajectories.parquet", StepRecord)
    assert all((SKILL in s.prompt) == algo.student_skills for s in steps)  # Skill-GRPO: the student sees it
