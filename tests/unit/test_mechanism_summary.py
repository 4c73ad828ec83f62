"""benchmarks/mechanism.py's summary of committed cells (issue 25): the study is the preset's method list, a cell of
another study is left out, a controls cell of the same seed and Stage 1 joins its seed's row (paired), one of
another Stage 1 does not, two study cells of one seed are refused, and a lambda study of ``seed`` alone is paired
with the main study's GRPO of the same seeds."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("mechanism", Path(__file__).resolve().parents[2] / "benchmarks" /
                                               "mechanism.py")
assert _SPEC is not None and _SPEC.loader is not None
_MODULE = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_MODULE)
lambda_block, summarize_cells = _MODULE.lambda_block, _MODULE.summarize_cells

STUDY = ["sft", "grpo", "seed"]


def _cell(seed: int, methods: list[str], success: dict[str, float], stage1: float = 0.5) -> dict:
    return {"seed": seed, "methods": methods, "success": success, "config_hash": f"k{seed}-{'-'.join(methods)}",
            "curves": {m: [{"rollout/success_rate": success[m]}] for m in methods if m not in ("sft", "vanilla")},
            "mechanism": {}, "stage1": {"collect/success_rate": stage1 + seed, "time/sft_s": 60.0 + len(methods)},
            "wall_s": 1.0}  # the wall time differs between a study cell and its controls cell


def _write(folder: Path, cell: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"seed_{cell['seed']}-{cell['config_hash']}.json").write_text(json.dumps(cell))


@pytest.fixture
def preset(tmp_path: Path) -> Path:
    path = tmp_path / "preset.yaml"
    path.write_text(f"sweep:\n  seeds: [0, 1, 2]\n  methods: {json.dumps(STUDY)}\n")
    return path


def test_the_study_is_the_presets_methods_and_controls_join_their_seeds(tmp_path: Path, preset: Path) -> None:
    cells = tmp_path / "cells"
    for seed, (sft, grpo, seed_) in enumerate([(0.5, 0.6, 0.7), (0.5, 0.9, 0.8), (0.4, 0.5, 0.9)]):
        _write(cells, _cell(seed, STUDY, {"sft": sft, "grpo": grpo, "seed": seed_}))
        _write(cells, _cell(seed, ["sft", "seed_empty"], {"sft": sft, "seed_empty": seed_ - 0.1 * (seed + 1)}))
    _write(cells, _cell(0, ["sft", "grpo"], {"sft": 0.0, "grpo": 0.0}, stage1=0.5))  # an older study's cell
    learning = summarize_cells(cells, preset)
    assert learning["setting"]["seeds"] == [0, 1, 2]
    assert learning["methods"]["grpo"]["per_seed"] == [0.6, 0.9, 0.5], "the older study's seed-0 cell stays out"
    assert learning["methods"]["seed_empty"]["per_seed"] == pytest.approx([0.6, 0.6, 0.6])
    diff = learning["comparisons"]["seed-seed_empty"]["mean_diff"]
    assert diff == pytest.approx((0.1 + 0.2 + 0.3) / 3), "the control is paired with SEED seed by seed"
    assert learning["comparisons"]["seed-grpo"]["mean_diff"] == pytest.approx((0.1 - 0.1 + 0.4) / 3)


def test_a_control_of_another_stage1_does_not_join(tmp_path: Path, preset: Path) -> None:
    cells = tmp_path / "cells"
    for seed in (0, 1):
        _write(cells, _cell(seed, STUDY, {"sft": 0.5, "grpo": 0.6, "seed": 0.7}))
    _write(cells, _cell(0, ["sft", "seed_empty"], {"sft": 0.5, "seed_empty": 0.1}, stage1=0.9))
    _write(cells, _cell(1, ["sft", "seed_empty"], {"sft": 0.5, "seed_empty": 0.1}))
    assert "seed_empty" not in summarize_cells(cells, preset)["methods"], "seed 0's control had another Stage 1"


def test_two_study_cells_of_one_seed_are_refused(tmp_path: Path, preset: Path) -> None:
    cells = tmp_path / "cells"
    _write(cells, _cell(0, STUDY, {"sft": 0.5, "grpo": 0.6, "seed": 0.7}))
    other = _cell(0, STUDY, {"sft": 0.5, "grpo": 0.6, "seed": 0.7})
    other["config_hash"] = "other"
    _write(cells, other)
    with pytest.raises(SystemExit, match="2 cells of seed 0"):
        summarize_cells(cells, preset)


def test_a_lambda_study_of_seed_alone_is_paired_with_the_main_grpo(tmp_path: Path, preset: Path) -> None:
    main_cells, lam_cells = tmp_path / "main", tmp_path / "lam"
    for seed, (grpo, seed_, seed_lam) in enumerate([(0.6, 0.7, 0.5), (0.9, 0.8, 0.6)]):
        _write(main_cells, _cell(seed, STUDY, {"sft": 0.5, "grpo": grpo, "seed": seed_}))
        _write(lam_cells, _cell(seed, ["sft", "seed"], {"sft": 0.5, "seed": seed_lam}))
    main = summarize_cells(main_cells, preset)
    block = lambda_block([f"0.1={lam_cells}"], preset, main)["0.1"]
    assert block["opd_coef"] == 0.1 and block["seeds"] == [0, 1]
    assert block["comparisons"]["seed-grpo"]["mean_diff"] == pytest.approx(((0.5 - 0.6) + (0.6 - 0.9)) / 2)
    assert block["comparisons"]["seed-seed_main"]["mean_diff"] == pytest.approx(((0.5 - 0.7) + (0.6 - 0.8)) / 2)


def test_outcomes_count_the_seeds_in_each_band_and_per_round_means_skip_nan() -> None:
    methods = {"grpo": {"per_seed": [1.0, 0.96, 0.5, 0.0, 0.7]}}
    assert _MODULE.outcomes(methods) == {"grpo": {"learned": 2, "naive": 1, "collapsed": 1, "other": 1}}
    cells = [{"curves": {"seed": [{"analysis/skill_correct": 0.8}, {"analysis/skill_correct": float("nan")}]}},
             {"curves": {"seed": [{"analysis/skill_correct": 0.6}, {"analysis/skill_correct": 0.2}]}}]
    assert _MODULE.per_round(cells) == {"seed": {"analysis/skill_correct": [0.7, 0.2]}}


def test_the_lab_adds_seed_static_against_its_same_start_controls() -> None:
    learning = {"methods": {"seed_static": {"per_seed": [0.9, 1.0]}, "seed_no_opd": {"per_seed": [0.5, 0.9]},
                            "seed": {"per_seed": [0.5, 0.5]}, "grpo": {"per_seed": [0.4, 0.7]}},
                "comparisons": {"seed-grpo": {"mean_diff": 0.0}}}
    out = _MODULE.comparisons(learning)
    assert out["seed-grpo"]["mean_diff"] == pytest.approx(-0.05), "the sweep's comparisons recomputed, paired"
    assert out["seed-grpo"]["paired_wins"] == [1, 0, 1] and out["seed-grpo"]["p_paired"] == 1.0
    assert out["seed_static-seed_no_opd"]["mean_diff"] == pytest.approx(0.25)
    assert out["seed_static-seed_no_opd"]["p_holm"] == pytest.approx(min(1.0, 2 * 0.5)), "Holm over the family"
    assert "seed_static-seed_shuffled" not in out, "a comparison needs both methods"


def test_the_confirmatory_family_is_paired_exact_and_holm_corrected() -> None:
    from benchmarks.confirmatory import family_block, positive_control, primary_scores, train_success_auc

    scores = {"a": [0.9, 0.8, 0.5, 0.7, 0.6], "b": [0.5, 0.6, 0.6, 0.2, 0.1], "c": [0.5, 0.6, 0.6, 0.2, 0.1]}
    fam = family_block(scores, ["a-b", "b-c", "a-missing"])
    assert set(fam) == {"a-b", "b-c"}, "a comparison without scores is left out of the family"
    assert fam["a-b"]["paired_wins"] == [4, 0, 1] and fam["a-b"]["p_paired"] == pytest.approx(4 / 32)
    assert fam["a-b"]["p_holm"] == pytest.approx(2 * 4 / 32) and fam["b-c"]["p_holm"] == 1.0
    assert "prob_improvement_unpaired" in fam["a-b"] and "prob_improvement" not in fam["a-b"]
    assert train_success_auc([{"rollout/success_rate": 0.5}, {"rollout/success_rate": 1.0}]) == 75.0
    cells = [{"curves": {"grpo": [{"rollout/success_rate": 0.2}, {"rollout/success_rate": 0.4}]}},
             {"curves": {"grpo": [{"rollout/success_rate": 1.0}]}}]
    assert primary_scores(cells) == {"grpo": pytest.approx([30.0, 100.0])}
    plan = {"positive_control": {"comparison": "opsd_oracle - sft", "passes_when": "..."}}
    big = {"opsd_oracle": [90.0 + i for i in range(8)], "sft": [50.0] * 8}
    assert positive_control(big, plan)["verdict"] == "passes"  # p = 2 / 256
    small = {"opsd_oracle": [95, 85, 34, 88, 47, 75, 50, 88, 5, 55], "sft": [53, 55, 52, 50, 49, 48, 50, 52, 52, 53]}
    verdict = positive_control(small, plan)  # the exploratory lab's held-out numbers: +10.6 points
    assert verdict["verdict"] == "fails" and verdict["mean_diff"] == pytest.approx(10.6, abs=0.5)  # rounded per-seed values


def test_the_plan_is_registered_with_its_commit() -> None:
    from benchmarks.confirmatory import plan_block

    plan = plan_block()
    assert plan["primary_outcome"]["name"] == "train_success_auc" and plan["family"]["correction"].startswith("holm")
    assert set(plan["seeds"]["tuning"]).isdisjoint(plan["seeds"]["study"]), "tuning seeds are not study seeds"
    assert len(plan["seeds"]["study"]) >= 10
    from seed_core.algorithms import ALGORITHMS

    rows = [r["method"] for r in plan["rows"]]
    assert all(ALGORITHMS.get(m) for m in rows if m != "sft")
    for comparison in plan["family"]["comparisons"]:
        a, _, b = comparison["name"].partition("-")
        assert a in rows and b in rows, comparison["name"]
