"""The report stage on synthetic evaluation episodes and RL curves (golden values counted by hand)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from seed_core.config import SeedConfig
from seed_core.runtime.io import write_records
from seed_core.loader import with_overrides
from seed_core.stages.report import (ABLATION_NOTE, FORMAT_NOTE, SCORE_NOTE, ablation_table, load_episodes, paper_table,
                                     render_markdown, run_report, summarize)
from seed_core.types import EvalRecord


def _episodes(method: str, outcomes: list[tuple[str, int, bool]], split: str = "valid_seen") -> list[EvalRecord]:
    return [EvalRecord(method=method, env="alfworld", split=split, task_id=f"t{i}", task_type=task_type,
                       seed=seed, success=ok, episode_return=10.0 * ok, length=5, skill_prompt=False,
                       checkpoint="ckpt")
            for i, (task_type, seed, ok) in enumerate(outcomes)]


@pytest.fixture
def run_dirs(tmp_path: Path) -> tuple[dict[str, Path], dict[str, Path]]:
    pick, look = "pick_and_place", "look_at_obj_in_light"
    eval_dirs = {"grpo": tmp_path / "eval" / "grpo", "seed": tmp_path / "eval" / "seed"}
    # grpo: Pick 1/2, Look 0/1 -> all 1/3; seed: Pick 2/2, Look 1/1 -> all 3/3
    write_records(_episodes("grpo", [(pick, 0, True), (pick, 1, False), (look, 2, False)]),
                  eval_dirs["grpo"] / "episodes.parquet", EvalRecord)
    write_records(_episodes("seed", [(pick, 0, True), (pick, 1, True), (look, 2, True)]),
                  eval_dirs["seed"] / "episodes.parquet", EvalRecord)
    rl_dirs = {}
    for name, success in (("grpo", [0.0, 0.5]), ("seed", [0.5, 1.0])):
        rl_dirs[name] = tmp_path / "rl" / name
        rl_dirs[name].mkdir(parents=True)
        curve = {"round": [0, 1], "rollout/success_rate": success, "rl/pg_loss": [0.1, 0.05]}
        if name == "seed":  # grpo has no distillation columns
            curve |= {"rl/opd_loss": [0.0, 0.2], "rl/gate_mean": [0.5, 0.6]}
        pd.DataFrame(curve).to_csv(rl_dirs[name] / "curve.csv", index=False)
    return eval_dirs, rl_dirs


def test_summarize_counts_success_episodes_and_seeds(run_dirs) -> None:
    table = summarize(load_episodes(run_dirs[0]))
    row = table.set_index(["method", "task_type"])
    assert row.loc[("grpo", "pick_and_place"), "success_rate"] == pytest.approx(0.5)
    assert row.loc[("grpo", "look_at_obj_in_light"), "success_rate"] == pytest.approx(0.0)
    assert row.loc[("grpo", "all"), "success_rate"] == pytest.approx(1 / 3)
    assert row.loc[("grpo", "all"), "episodes"] == 3
    assert row.loc[("grpo", "all"), "seeds"] == 3
    assert row.loc[("seed", "all"), "success_rate"] == pytest.approx(1.0)
    assert row.loc[("grpo", "all"), "mean_return"] == pytest.approx(10 / 3)


def test_paper_table_uses_paper_columns_and_method_order(run_dirs) -> None:
    table = summarize(load_episodes({"seed": run_dirs[0]["seed"], "grpo": run_dirs[0]["grpo"]}))
    md = paper_table(table, "alfworld", "valid_seen")
    lines = md.splitlines()
    assert lines[0] == "| Method | Pick | Look | Avg | format-valid | from | episodes | seeds |"
    assert lines[2] == "| GRPO | 50.0 | 0.0 | 33.3 | - | base | 3 | 3 |"  # grpo before seed whatever the input order
    assert lines[3] == "| SEED | 100.0 | 100.0 | 100.0 | - | SFT | 3 | 3 |"  # from: Algorithm.init


def test_a_single_task_type_gets_only_the_avg_column(tmp_path: Path) -> None:
    rows = [EvalRecord(method="grpo", env="sokoban", split="test", task_id=f"t{i}", task_type="sokoban", seed=i,
                       success=i == 0, episode_return=0.0, length=3, skill_prompt=False, checkpoint="c")
            for i in range(4)]
    write_records(rows, tmp_path / "episodes.parquet", EvalRecord)
    md = paper_table(summarize(load_episodes({"grpo": tmp_path})), "sokoban", "test").splitlines()
    assert md[0] == "| Method | Avg | format-valid | from | episodes | seeds |"
    assert md[2] == "| GRPO | 25.0 | - | base | 4 | 4 |"


def test_run_report_writes_table_and_curves(run_dirs, tmp_path: Path) -> None:
    cfg = with_overrides(SeedConfig(), {"project.preset": "unit-test"})
    out = tmp_path / "reports"
    metrics = run_report(run_dirs[0], run_dirs[1], out, cfg)
    assert metrics == {"grpo/alfworld/valid_seen/success_rate": pytest.approx(1 / 3),
                       "seed/alfworld/valid_seen/success_rate": pytest.approx(1.0)}
    csv = pd.read_csv(out / "table.csv")
    assert list(csv.columns) == ["method", "label", "env", "split", "task_type", "success_rate", "score", "episodes",
                                 "seeds", "mean_return", "format_valid_rate"]
    assert dict(zip(csv["method"], csv["label"])) == {"grpo": "GRPO", "seed": "SEED"}
    assert len(csv) == 6  # 2 methods x (2 task types + all)
    assert csv["score"].isna().all()  # ALFWorld reports no partial score: the column stays empty
    md = (out / "table.md").read_text()
    assert "preset `unit-test`" in md and "not the paper's results" in md
    assert "## alfworld / valid_seen" in md and "Score" not in md
    for png in ("curve_success.png", "curve_losses.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"


def test_run_report_logs_the_table_and_both_curves_to_mlflow(run_dirs, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A real sqlite store: the table is an MLflow table artifact (load_table), the curves PNG images."""
    import mlflow

    from seed_core import tracking

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    cfg = with_overrides(SeedConfig(), {"tracking.experiment": "report-unit"})
    with tracking.open_run(cfg, "report", log_config=False) as tracker:
        metrics = run_report(run_dirs[0], run_dirs[1], tmp_path / "reports", cfg, tracker)
    client = mlflow.MlflowClient(uri)
    names = {f.path for f in client.list_artifacts(tracker.run_id, "curves")}
    assert names == {"curves/curve_success.png", "curves/curve_losses.png"}
    png = mlflow.artifacts.download_artifacts(run_id=tracker.run_id, artifact_path="curves/curve_success.png",
                                              dst_path=str(tmp_path / "dl"), tracking_uri=uri)
    assert Path(png).read_bytes()[:4] == b"\x89PNG"
    experiment = client.get_run(tracker.run_id).info.experiment_id
    table = client.load_table(experiment, "results/table.json", run_ids=[tracker.run_id])
    overall = table[table["task_type"] == "all"].set_index("method")["success_rate"]
    assert overall.to_dict() == pytest.approx({"grpo": 1 / 3, "seed": 1.0})
    assert metrics["seed/alfworld/valid_seen/success_rate"] == 1.0
    tracking._client.cache_clear()


