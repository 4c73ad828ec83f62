"""The mechanism study's registered decision rules (``benchmarks.confirmatory.decisions``, the plan's
``decision_rules`` and ``seeds.extend_when_ci_half_width_above``): claim (3) supported, contradicted or neither by
Holm-corrected comparisons against SEED-static; not judged before all study seeds or after a failed positive control;
the extension seeds required by a wide interval; a governance mode sound by its late parse rate and correctness."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "confirmatory", Path(__file__).resolve().parents[2] / "benchmarks" / "confirmatory.py")
assert _SPEC is not None and _SPEC.loader is not None
_MODULE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MODULE)
decisions, late_analyzer, plan_block, rounds_to = (_MODULE.decisions, _MODULE.late_analyzer, _MODULE.plan_block,
                                                   _MODULE.rounds_to)

SELF = ("seed", "seed_ema", "seed_gated", "seed_anchored")


def _family(diffs: dict[str, float], p_holm: float = 0.01, half: float = 5.0) -> dict:
    return {f"{m}-seed_static": {"mean_diff": d, "p_holm": p_holm, "ci95": [d - half, d + half]}
            for m, d in diffs.items()}


def _decide(family: dict, control: str = "passes", complete: bool = True, **late) -> dict:
    parse = late.get("parse", {m: [1.0] for m in (*SELF, "seed_static")})
    correct = late.get("correct", {m: [0.5] for m in (*SELF, "seed_static")})
    return decisions(family, {"verdict": control}, parse, correct, plan_block(), complete)


def test_claim_3_follows_the_registered_rule() -> None:
    one_wins = _family({"seed": -3.0, "seed_ema": 1.0, "seed_gated": 8.0, "seed_anchored": 0.5})
    one_wins["seed_ema-seed_static"]["p_holm"] = 0.3
    one_wins["seed_anchored-seed_static"]["p_holm"] = 0.3
    assert _decide(one_wins)["claim_3"] == "supported"
    assert _decide(_family({m: -6.0 for m in SELF}))["claim_3"] == "contradicted"
    three_lose = _family({m: -6.0 for m in SELF})
    three_lose["seed_gated-seed_static"]["p_holm"] = 0.2  # one self-evolving row not shown worse
    assert _decide(three_lose)["claim_3"] == "not shown either way"
    unsure = _family({m: 4.0 for m in SELF}, p_holm=0.06)
    assert _decide(unsure)["claim_3"] == "not shown either way", "uncorrected wins do not count"


def test_claim_3_is_not_judged_early_or_after_a_failed_positive_control() -> None:
    family = _family({m: 8.0 for m in SELF})
    assert _decide(family, complete=False)["claim_3"].startswith("not judged: the study seeds are incomplete")
    failed = _decide(family, control="fails")
    assert failed["claim_3"].startswith("not judged: the positive control fails") and not failed["extension_required"]
    missing = {k: v for k, v in family.items() if not k.startswith("seed_ema")}
    assert _decide(missing)["claim_3"] == "not judged: a self-evolving row is missing"


def test_a_wide_interval_requires_the_extension_seeds_and_makes_the_verdict_provisional() -> None:
    narrow = _decide(_family({m: 8.0 for m in SELF}, half=15.0))
    assert narrow["extension_required"] == {} and narrow["final"] is True
    wide = _family({m: 8.0 for m in SELF}, half=15.0)
    wide["seed_gated-seed_static"]["ci95"] = [-8.0, 24.2]
    verdict = _decide(wide)
    assert verdict["extension_required"] == {"seed_gated-seed_static": 16.1} and verdict["final"] is False


def test_a_mode_is_sound_by_its_late_parse_rate_and_correctness_against_the_frozen_analyzer() -> None:
    parse = {"seed": [0.2, 0.3], "seed_ema": [0.95, 0.9], "seed_gated": [0.99, 1.0], "seed_anchored": [0.9, 0.89],
             "seed_static": [1.0, 1.0]}
    correct = {"seed": [0.1, 0.1], "seed_ema": [0.44, 0.46], "seed_gated": [0.46, 0.45], "seed_anchored": [0.6, 0.6],
               "seed_static": [0.5, 0.5]}
    sound = _decide(_family({m: 0.0 for m in SELF}), parse=parse, correct=correct)["analyzer_sound"]
    assert {m: v["sound"] for m, v in sound.items()} == {
        "seed": False,            # parse rate 0.25
        "seed_ema": True,         # 0.925, and 0.45 is no lower than SEED-static's 0.5 minus 0.05
        "seed_gated": True,       # 0.995 and 0.455
        "seed_anchored": False,   # parse rate 0.895 < 0.9, though its correctness is above SEED-static's
    }
    assert sound["seed_anchored"]["parse_late"] == pytest.approx(0.895)


def test_late_analyzer_means_the_last_five_rounds_and_rounds_to_90_counts_from_zero() -> None:
    curve = [{"analysis/parse_ok_rate": v, "rollout/success_rate": s}
             for v, s in zip([1.0, 1.0, 0.0, 0.2, 0.4, 0.6, 0.8], [0.1, 0.5, 0.95, 0.2, 1.0, 1.0, 1.0])]
    cells = [{"curves": {"seed": curve, "grpo": [{"rollout/success_rate": 0.5}]}}]
    assert late_analyzer(cells, "analysis/parse_ok_rate") == {"seed": [pytest.approx(0.4)]}
    assert rounds_to(curve) == 2 and rounds_to([{"rollout/success_rate": 0.5}] * 3) == 4
