"""The registered plan of the mechanism study and its statistics (issue 39), for ``benchmarks/mechanism.py``.

``plan_block`` reads ``benchmarks/mechanism_plan.yaml`` with the commit that first added it (``git log``), so the
result shows that the plan precedes the cells. ``family_block`` computes every comparison of a family on per-seed
scores: the paired mean difference (95% bootstrap CI), ``paired_wins`` [a > b, ties, a < b], the exact sign-flip
``p_paired``, Holm's ``p_holm`` over the family, and rliable's P(a > b) under the name it has: an *unpaired*
statistic over all seed pairs (``prob_improvement_unpaired``). ``primary_scores`` is the plan's primary outcome per
method and seed (the training-success AUC from each cell's curve); ``positive_control`` judges the control first.
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "benchmarks" / "mechanism_plan.yaml"


def plan_block(path: Path = PLAN) -> dict[str, Any]:
    """The plan as registered, with ``registered_commit``: the commit that added the file (empty when uncommitted)."""
    plan = yaml.safe_load(Path(path).read_text())
    rel = Path(path).resolve().relative_to(ROOT)
    found = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H %cI", "--", str(rel)], cwd=ROOT,
                           capture_output=True, text=True, check=False).stdout.split()
    plan["registered_commit"], plan["registered_commit_time"] = (found[-2], found[-1]) if found else ("", "")
    return plan


def compare(a: list[float], b: list[float]) -> dict[str, Any]:
    """One comparison of paired per-seed scores (module docstring), less ``p_holm``."""
    from seed_core.stats import paired_difference, paired_test, probability_of_improvement

    unpaired = probability_of_improvement(a, b)
    return {**paired_difference(a, b), **paired_test(a, b),
            "prob_improvement_unpaired": unpaired["prob_improvement"],
            "prob_improvement_unpaired_ci95": unpaired["prob_improvement_ci95"]}


def family_block(scores: dict[str, list[float]], names: list[str]) -> dict[str, Any]:
    """``{name: compare(...) + p_holm}`` for every ``a-b`` of ``names`` whose two methods have scores; Holm runs over
    the comparisons computed."""
    from seed_core.stats import holm

    out = {}
    for name in names:
        a, _, b = name.partition("-")
        if a in scores and b in scores and len(scores[a]) == len(scores[b]) > 0:
            out[name] = compare(scores[a], scores[b])
    for name, p in holm({k: v["p_paired"] for k, v in out.items()}).items():
        out[name]["p_holm"] = p
    return out


def train_success_auc(curve: list[dict[str, Any]]) -> float | None:
    """Mean over rounds of ``rollout/success_rate``, x 100 (None without a curve)."""
    values = [float(r["rollout/success_rate"]) for r in curve if "rollout/success_rate" in r]
    values = [v for v in values if not math.isnan(v)]
    return 100.0 * sum(values) / len(values) if values else None


def primary_scores(cells: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per RL method that every cell has a curve of, its training-success AUC per seed (cells in seed order)."""
    out: dict[str, list[float]] = {}
    for method in cells[0].get("curves", {}):
        values = [train_success_auc(c["curves"].get(method, [])) for c in cells]
        if all(v is not None for v in values):
            out[method] = [float(v) for v in values if v is not None]
    return out


def heldout_scores(methods: dict[str, Any]) -> dict[str, list[float]]:
    """Per method, held-out success per seed in points (a sweep's ``methods`` block holds fractions)."""
    return {m: [100.0 * v for v in s["per_seed"]] for m, s in methods.items()}


def positive_control(heldout: dict[str, list[float]], plan: dict[str, Any]) -> dict[str, Any]:
    """The control's verdict by the plan's rule: mean difference >= 10 points and p_paired < 0.05."""
    a, _, b = plan["positive_control"]["comparison"].replace(" ", "").partition("-")
    if a not in heldout or b not in heldout:
        return {"comparison": f"{a}-{b}", "verdict": "not run"}
    result = compare(heldout[a], heldout[b])
    passed = result["mean_diff"] >= 10.0 and result["p_paired"] < 0.05
    return {"comparison": f"{a}-{b}", "outcome": "heldout_success", **result,
            "verdict": "passes" if passed else "fails",
            "rule": plan["positive_control"]["passes_when"]}