def test_run_report_without_rl_curves_still_writes_both_plots(run_dirs, tmp_path: Path) -> None:
    out = tmp_path / "reports"
    run_report({"grpo": run_dirs[0]["grpo"]}, {}, out, SeedConfig())
    assert (out / "curve_success.png").is_file() and (out / "curve_losses.png").is_file()


def test_missing_episodes_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="episodes.parquet"):
        run_report({"grpo": tmp_path / "nope"}, {}, tmp_path / "reports", SeedConfig())


def _webshop(method: str, outcomes: list[tuple[str, float | None, bool]]) -> list[EvalRecord]:
    return [EvalRecord(method=method, env="webshop", split="test", task_id=f"w{i}", task_type=category, seed=i,
                       success=ok, episode_return=10.0 * ok, length=6, skill_prompt=False, checkpoint="c",
                       score=score)
            for i, (category, score, ok) in enumerate(outcomes)]


def test_webshop_rows_show_score_and_success_and_sokoban_rows_no_score(tmp_path: Path) -> None:
    # grpo: electronics scores 1.0 (success) and 0.75, beauty 0.25 and 0.0 -> Score 2.0/4 = 50.0, Succ 1/4 = 25.0;
    # its sokoban episodes (1 of 2 solved) have no score.
    # vanilla: an old-format file (no score column) -> its Score cell is "-", Succ 1/2.
    grpo = _webshop("grpo", [("electronics", 1.0, True), ("electronics", 0.75, False), ("beauty", 0.25, False),
                              ("beauty", 0.0, False)])
    grpo += [EvalRecord(method="grpo", env="sokoban", split="test", task_id=f"s{i}", task_type="sokoban", seed=i,
                        success=i == 0, episode_return=0.0, length=3, skill_prompt=False, checkpoint="c")
             for i in range(2)]
    write_records(grpo, tmp_path / "grpo" / "episodes.parquet", EvalRecord)
    vanilla = write_records(_webshop("vanilla", [("beauty", 0.5, False), ("electronics", 1.0, True)]),
                            tmp_path / "vanilla" / "episodes.parquet", EvalRecord)
    pq.write_table(pq.read_table(vanilla).drop(["score"]), vanilla)
    out = tmp_path / "reports"
    metrics = run_report({"grpo": tmp_path / "grpo", "vanilla": tmp_path / "vanilla"}, {}, out, SeedConfig())

    assert metrics["grpo/webshop/test/score"] == pytest.approx(0.5)
    assert metrics["grpo/webshop/test/success_rate"] == pytest.approx(0.25)
    assert "grpo/sokoban/test/score" not in metrics and "vanilla/webshop/test/score" not in metrics
    md = (out / "table.md").read_text()
    webshop = md.split("## webshop / test\n\n")[1].split("\n\n## ")[0].splitlines()
    assert webshop[0] == SCORE_NOTE
    assert webshop[2] == "| Method | beauty | electronics | Score | Succ | format-valid | from | episodes | seeds |"
    assert webshop[4] == "| Vanilla | 0.0 | 100.0 | - | 50.0 | - | - | 2 | 2 |"
    assert webshop[5] == "| GRPO | 0.0 | 50.0 | 50.0 | 25.0 | - | base | 4 | 4 |"
    sokoban = md.split("## sokoban / test\n\n")[1].splitlines()
    assert sokoban[0] == "| Method | Avg | format-valid | from | episodes | seeds |"
    assert sokoban[2] == "| GRPO | 50.0 | - | base | 2 | 2 |"
    csv = pd.read_csv(out / "table.csv").set_index(["method", "env", "task_type"])
    assert csv.loc[("grpo", "webshop", "all"), "score"] == pytest.approx(0.5)
    assert csv.loc[("grpo", "webshop", "electronics"), "score"] == pytest.approx(0.875)
    assert csv.loc[("grpo", "webshop", "beauty"), "score"] == pytest.approx(0.125)
    assert pd.isna(csv.loc[("grpo", "sokoban", "all"), "score"])
    assert pd.isna(csv.loc[("vanilla", "webshop", "all"), "score"])


