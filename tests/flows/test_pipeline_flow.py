"""The in-process pipeline flow on the tiny model: every stage's outputs, and what MLflow holds after it
(parent/child/round runs, params, per-step metrics, tags, registered checkpoints)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from flows.common import eval_methods, rl_algorithms
from seed_core.config import SeedConfig
from seed_core.methods import label

RL_ALGORITHMS = rl_algorithms(SeedConfig())  # rl.algorithm = seed, as in params.yaml and the tiny params
EVAL_METHODS = eval_methods(SeedConfig())  # ... + seed_star: SEED evaluated with the static skills

STAGE_RUNS = {"prepare_model", "collect", "annotate", "sft", "report",
              *(f"rl-{a}" for a in RL_ALGORITHMS), *(f"eval-{m}" for m in EVAL_METHODS)}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path, tiny_params: Any,
             mlflow_uri: str) -> dict[str, Any]:
    from flows.pipeline import pipeline_flow

    root = tmp_path_factory.mktemp("pipeline")
    params = tiny_params(root / "params.yaml", tiny_model_dir, str(root / "data"),
                         tracking={"experiment": "pipeline-flow-test"})
    start = time.perf_counter()
    metrics = pipeline_flow(params)
    return {"root": root, "metrics": metrics, "seconds": time.perf_counter() - start}


@pytest.fixture(scope="module")
def runs(pipeline: dict[str, Any], mlflow_uri: str) -> dict[str, Any]:
    import mlflow

    client = mlflow.MlflowClient(mlflow_uri)
    experiment = client.get_experiment_by_name("pipeline-flow-test")
    every = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in every if r.info.run_name == "pipeline"]
    assert len(parents) == 1
    return {"client": client, "parent": parents[0], "all": every,
            "by_name": {r.info.run_name: r for r in every if r.info.run_name != "pipeline"}}


def test_pipeline_writes_every_stage_output(pipeline: dict[str, Any]) -> None:
    data = pipeline["root"] / "data"
    assert (data / "models" / "base" / "config.json").is_file()
    assert (data / "alfworld_games").is_dir() and not any((data / "alfworld_games").iterdir())  # sokoban: no games
    assert (data / "collect" / "trajectories.parquet").is_file()
    assert (data / "annotate" / "sft_examples.jsonl").is_file()
    assert (data / "sft" / "checkpoint" / "config.json").is_file()
    for algorithm in RL_ALGORITHMS:
        assert (data / "rl" / algorithm / "round_000" / "DONE").is_file()
        assert (data / "rl" / algorithm / "curve.csv").is_file()
    for method in EVAL_METHODS:
        assert (data / "eval" / method / "episodes.parquet").is_file()
    table = (pipeline["root"] / "reports" / "table.md").read_text()
    assert "preset `tiny-test`" in table
    for method in EVAL_METHODS:
        assert f"| {label(method)} |" in table
    assert set(pipeline["metrics"]) == {f"{m}/sokoban/test/success_rate" for m in EVAL_METHODS}


def test_mlflow_has_one_child_run_per_stage_and_round(runs: dict[str, Any]) -> None:
    parent_id = runs["parent"].info.run_id
    children = {r.info.run_name for r in runs["all"] if r.data.tags.get("mlflow.parentRunId") == parent_id}
    assert children == STAGE_RUNS
    for algorithm in RL_ALGORITHMS:
        stage = runs["by_name"][f"rl-{algorithm}"]
        round_run = runs["by_name"][f"rl-{algorithm}-round-000"]
        assert round_run.data.tags["mlflow.parentRunId"] == stage.info.run_id
        assert "rl/pg_loss" in round_run.data.metrics
    assert all(r.info.status == "FINISHED" for r in runs["all"])


def test_mlflow_params_tags_and_metrics(runs: dict[str, Any]) -> None:
    client, by_name = runs["client"], runs["by_name"]
    static = by_name["rl-seed_static"]
    assert static.data.params["rl.algorithm"] == "seed_static"  # each RL variant logs its own config
    assert static.data.params["collect.group_size"] == "2"
    sft = by_name["sft"]
    assert sft.data.tags["preset"] == "tiny-test"
    assert sft.data.tags["prefect.flow_run_id"]
    assert sft.data.tags["mlflow.source.git.commit"]
    assert len(client.get_metric_history(sft.info.run_id, "sft/loss")) >= 1  # per-step curve
    assert "eval/success_rate" in by_name["eval-seed"].data.metrics
    assert by_name["eval-seed"].data.tags["method"] == "seed"
    assert "grpo/sokoban/test/success_rate" in runs["parent"].data.metrics
    assert "system/cpu_utilization_percentage" in sft.data.metrics  # system metrics on stage runs
    assert {f.path for f in client.list_artifacts(runs["parent"].info.run_id, "results")} == {"results/table.json"}
    assert len(client.list_artifacts(runs["parent"].info.run_id, "curves")) == 2


def test_mlflow_opens_on_runs_and_names_prompts_and_skill_samples(runs: dict[str, Any]) -> None:
    """Issue 41: the experiment is typed model training; the runs that send analysis prompts name their registered
    versions; each analyzing round logs a sample of its skills as a table (none for GRPO, which does not analyze)."""
    client, by_name = runs["client"], runs["by_name"]
    assert client.get_experiment(runs["parent"].info.experiment_id).tags["mlflow.experimentKind"] == \
        "custom_model_development"
    for name in ("annotate", "rl-seed"):
        assert by_name[name].data.tags["prompt.seed-analysis"].isdigit()
    assert not any(k.startswith("prompt.") for k in by_name["rl-grpo"].data.tags)
    skills = client.list_artifacts(by_name["rl-seed-round-000"].info.run_id)
    assert "analyzer_skills.json" in {f.path for f in skills}
    table = client.load_table(runs["parent"].info.experiment_id, "analyzer_skills.json",
                              run_ids=[by_name["rl-seed-round-000"].info.run_id])
    assert len(table) > 0 and {"skill", "parsed", "correct", "failure"} <= set(table.columns)
    grpo = client.list_artifacts(by_name["rl-grpo-round-000"].info.run_id)
    assert "analyzer_skills.json" not in {f.path for f in grpo}


def test_the_report_stage_published_the_table_as_a_prefect_artifact(pipeline: dict[str, Any]) -> None:
    from prefect.artifacts import Artifact

    from flows.results import RESULTS_KEY

    assert Artifact.get(RESULTS_KEY).data == (pipeline["root"] / "reports" / "table.md").read_text()


def test_final_checkpoints_are_registered_models(runs: dict[str, Any], tmp_path: Path) -> None:
    import mlflow

    client = runs["client"]
    names = {m.name for m in client.search_registered_models()}
    assert names == {"seed-sokoban-sft", *(f"seed-sokoban-{a}" for a in RL_ALGORITHMS)}
    local = mlflow.artifacts.download_artifacts("models:/seed-sokoban-seed/1", dst_path=str(tmp_path),
                                                tracking_uri=client.tracking_uri)
    assert (Path(local) / "MLmodel").is_file()  # the transformers flavor (tracking.model_flavor)
    assert (Path(local) / "model" / "config.json").is_file() and (Path(local) / "model" / "model.safetensors").is_file()
    version = client.get_model_version_by_alias("seed-sokoban-seed", "newest")
    assert {k: version.tags[k] for k in ("algorithm", "env", "seed")} == {"algorithm": "seed", "env": "sokoban",
                                                                          "seed": "0"}
    best = client.get_model_version_by_alias("seed-sokoban-seed", "best-success_rate")  # set by evaluate@seed
    # the store is shared by the session (other modules register versions too): `best` moves to a newer
    # version only when it scores better, so it is this run's version or an earlier one
    assert int(best.version) <= int(version.version) and "eval/success_rate" in best.tags


def test_rl_flow_resumes_after_the_last_finished_round_and_restarts_on_a_new_config(
        pipeline: dict[str, Any], runs: dict[str, Any], tiny_params: Any, tiny_model_dir: Path) -> None:
    """Runs last: it extends the pipeline's grpo run (round 0 done) to 2 rounds, then changes the config."""
    from flows.rl import rl_flow

    root = pipeline["root"]
    out = root / "data" / "rl" / "grpo"
    done = (out / "round_000" / "DONE").stat().st_mtime_ns
    longer = tiny_params(root / "longer.yaml", tiny_model_dir, str(root / "data"),
                         rl={"rounds": 2}, tracking={"experiment": "pipeline-flow-test"})
    rl_flow(longer, "grpo")
    assert (out / "round_000" / "DONE").stat().st_mtime_ns == done  # round 0 reused, not redone
    assert (out / "round_001" / "DONE").is_file()
    rounds = runs["client"].search_runs([runs["parent"].info.experiment_id],
                                        "attributes.run_name = 'rl-grpo-round-000'")
    assert sorted(r.data.tags["resumed"] for r in rounds) == ["False", "True"]

    changed = tiny_params(root / "changed.yaml", tiny_model_dir, str(root / "data"),
                          rl={"rounds": 1, "lr": 3.0e-4}, tracking={"experiment": "pipeline-flow-test"})
    rl_flow(changed, "grpo")
    assert (out / "round_000" / "DONE").stat().st_mtime_ns != done  # different config: started over
    assert not (out / "round_001").exists()