SELF_EVOLVING = ("seed", "seed_ema", "seed_gated", "seed_anchored")
"""The rows whose analyzer follows the policy (``decision_rules.claim_3``); ``seed_static``'s is frozen."""


def late_analyzer(cells: list[dict[str, Any]], key: str, last: int = 5) -> dict[str, list[float]]:
    """Per analyzing method, per seed: the mean of ``key`` (``analysis/parse_ok_rate``, ``analysis/skill_correct``)
    over the curve's last ``last`` rounds (the plan's ``analyzer_parse_late`` / ``analyzer_correct_late``)."""
    out: dict[str, list[float]] = {}
    for method in cells[0].get("curves", {}) if cells else ():
        values = []
        for cell in cells:
            rows = [float(r[key]) for r in cell["curves"].get(method, [])[-last:] if key in r]
            values.append(sum(rows) / len(rows) if rows and not any(math.isnan(v) for v in rows) else None)
        if values and all(v is not None for v in values):
            out[method] = [float(v) for v in values if v is not None]
    return out


def rounds_to(curve: list[dict[str, Any]], level: float = 0.9) -> int:
    """First round whose ``rollout/success_rate`` >= ``level``; the number of rounds + 1 when none is."""
    for i, row in enumerate(curve):
        if float(row.get("rollout/success_rate", float("nan"))) >= level:
            return i
    return len(curve) + 1


def decisions(family: dict[str, Any], control: dict[str, Any], parse_late: dict[str, list[float]],
              correct_late: dict[str, list[float]], plan: dict[str, Any], complete: bool) -> dict[str, Any]:
    """The plan's decision rules applied as registered (``mechanism_plan.yaml``: ``decision_rules``, ``seeds``):

    - extension: every comparison of the family whose 95% CI half-width exceeds ``extend_when_ci_half_width_above``
      (then the plan adds the extension seeds to every row, and the verdicts below are provisional until they run);
    - claim (3): "supported" iff some self-evolving row beats ``seed_static`` with ``p_holm < alpha``,
      "contradicted" iff ``seed_static`` beats every one of them with ``p_holm < alpha``, else "not shown either
      way"; not judged while the study is incomplete or after the positive control failed;
    - analyzer_sound, per self-evolving mode: mean late parse rate >= 0.9 and mean late correctness >= SEED-static's
      minus 0.05 (means over the study seeds)."""
    alpha = float(plan["family"]["alpha"])
    limit = float(plan["seeds"]["extend_when_ci_half_width_above"])
    wide = {name: round((c["ci95"][1] - c["ci95"][0]) / 2, 2) for name, c in family.items()
            if (c["ci95"][1] - c["ci95"][0]) / 2 > limit}
    vs_static = {m: family.get(f"{m}-seed_static") for m in SELF_EVOLVING}
    if not complete:
        claim = "not judged: the study seeds are incomplete"
    elif control.get("verdict") != "passes":
        claim = f"not judged: the positive control {control.get('verdict', 'did not run')} (the plan revises the lab)"
    elif any(c is None for c in vs_static.values()):
        claim = "not judged: a self-evolving row is missing"
    elif any(c["mean_diff"] > 0 and c["p_holm"] < alpha for c in vs_static.values()):
        claim = "supported"
    elif all(c["mean_diff"] < 0 and c["p_holm"] < alpha for c in vs_static.values()):
        claim = "contradicted"
    else:
        claim = "not shown either way"

    def mean(v: list[float]) -> float:
        return sum(v) / len(v)

    static_correct = mean(correct_late["seed_static"]) if "seed_static" in correct_late else None
    sound = {}
    for m in SELF_EVOLVING:
        if m in parse_late and m in correct_late and static_correct is not None:
            p, c = mean(parse_late[m]), mean(correct_late[m])
            sound[m] = {"parse_late": round(p, 4), "correct_late": round(c, 4),
                        "sound": p >= 0.9 and c >= static_correct - 0.05}
    return {"extension_required": wide, "final": complete and not wide, "claim_3": claim,
            "claim_3_rule": plan["decision_rules"]["claim_3"],
            "seed_static_correct_late": None if static_correct is None else round(static_correct, 4),
            "analyzer_sound": sound, "analyzer_sound_rule": plan["decision_rules"]["analyzer_sound"]}