def _sokoban(method: str, wins: list[bool], skill_prompt: bool = False) -> list[EvalRecord]:
    return [EvalRecord(method=method, env="sokoban", split="test", task_id=f"t{i}", task_type="sokoban", seed=i,
                       success=ok, episode_return=0.0, length=3, skill_prompt=skill_prompt, checkpoint="c")
            for i, ok in enumerate(wins)]


def test_rows_follow_the_paper_order_and_labels_and_star_rows_follow_their_policy(tmp_path: Path) -> None:
    """Input in reverse; the table reads Vanilla, Skill-Prompt*, SFT, OPSD, GRPO, Skill-GRPO, Skill-GRPO*,
    GRPO+OPSD, Skill-SD, RLSD, SDAR, OPID, OPID (self-analysis), SEED-static, SEED, then an unknown key."""
    keys = ["vanilla", "vanilla_star", "sft", "opsd", "grpo", "skill_grpo", "skill_grpo_star", "grpo_opsd",
            "skill_sd", "rlsd", "sdar", "opid", "opid_self", "seed_static", "seed", "mine"]
    dirs = {}
    for j, key in reversed(list(enumerate(keys))):  # key j wins 1 of 2, or 2 of 2 when j is even
        dirs[key] = tmp_path / key
        write_records(_sokoban(key, [True, j % 2 == 0], skill_prompt=key.endswith("_star")),
                      dirs[key] / "episodes.parquet", EvalRecord)
    table = summarize(load_episodes(dirs))
    lines = paper_table(table, "sokoban", "test").splitlines()[2:]
    assert [line.split(" | ")[0][2:] for line in lines] == [
        "Vanilla", "Skill-Prompt*", "SFT", "OPSD", "GRPO", "Skill-GRPO", "Skill-GRPO*", "GRPO+OPSD", "Skill-SD",
        "RLSD", "SDAR", "OPID", "OPID (self-analysis)", "SEED-static", "SEED", "mine"]
    assert lines[5:7] == ["| Skill-GRPO | 50.0 | - | base | 2 | 2 |", "| Skill-GRPO* | 100.0 | - | base | 2 | 2 |"]  # j = 5, 6
    assert list(table[table["task_type"] == "all"]["method"]) == keys  # the CSV keeps the keys


def test_extra_star_episodes_get_their_own_row_and_never_change_the_methods(tmp_path: Path) -> None:
    """evaluate@grpo with eval.with_skills: its plain episodes (1 of 4 won) are GRPO, the starred ones (3 of 4,
    recorded as grpo_star) are GRPO*; a "*" method's directory holds only starred episodes."""
    rows = _sokoban("grpo", [True, False, False, False]) + _sokoban("grpo_star", [True, True, True, False], True)
    write_records(rows, tmp_path / "grpo" / "episodes.parquet", EvalRecord)
    write_records(_sokoban("skill_grpo_star", [True, False], True), tmp_path / "sg" / "episodes.parquet", EvalRecord)
    table = summarize(load_episodes({"grpo": tmp_path / "grpo", "skill_grpo_star": tmp_path / "sg"}))
    overall = table[table["task_type"] == "all"].set_index("method")
    assert overall["success_rate"].to_dict() == {"grpo": 0.25, "grpo_star": 0.75, "skill_grpo_star": 0.5}
    assert overall["label"].to_dict() == {"grpo": "GRPO", "grpo_star": "GRPO*", "skill_grpo_star": "Skill-GRPO*"}
    assert list(overall["episodes"]) == [4, 4, 2]


