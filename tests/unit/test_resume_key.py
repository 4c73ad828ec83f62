"""The RL resume key covers every input of the rl stage but ``rl.rounds`` (issue 26): its code (the same lines DVC's
code stage writes to ``data/code/rl/<algorithm>.sha256``), the starting checkpoint and its data (static skills, ALFWorld games).
The DVC-level check (an edit in a finished workspace recomputes the rounds) is tests/flows/test_rl_stale_rounds.py."""

from __future__ import annotations

import shutil
from pathlib import Path

from seed_core.algorithms import effective_config
from seed_core.config import SeedConfig
from seed_core.loader import with_overrides
from seed_core.lineage.resume import rl_code, rl_fingerprint, rl_inputs
from tests.unit.test_dvc_deps import dvc_deps


def test_the_engine_hashes_the_same_code_lines_as_the_dvc_code_stage() -> None:
    """As ``rl@<algorithm>`` runs it (``flows/rl.py``: the algorithm's fixed values applied), the engine's code lines
    are the code stage's for that algorithm: its losses only (GRPO's have no distillation loss)."""
    params = dvc_deps.load_params()
    for algorithm in ("seed", "grpo", "skill_sd"):
        cfg = effective_config(with_overrides(params, {"rl.algorithm": algorithm}))
        assert rl_code(cfg) == dvc_deps.stage_fingerprint("rl", params, algorithm), algorithm
    seed = rl_code(with_overrides(params, {"rl.algorithm": "seed"}))
    assert "seed_core/stages/rl.py" in seed and "seed_core/losses/policy.py" in seed
    assert "seed_core/losses/distill.py" in seed
    assert "seed_core/losses/distill.py" not in rl_code(with_overrides(params, {"rl.algorithm": "grpo"}))


def test_a_code_edit_changes_the_key_and_a_rounds_change_does_not(tiny_model_dir: Path) -> None:
    cfg = SeedConfig()
    code = rl_code(cfg)
    base = rl_fingerprint(cfg, tiny_model_dir, code)
    assert rl_fingerprint(cfg, tiny_model_dir) == base  # default: rl_code(cfg)
    edited = code.replace(code[:64], "0" * 64, 1)  # one file's sha256 changed
    assert rl_fingerprint(cfg, tiny_model_dir, edited) != base
    assert rl_fingerprint(with_overrides(cfg, {"rl.rounds": 99}), tiny_model_dir, code) == base


def test_a_changed_static_skill_library_or_game_set_changes_the_key(tiny_model_dir: Path, tmp_path: Path) -> None:
    """For an algorithm that reads the library (SDAR: its teacher context); GRPO's key ignores it."""
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "library.json").write_text('{"general": "plan first"}')
    cfg = with_overrides(SeedConfig(), {"rl.static_skills_dir": str(skills), "rl.algorithm": "sdar"})
    assert rl_inputs(cfg)["static_skills"] == skills
    grpo = with_overrides(cfg, {"rl.algorithm": "grpo"})
    assert "static_skills" not in rl_inputs(grpo)
    grpo_key = rl_fingerprint(grpo, tiny_model_dir, "code")
    base = rl_fingerprint(cfg, tiny_model_dir, "code")
    (skills / "library.json").write_text('{"general": "plan last"}')
    changed = rl_fingerprint(cfg, tiny_model_dir, "code")
    assert changed != base
    assert rl_fingerprint(grpo, tiny_model_dir, "code") == grpo_key  # GRPO's rounds stay valid
    (skills / "extra.json").write_text("{}")
    assert rl_fingerprint(cfg, tiny_model_dir, "code") != changed  # a new file counts too
    shutil.rmtree(skills)
    assert rl_fingerprint(cfg, tiny_model_dir, "code") not in (base, changed)  # absent: a key of its own

    games = tmp_path / "games"
    games.mkdir()
    cfg = with_overrides(cfg, {"env.alfworld.generated_dir": str(games)})
    before = rl_fingerprint(cfg, tiny_model_dir, "code")
    (games / "game.tw-pddl").write_text("(define)")
    assert rl_fingerprint(cfg, tiny_model_dir, "code") != before
