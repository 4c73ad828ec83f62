"""The evaluated methods (seed_core.methods): the paper's row order and labels, "*" methods, and where the
pipeline, the sweep and the command line use them."""

from __future__ import annotations

from pathlib import Path

import pytest

from seed_core.algorithms import ALGORITHMS, CHECKPOINT_METHODS, PAPER_ORDER
from seed_core.config import ConfigError, SeedConfig
from seed_core.loader import load_config, with_overrides
from seed_core.methods import METHODS, in_paper_order, label, star

ROOT = Path(__file__).resolve().parents[2]


def test_every_policy_is_in_the_paper_order_once() -> None:
    assert sorted(PAPER_ORDER) == sorted({*CHECKPOINT_METHODS, *ALGORITHMS.names()})
    assert len(PAPER_ORDER) == len(set(PAPER_ORDER))
    assert sorted(METHODS.names()) == sorted([*PAPER_ORDER, *(p + "_star" for p in PAPER_ORDER)])


def test_the_paper_rows_in_order_with_their_labels() -> None:
    """seed-algorithm.md §5.1: Vanilla, Skill-Prompt*, OPSD, GRPO, Skill-GRPO, Skill-GRPO*, GRPO+OPSD, Skill-SD,
    RLSD, SDAR, OPID; SEED's rows (SFT, SEED-static, SEED) where they fit."""
    keys = ["seed", "opid", "sdar", "rlsd", "skill_sd", "grpo_opsd", "skill_grpo_star", "skill_grpo", "grpo", "opsd",
            "sft", "vanilla_star", "vanilla", "seed_static", "my_label"]
    assert [label(k) for k in in_paper_order(keys)] == [
        "Vanilla", "Skill-Prompt*", "SFT", "OPSD", "GRPO", "Skill-GRPO", "Skill-GRPO*", "GRPO+OPSD", "Skill-SD",
        "RLSD", "SDAR", "OPID", "SEED-static", "SEED", "my_label"]


def test_a_star_method_evaluates_its_policy_with_the_static_skills() -> None:
    from flows.common import StagePaths

    m = METHODS.get("skill_grpo_star")
    assert (m.policy, m.with_skills, m.trained, m.label) == ("skill_grpo", True, True, "Skill-GRPO*")
    assert star("seed") == "seed_star" and not METHODS.get("seed").with_skills
    assert not METHODS.get("vanilla_star").trained
    paths = StagePaths(data=Path("data"), reports=Path("reports"))
    assert paths.checkpoint("skill_grpo_star") == paths.checkpoint("skill_grpo")
    assert paths.checkpoint("skill_grpo") == Path("data/rl/skill_grpo/checkpoint")
    assert paths.checkpoint("vanilla_star") == Path("data/models/base")
    assert paths.checkpoint("sft_star") == Path("data/sft/checkpoint")


def test_the_sweep_trains_each_policy_once_and_accepts_star_methods() -> None:
    from seed_app.cli import parse_methods
    from seed_core.sweep.cell import rl_methods

    assert rl_methods(["vanilla", "skill_grpo_star", "grpo", "skill_grpo", "sft_star"]) == ["skill_grpo", "grpo"]
    assert parse_methods("vanilla, grpo,skill_grpo*") == ["vanilla", "grpo", "skill_grpo_star"]
    cfg = load_config(ROOT / "params.yaml", {"sweep.methods": ["grpo", "skill_grpo", "skill_grpo_star"]})
    assert cfg.sweep.methods[-1] == "skill_grpo_star"
    with pytest.raises(ConfigError, match=r"sweep.methods\[1\] = 'skill_grpo\*': not a known method; did you mean "
                                          r"'skill_grpo' or 'skill_grpo_star'\?"):
        with_overrides(SeedConfig(), {"sweep.methods": ["grpo", "skill_grpo*"]})


def test_the_sweep_table_shows_labels_in_the_paper_order() -> None:
    from seed_core.sweep.report import render_sweep_table

    def stats(mean: float) -> dict:
        return {"mean": mean, "ci95": [mean - 0.1, mean + 0.1], "iqm": mean, "per_seed": [mean], "n": 1}

    summary = {"setting": {"seeds": [0], "episodes": 4, "description": "unit"},
               "methods": {"seed": stats(0.5), "skill_grpo_star": stats(0.4), "grpo": stats(0.3),
                           "skill_grpo": stats(0.2)},
               "comparisons": {"seed-grpo": {"mean_diff": 0.2, "ci95": [0.1, 0.3], "prob_improvement": 1.0,
                                             "prob_improvement_ci95": [1.0, 1.0]}},
               "mechanism": {"seed": {"rl/gate_mean": 0.5}, "grpo": {}}}
    lines = render_sweep_table(summary).splitlines()
    start = lines.index("| Method | Success (mean ± CI, n seeds) | 95% CI | IQM | per seed |") + 2
    assert [line.split(" | ")[0][2:] for line in lines[start:start + 5]] == [
        "GRPO", "Skill-GRPO", "Skill-GRPO*", "SEED", ""]
    assert "| Skill-GRPO* | 40.0 ± 10.0 (1) | [30.0, 50.0] | 40.0 | 40.0 |" in lines
    assert "| SEED - GRPO | +20.0 | [+10.0, +30.0] | 1.00 | [1.00, 1.00] |" in lines
    assert lines[-2:] == ["| GRPO | - |", "| SEED | 0.500 |"]


def test_a_sweep_cell_reads_its_own_static_skill_library(tmp_path: Path) -> None:
    from seed_core.skills.static import StaticSkills, for_config
    from seed_core.sweep.cell import with_cell_library

    StaticSkills(general="- cell skill", texts={}, mapping={}).write(tmp_path / "cell" / "annotate" / "static_skills")
    cfg = with_cell_library(with_overrides(SeedConfig(), {"project.data_dir": str(tmp_path / "data")}),
                            tmp_path / "cell" / "annotate")
    assert for_config(cfg).skill_for("any") == "- cell skill"  # the root data/annotate has none
    mine = with_overrides(SeedConfig(), {"rl.static_skills_dir": "/my/lib"})
    assert with_cell_library(mine, tmp_path).rl.static_skills_dir == "/my/lib"
