"""``eval.with_skills``: the paper's "*" rows play each task with the *static* skill of its task type."""

from seed_core.config import SeedConfig
from seed_core.runtime.io import read_records
from seed_core.loader import with_overrides
from seed_core.stages.evaluate import run_evaluate
from seed_core.skills.static import StaticSkills
from seed_core.types import EvalRecord


def test_star_rows_use_the_static_skill_of_the_task_type(tiny_model_dir, tmp_path, monkeypatch):
    import seed_core.stages.evaluate as collector  # the stage looks rollout up in its own module

    lib = StaticSkills(general="- Never push a box into a corner.", texts={}, mapping={}).write(tmp_path / "lib")
    seen = []
    real = collector.rollout

    def spy(*args, **kwargs):
        seen.append(kwargs.get("skills"))
        return real(*args, **kwargs)

    monkeypatch.setattr(collector, "rollout", spy)
    cfg = with_overrides(SeedConfig(), {
        "model.path": str(tiny_model_dir), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 1,
        "eval.num_tasks": 2, "eval.with_skills": True, "rl.static_skills_dir": str(lib),
        "generation.max_new_tokens": 4})
    metrics = run_evaluate(cfg, tiny_model_dir, tmp_path / "eval", "skill_grpo")
    assert seen[0] is None and set(seen[1].values()) == {"- Never push a box into a corner."}
    assert len(seen[1]) == 2 and "eval/with_skills/success_rate" in metrics
    rows = read_records(tmp_path / "eval" / "episodes.parquet", EvalRecord)
    assert sorted(r.skill_prompt for r in rows) == [False, False, True, True]
    # the extra episodes are the "*" method's rows (Skill-GRPO*), never averaged into Skill-GRPO's
    assert sorted((r.method, r.skill_prompt) for r in rows) == [("skill_grpo", False)] * 2 + [
        ("skill_grpo_star", True)] * 2
    assert metrics["eval/episodes"] == 2.0


def test_a_star_method_plays_only_with_the_static_skills(tiny_model_dir, tmp_path, monkeypatch):
    """evaluate@skill_grpo_star (the pipeline's Skill-GRPO* row): one pass, every prompt with the static skill of
    its task type; its success is those episodes' (no eval.with_skills needed)."""
    import seed_core.stages.evaluate as collector  # the stage looks rollout up in its own module

    lib = StaticSkills(general="- Count the cards first.", texts={}, mapping={}).write(tmp_path / "lib")
    seen = []
    real = collector.rollout

    def spy(*args, **kwargs):
        seen.append(kwargs.get("skills"))
        return real(*args, **kwargs)

    monkeypatch.setattr(collector, "rollout", spy)
    cfg = with_overrides(SeedConfig(), {
        "model.path": str(tiny_model_dir), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 1,
        "eval.num_tasks": 2, "rl.static_skills_dir": str(lib), "generation.max_new_tokens": 4})
    metrics = run_evaluate(cfg, tiny_model_dir, tmp_path / "eval", "skill_grpo_star")
    assert len(seen) == 1 and set(seen[0].values()) == {"- Count the cards first."} and len(seen[0]) == 2
    rows = read_records(tmp_path / "eval" / "episodes.parquet", EvalRecord)
    assert [(r.method, r.skill_prompt) for r in rows] == [("skill_grpo_star", True)] * 2
    assert metrics["eval/episodes"] == 2.0
    assert metrics["eval/success_rate"] == sum(r.success for r in rows) / 2
    assert not [k for k in metrics if "with_skills" in k or "skill_prompt" in k]
