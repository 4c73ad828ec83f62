"""Analyzer governance (issue 39): each mode does what its row says, on hand-checked values and real tiny rounds."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from seed_core.analyzer.audit import failure_category
from seed_core.analyzer.governance import AnalyzerWeights, GovernanceError, ema_update, refresh_passes
from seed_core.config import SeedConfig
from seed_core.runtime.io import read_metrics, read_records
from seed_core.loader import with_overrides
from seed_core.stages import rl_analyzer
from seed_core.stages.rl import run_rl, run_rl_round
from seed_core.types import AnnotationRecord


def _linear(value: float) -> torch.nn.Linear:
    layer = torch.nn.Linear(2, 2)
    with torch.no_grad():
        layer.weight.fill_(value)
        layer.bias.fill_(value)
    return layer


def test_ema_moves_by_its_rate() -> None:
    target, source = _linear(1.0), _linear(3.0)
    ema_update(target, source, 0.1)  # 0.9 * 1 + 0.1 * 3 = 1.2
    assert torch.allclose(target.weight, torch.full((2, 2), 0.9 * 1.0 + 0.1 * 3.0), rtol=0, atol=1e-6)
    ema_update(target, source, 0.0)
    assert torch.allclose(target.bias, torch.full((2,), 1.2), rtol=0, atol=1e-6)
    ema_update(target, source, 1.0)
    assert torch.equal(target.weight, source.weight)
    with pytest.raises(GovernanceError, match="rl.analyzer_ema_rate"):
        ema_update(target, source, 1.5)


@pytest.mark.parametrize("candidate, current, passes", [
    ({"parse_ok_rate": 0.96, "skill_correct": 0.80}, {"parse_ok_rate": 1.0, "skill_correct": 0.84}, True),
    ({"parse_ok_rate": 0.90, "skill_correct": 0.90}, {"parse_ok_rate": 1.0, "skill_correct": 0.80}, False),
    ({"parse_ok_rate": 1.00, "skill_correct": 0.70}, {"parse_ok_rate": 1.0, "skill_correct": 0.80}, False),
    ({"parse_ok_rate": 0.50}, {"parse_ok_rate": 0.52}, True),  # no judge: the parse rate alone
    ({}, {"parse_ok_rate": 0.0}, False),  # no audit: never
])
def test_the_gated_rule(candidate: dict, current: dict, passes: bool) -> None:
    assert refresh_passes(candidate, current, 0.05) is passes


def _state(model: torch.nn.Module, audit: dict[str, float], round_idx: int = 3) -> SimpleNamespace:
    cfg = with_overrides(SeedConfig(), {"rl.audit_tolerance": 0.05})
    weights = AnalyzerWeights.copy_of(model)
    weights.audit, weights.refreshed_round = dict(audit), 1
    return SimpleNamespace(cfg=cfg, round_idx=round_idx, governance={"weights": weights})


def test_gated_keeps_its_snapshot_when_a_planted_bad_refresh_fails_the_audit(monkeypatch) -> None:
    snapshot, updated = _linear(1.0), _linear(5.0)
    state = _state(snapshot, {"parse_ok_rate": 0.95, "skill_correct": 0.9})
    monkeypatch.setattr(rl_analyzer, "_audit", lambda st, model: {"parse_ok_rate": 0.30, "skill_correct": 0.9})
    out = rl_analyzer._gated_refresh(state, updated)
    kept = state.governance["weights"]
    assert torch.equal(kept.model.weight, torch.full((2, 2), 1.0)) and kept.refreshed_round == 1
    assert out["audit/refreshed"] == 0.0 and out["audit/candidate_parse_ok_rate"] == 0.30
    assert out["audit/parse_ok_rate"] == 0.95 and out["audit/analyzer_round"] == 1.0

    monkeypatch.setattr(rl_analyzer, "_audit", lambda st, model: {"parse_ok_rate": 0.93, "skill_correct": 0.88})
    out = rl_analyzer._gated_refresh(state, updated)  # within the tolerance: taken for the next round
    assert torch.equal(kept.model.weight, updated.weight) and kept.refreshed_round == 4
    assert out["audit/refreshed"] == 1.0 and out["audit/parse_ok_rate"] == 0.93


def _note(ok: bool, error: str = "", tokens: int = 10, skill: str = "x") -> AnnotationRecord:
    return AnnotationRecord(traj_id="t", client="policy", model="m", policy_version="v", prompt="p", raw_output="r",
                            episode_summary="", episode_skill=skill if ok else "", step_skills="{}",
                            parse_status="ok" if ok else "failed", error=error, attempts=1, prompt_tokens=1,
                            completion_tokens=tokens, latency_s=0.0)


def test_failure_categories() -> None:
    assert failure_category(_note(True), 16) is None
    assert failure_category(_note(False, "no JSON object found in the analyzer answer", tokens=16), 16) == "truncated"
    assert failure_category(_note(False, "no JSON object found in the analyzer answer"), 16) == "invalid_json"
    assert failure_category(_note(False, "the JSON object's 'episode_skill' field is missing; ..."), 16) == \
        "missing_field"
    assert failure_category(_note(False, "the JSON object's 'episode_skill' field is empty; ..."), 16) == "empty_skill"
    assert failure_category(_note(False, "empty answer"), 16) == "call"
    assert failure_category(_note(False, "empty answer", tokens=0), 0) == "call"  # no budget: never truncated


def _cfg(model: Path, algorithm: str, **extra) -> SeedConfig:
    return with_overrides(SeedConfig(), {
        "model.path": str(model), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 1,
        "rl.algorithm": algorithm, "rl.tasks_per_round": 1, "rl.group_size": 2, "rl.lr": 1e-2, "rl.kl_coef": 0.0,
        "rl.mini_batch_size": 8, "rl.micro_batch_size": 8, "generation.max_new_tokens": 4,
        "generation.max_prompt_tokens": 512, "rl.analyzer_max_new_tokens": 4, "rl.rounds": 2,
        "rl.audit_panel_tasks": 2, **extra})


def _md5s(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in sorted(folder.glob("*.safetensors"))}


def test_the_frozen_analyzer_is_the_stage1_checkpoint_every_round(tiny_model_dir, tmp_path) -> None:
    before = _md5s(tiny_model_dir)
    run_rl(_cfg(tiny_model_dir, "seed_static"), tiny_model_dir, tmp_path / "rl")
    for r in (0, 1):
        notes = read_records(tmp_path / "rl" / f"round_{r:03d}" / "annotations.parquet", AnnotationRecord)
        assert notes and {n.model for n in notes} == {str(tiny_model_dir)} and {n.client for n in notes} == \
            {"checkpoint"}
    assert _md5s(tiny_model_dir) == before  # the update never writes the analyzer's weights
    assert _md5s(tmp_path / "rl" / "checkpoint") != before  # while the policy did move


def test_ema_analyzer_resumes_from_its_saved_weights(tiny_model_dir, tmp_path) -> None:
    cfg = _cfg(tiny_model_dir, "seed_ema", **{"rl.analyzer_ema_rate": 0.5})
    run_rl(cfg, tiny_model_dir, tmp_path / "a")  # in memory, round to round
    saved = tmp_path / "a" / "round_001" / "analyzer"
    policy = _md5s(tmp_path / "a" / "round_001" / "checkpoint")
    assert _md5s(saved) not in (policy, _md5s(tiny_model_dir))  # between the policy and Stage 1
    run_rl_round(cfg, 0, tiny_model_dir, tmp_path / "b")  # from disk: round 1 reads round_000/analyzer
    run_rl_round(cfg, 1, tiny_model_dir, tmp_path / "b")
    assert _md5s(tmp_path / "b" / "round_001" / "analyzer") == _md5s(saved)
    assert read_metrics(tmp_path / "b" / "round_001" / "metrics.json")["analysis/parse_ok_rate"] == \
        read_metrics(tmp_path / "a" / "round_001" / "metrics.json")["analysis/parse_ok_rate"]


def test_gated_rounds_audit_a_fixed_panel(tiny_model_dir, tmp_path) -> None:
    run_rl(_cfg(tiny_model_dir, "seed_gated"), tiny_model_dir, tmp_path / "rl")
    m = read_metrics(tmp_path / "rl" / "round_001" / "metrics.json")
    assert {"audit/candidate_parse_ok_rate", "audit/parse_ok_rate", "audit/refreshed", "audit/analyzer_round",
            "analysis/fail_truncated"} <= set(m)
    assert (tmp_path / "rl" / "audit_panel" / "tasks.json").is_file()
    assert (tmp_path / "rl" / "round_001" / "analyzer" / "governance.json").is_file()


def test_a_probe_rows_analyses_never_reach_the_loss(tiny_model_dir, tmp_path) -> None:
    """GRPO from SFT with and without the probe: the same loss, the same updated weights, bit for bit."""
    plain = run_rl_round(_cfg(tiny_model_dir, "seed_no_opd", **{"rl.rounds": 1}), 0, tiny_model_dir, tmp_path / "a")
    probe = run_rl_round(_cfg(tiny_model_dir, "grpo_sft_probe", **{"rl.rounds": 1}), 0, tiny_model_dir,
                         tmp_path / "b")
    assert "analysis/parse_ok_rate" in probe and "analysis/parse_ok_rate" not in plain
    assert probe["rl/total_loss"] == plain["rl/total_loss"] and "rl/opd_loss" not in probe
    assert _md5s(tmp_path / "a" / "round_000" / "checkpoint") == _md5s(tmp_path / "b" / "round_000" / "checkpoint")
    assert math.isfinite(probe["analysis/fail_truncated"])


def test_the_audit_shares_add_up_and_a_low_parse_rate_warns_once(caplog) -> None:
    from seed_core.analyzer.audit import audit_metrics, warn_if_unsound

    notes = [_note(True), _note(False, "no JSON object found", tokens=16), _note(False, "empty answer"),
             _note(False, "no JSON object found")]
    m = audit_metrics(None, notes, [], {}, 16, "analysis")
    assert m["analysis/analyses"] == 4.0  # the denominator, so a rank's share is told from the round's
    assert m["analysis/parse_ok_rate"] == 0.25 and m["analysis/fail_truncated"] == 0.25
    assert m["analysis/fail_invalid_json"] == 0.25 and m["analysis/fail_call"] == 0.25
    assert sum(v for k, v in m.items() if k.startswith("analysis/fail_")) + m["analysis/parse_ok_rate"] == 1.0
    with caplog.at_level("WARNING"):
        assert warn_if_unsound(m, "seed", 7) is True
        assert warn_if_unsound({"analysis/parse_ok_rate": 0.5}, "seed", 8) is False
    lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(lines) == 1 and "round 7" in lines[0] and "25%" in lines[0]


def test_skills_that_copy_the_answer_skeleton_parse_but_warn(caplog) -> None:
    """The ALFWorld rehearsal at 609a0d8: the analyzer answered the skeleton itself, which parses with the skill
    "string" (its parse rate read 1.0 and its teacher re-scored with "string")."""
    from seed_core.analyzer.audit import warn_if_unsound
    from seed_core.analyzer.parse import parse_analysis, skill_metrics
    from seed_core.analyzer.prompts import _skeleton

    copied = parse_analysis(_skeleton(0)).episode_skill
    assert copied == "string"
    m = skill_metrics([copied, "String ", "open the drawer first", copied], "analysis")
    assert m["analysis/placeholder_share"] == 0.75 and m["analysis/distinct_skills"] == 3.0
    assert skill_metrics([], "annotate")["annotate/placeholder_share"] == 0.0
    with caplog.at_level("WARNING"):
        assert warn_if_unsound({"analysis/parse_ok_rate": 1.0, **m}, "seed_static", 0) is True
        assert warn_if_unsound({"analysis/parse_ok_rate": 1.0, "analysis/placeholder_share": 0.25}, "seed", 1) is False
    lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(lines) == 1 and "75%" in lines[0] and "placeholder" in lines[0]
