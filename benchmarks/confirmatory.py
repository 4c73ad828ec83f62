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