def test_the_ablation_table_gives_each_row_its_drop_against_seed_and_its_start(tmp_path: Path) -> None:
    """The paper's Table 2: SEED 3/4, w/o SFT 2/4 (from base), w/o OPD 1/4 (from SFT); GRPO is not an ablation row."""
    wins = {"seed": [True, True, True, False], "seed_no_sft": [True, True, False, False],
            "seed_no_opd": [True, False, False, False], "grpo": [False] * 4}
    dirs = {}
    for key, won in wins.items():
        dirs[key] = tmp_path / key
        write_records(_sokoban(key, won), dirs[key] / "episodes.parquet", EvalRecord)
    table = summarize(load_episodes(dirs))
    assert ablation_table(table, "sokoban", "test").splitlines() == [
        "| Row | Success | Drop (row - SEED) | from |", "|---|---|---|---|",
        "| SEED | 75.0 | - | SFT |",
        "| SEED w/o hindsight-skill SFT | 50.0 | -25.0 | base |",
        "| SEED w/o self-evolving OPD | 25.0 | -50.0 | SFT |"]
    assert ablation_table(summarize(load_episodes({"grpo": dirs["grpo"], "seed": dirs["seed"]})),
                          "sokoban", "test") is None  # no ablation row: no table
    md = render_markdown(table, SeedConfig())
    assert "### Ablations (paper Table 2): sokoban / test" in md and ABLATION_NOTE in md


def test_the_sweep_report_renders_the_ablations_with_paired_cis() -> None:
    from seed_core.sweep.report import render_sweep_table

    per_seed = {"seed": [0.5, 0.6, 0.7], "seed_no_opd": [0.4, 0.4, 0.6]}
    summary = {"setting": {"seeds": [0, 1, 2]},
               "methods": {m: {"per_seed": v, "mean": sum(v) / 3, "ci95": [min(v), max(v)], "iqm": sum(v) / 3, "n": 3}
                           for m, v in per_seed.items()},
               "comparisons": {"seed-seed_no_opd": {"mean_diff": 0.1333, "ci95": [0.1, 0.2], "prob_improvement": 0.89,
                                                    "prob_improvement_ci95": [0.5, 1.0]}}}
    md = render_sweep_table(summary)
    assert "| SEED | 60.0 | - | - | - |" in md
    assert "| SEED w/o self-evolving OPD | 46.7 | -13.3 | [-20.0, -10.0] | 0.89 |" in md  # the paper's sign


def test_star_rows_show_their_format_valid_rate_beside_success(tmp_path: Path) -> None:
    """EvalRecord.format_valid_rate (per episode) -> table.csv's mean and the ``format-valid`` cell right after
    Avg: SEED* answered well-formed on 50% and 100% of its steps (75.0), SEED on every step; a file written
    before the field existed shows "-"."""
    from dataclasses import replace

    star = [replace(r, format_valid_rate=v) for r, v in zip(_sokoban("seed_star", [True, False], True), [0.5, 1.0])]
    write_records(star, tmp_path / "seed_star" / "episodes.parquet", EvalRecord)
    write_records([replace(r, format_valid_rate=1.0) for r in _sokoban("seed", [True, True])],
                  tmp_path / "seed" / "episodes.parquet", EvalRecord)
    old = write_records(_sokoban("grpo", [True, False]), tmp_path / "grpo" / "episodes.parquet", EvalRecord)
    pq.write_table(pq.read_table(old).drop(["format_valid_rate"]), old)
    out = tmp_path / "reports"
    run_report({k: tmp_path / k for k in ("seed_star", "seed", "grpo")}, {}, out, SeedConfig())
    lines = (out / "table.md").read_text().split("## sokoban / test\n\n")[1].splitlines()
    assert lines[0] == "| Method | Avg | format-valid | from | episodes | seeds |"
    assert lines[2:] == ["| GRPO | 50.0 | - | base | 2 | 2 |", "| SEED | 100.0 | 100.0 | SFT | 2 | 2 |",
                         "| SEED* | 50.0 | 75.0 | SFT | 2 | 2 |"]
    assert FORMAT_NOTE in (out / "table.md").read_text()
    csv = pd.read_csv(out / "table.csv").set_index(["method", "task_type"])
    assert csv.loc[("seed_star", "all"), "format_valid_rate"] == pytest.approx(0.75)
