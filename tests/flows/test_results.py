"""Results where users look (issue 16): `seed run`'s pipeline flow run publishes the report's table as keyed
Prefect artifacts and puts the table, curves and headline metrics on the MLflow parent run; `seed run`
prints the UI links. DVC is replaced by a fake that writes the report, so this runs in seconds."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from flows import servers
from flows.results import RESULTS_KEY, RESULTS_TABLE_KEY, mlflow_run_url, prefect_flow_run_url, table_rows
from seed_app import dvc_run
from seed_core.config import project_root

matplotlib.use("Agg")

TABLE = pd.DataFrame({"method": ["grpo", "seed"], "env": ["sokoban"] * 2, "split": ["test"] * 2,
                      "task_type": ["all"] * 2, "success_rate": [0.25, 0.75], "score": [float("nan")] * 2,
                      "episodes": [4, 4], "seeds": [1, 1], "mean_return": [0.5, 1.5]})


def write_reports(reports: Path, note: str) -> None:
    import matplotlib.pyplot as plt

    reports.mkdir(parents=True, exist_ok=True)
    TABLE.to_csv(reports / "table.csv", index=False)
    (reports / "table.md").write_text(f"# table {note}\n\n| Method | Avg |\n|---|---|\n| grpo | 25.0 |\n| seed | 75.0 |\n")
    for name in ("curve_success.png", "curve_losses.png"):
        fig = plt.figure()
        fig.savefig(reports / name)
        plt.close(fig)


def write_report_inputs(root: Path, experiment: str) -> tuple[str, ...]:
    """params.yaml (data under ``root``) and what the report stage reads: evaluation episodes of every
    method of ``eval_methods`` (method i wins i of 16 tasks; "*" rows played with skills) and RL curves.
    Returns the methods in that order."""
    from flows.common import eval_methods, rl_algorithms
    from seed_core.runtime.io import write_records
    from seed_core.loader import load_config
    from seed_core.types import EvalRecord

    params = yaml.safe_load((project_root() / "params.yaml").read_text())
    params["project"]["data_dir"] = str(root / "data")
    params["tracking"]["experiment"] = experiment
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    cfg = load_config(root / "params.yaml")
    methods = eval_methods(cfg)  # + seed_star (rl.algorithm = seed)
    for i, method in enumerate(methods):
        records = [EvalRecord(method=method, env="sokoban", split="test", task_id=f"t{k}", task_type="push",
                              seed=0, success=k < i, episode_return=0.0, length=3,
                              skill_prompt=method.endswith("_star"), checkpoint="c") for k in range(16)]
        write_records(records, root / "data" / "eval" / method / "episodes.parquet", EvalRecord)
    for algorithm in rl_algorithms(cfg):
        (root / "data" / "rl" / algorithm).mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"round": [0, 1], "rollout/success_rate": [0.1, 0.2], "rl/pg_loss": [0.3, 0.2]}).to_csv(
            root / "data" / "rl" / algorithm / "curve.csv", index=False)
    return methods


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mlflow_uri: str) -> Path:
    """A project root in tmp_path whose `dvc repro` (faked) writes reports/ with a run-specific note."""
    params = yaml.safe_load((project_root() / "params.yaml").read_text())
    params["tracking"]["experiment"] = "results-test"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.setattr(dvc_run, "project_root", lambda: tmp_path)
    real_run = subprocess.run
    calls: list[list[str]] = []

    def fake_run(cmd: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(cmd, list) and cmd[:1] == ["dvc"]:
            calls.append(cmd)
            assert kwargs["env"]["SEED_PARENT_RUN_ID"]
            write_reports(tmp_path / "reports", f"run-{len(calls)}")
            return subprocess.CompletedProcess(cmd, 0)
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", fake_run)

    def fake_dvc(cmd: list[str], root: Path, env: dict[str, str], **kwargs: Any) -> int:
        """``dvc repro`` as the run starts it: through ``seed_app.dvc_lock`` with the held lock's descriptor."""
        assert cmd[1:3] == ["-m", "seed_app.dvc_lock"] and kwargs["pass_fds"], cmd
        return subprocess.run(["dvc", *cmd[5:]], env=env).returncode  # the fake in force (a test may swap it)

    monkeypatch.setattr(dvc_run.interrupt, "run_dvc", fake_dvc)
    urls = {"mlflow": "http://127.0.0.1:5999", "prefect": "http://127.0.0.1:4299"}
    monkeypatch.setattr(servers, "ui_url", lambda name: urls[name])
    return tmp_path


def test_pipeline_run_publishes_the_table_to_prefect_and_mlflow(project: Path, mlflow_uri: str) -> None:
    import mlflow
    from prefect.artifacts import Artifact

    first = dvc_run.pipeline_run_flow()
    run = dvc_run.pipeline_run_flow()  # a second run: the keyed artifact's latest is the new table
    assert run.prefect_flow_run_id and run.prefect_flow_run_id != first.prefect_flow_run_id
    assert run.metrics == {"grpo/sokoban/test/success_rate": 0.25, "seed/sokoban/test/success_rate": 0.75}
    assert run.links == {
        "MLflow run": f"http://127.0.0.1:5999/#/experiments/{run.mlflow_experiment_id}/runs/{run.mlflow_run_id}"
                      "?workflowType=machine_learning",  # MLflow's Model training view, not GenAI's
        "Prefect flow run": f"http://127.0.0.1:4299/runs/flow-run/{run.prefect_flow_run_id}"}

    markdown = Artifact.get(RESULTS_KEY)
    assert str(markdown.flow_run_id) == run.prefect_flow_run_id
    assert markdown.data.startswith((project / "reports" / "table.md").read_text())
    assert "# table run-2" in markdown.data and run.links["MLflow run"] in markdown.data
    table = Artifact.get(RESULTS_TABLE_KEY)
    assert str(table.flow_run_id) == run.prefect_flow_run_id and table.type == "table"
    assert "0.75" in str(table.data) and '"seed"' in str(table.data)

    client = mlflow.MlflowClient(mlflow_uri)
    parent = client.get_run(run.mlflow_run_id)
    assert parent.data.tags["prefect.flow_run_id"] == run.prefect_flow_run_id
    assert parent.data.metrics["seed/sokoban/test/success_rate"] == 0.75
    assert {f.path for f in client.list_artifacts(run.mlflow_run_id, "curves")} == {
        "curves/curve_success.png", "curves/curve_losses.png"}
    logged = client.load_table(run.mlflow_experiment_id, "results/table.json", run_ids=[run.mlflow_run_id])
    assert logged.set_index("method")["success_rate"].to_dict() == {"grpo": 0.25, "seed": 0.75}


def test_table_rows_are_json_safe(tmp_path: Path) -> None:
    write_reports(tmp_path, "x")
    rows = table_rows(tmp_path)
    assert rows[1]["method"] == "seed" and rows[1]["success_rate"] == 0.75 and rows[1]["score"] is None


def test_ui_urls() -> None:
    assert mlflow_run_url("http://h:5000/", "3", "abc") == \
        "http://h:5000/#/experiments/3/runs/abc?workflowType=machine_learning"
    assert prefect_flow_run_url("http://h:4200/api", "f-1") == "http://h:4200/runs/flow-run/f-1"


def test_seed_run_prints_the_table_and_the_ui_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from seed_app import cli, cli_pipeline

    (tmp_path / "params.yaml").write_text((project_root() / "params.yaml").read_text())
    write_reports(tmp_path / "reports", "cli")
    monkeypatch.setattr(cli_pipeline, "project_root", lambda: tmp_path)
    seen: list[Any] = []

    def fake_run_in_flow(preset: Any, overrides: Any, name: Any) -> dvc_run.PipelineRun:
        seen.append((preset, overrides, name))
        return dvc_run.PipelineRun({}, links={"MLflow run": "http://127.0.0.1:5000/#/experiments/1/runs/r",
                                             "Prefect flow run": "http://127.0.0.1:4200/runs/flow-run/f"})

    monkeypatch.setattr(dvc_run, "run_in_flow", fake_run_in_flow)
    result = CliRunner().invoke(cli.app, ["run", "-S", "rl.opd_coef=0.02"])
    assert result.exit_code == 0, result.output
    assert seen == [(None, {"rl.opd_coef": 0.02}, None)]
    lines = result.output.splitlines()
    assert "# table cli" in lines
    assert lines[-2:] == ["MLflow run: http://127.0.0.1:5000/#/experiments/1/runs/r",
                          "Prefect flow run: http://127.0.0.1:4200/runs/flow-run/f"]
    bad = CliRunner().invoke(cli.app, ["run", "-S", "rl.opd_coeff=0.02"])  # stops before any server starts
    assert bad.exit_code == 2 and len(seen) == 1


def test_report_stage_publishes_its_table_and_logs_table_and_figures(tmp_path: Path, mlflow_uri: str) -> None:
    import mlflow
    from prefect.artifacts import Artifact

    from flows.report import report_flow

    methods = write_report_inputs(tmp_path, "report-stage-test")
    metrics = report_flow(tmp_path / "params.yaml")
    assert metrics["sft/sokoban/test/success_rate"] == 1 / 16
    star = methods.index("seed_star")  # the last method: the "*" row is its own, not averaged into SEED's
    assert star == len(methods) - 1 and metrics["seed_star/sokoban/test/success_rate"] == star / 16
    markdown = Artifact.get(RESULTS_KEY)
    assert markdown.data == (tmp_path / "reports" / "table.md").read_text()
    client = mlflow.MlflowClient(mlflow_uri)
    run = client.search_runs([client.get_experiment_by_name("report-stage-test").experiment_id])[0]
    assert {f.path for f in client.list_artifacts(run.info.run_id, "curves")} == {
        "curves/curve_success.png", "curves/curve_losses.png"}
    table = client.load_table(run.info.experiment_id, "results/table.json", run_ids=[run.info.run_id])
    overall = table[table["task_type"] == "all"].set_index("method")["success_rate"]
    assert overall.to_dict() == {m: i / 16 for i, m in enumerate(methods)}
    star_row = [line for line in markdown.data.splitlines() if line.startswith("| SEED* |")]
    assert len(star_row) == 1 and star_row[0].startswith(f"| SEED* | {100 * star / 16:.1f} |")
    assert star_row[0].endswith("| SFT | 16 | 1 |")  # from the Stage-1 checkpoint, 16 episodes, 1 seed


def test_stage_flow_runs_are_tagged_with_the_pipeline_run_and_linked_from_it(
        project: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake DVC runs a stage flow with the stage environment, as `python -m flows.<stage>` would."""
    import os

    import mlflow
    from prefect import flow
    from prefect.artifacts import Artifact
    from prefect.client.orchestration import get_client

    from flows.common import PIPELINE_FLOW_RUN_VAR, pipeline_tag, stage_run
    from flows.generate_alfworld import generate_alfworld_flow
    from flows.results import STAGE_RUNS_KEY
    from seed_core.loader import load_config

    seen: dict[str, str] = {}

    @flow(name="fake-stage")
    def fake_stage() -> None:
        from prefect.runtime import flow_run

        seen["flow_run"] = flow_run.id
        with stage_run(load_config(project / "params.yaml"), "fake-stage", "fake", []) as tracker:
            seen["mlflow_run"] = tracker.run_id

    real_run = subprocess.run

    def dvc_running_a_stage(cmd: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(cmd, list) and cmd[:1] == ["dvc"]:
            monkeypatch.setenv(PIPELINE_FLOW_RUN_VAR, kwargs["env"][PIPELINE_FLOW_RUN_VAR])
            monkeypatch.setenv("SEED_PARENT_RUN_ID", kwargs["env"]["SEED_PARENT_RUN_ID"])
            fake_stage()
            state = generate_alfworld_flow(project / "params.yaml", return_state=True)  # no games: returns early
            seen["empty_stage"] = str(state.state_details.flow_run_id)
            write_reports(project / "reports", "staged")
            return subprocess.CompletedProcess(cmd, 0)
        return real_run(cmd, *args, **kwargs)

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["env"]["alfworld"]["generated_dir"] = str(project / "games")
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.setattr(subprocess, "run", dvc_running_a_stage)
    run = dvc_run.pipeline_run_flow()
    tag = pipeline_tag(run.prefect_flow_run_id)
    with get_client(sync_client=True) as client:
        assert tag in client.read_flow_run(seen["flow_run"]).tags
        assert tag in client.read_flow_run(seen["empty_stage"]).tags  # a stage without an MLflow run too
        assert tag in client.read_flow_run(run.prefect_flow_run_id).tags
    links = Artifact.get(STAGE_RUNS_KEY)
    assert str(links.flow_run_id) == run.prefect_flow_run_id
    assert f"(/runs/flow-run/{seen['flow_run']})" in links.data
    stage = mlflow.MlflowClient(mlflow_uri).get_run(seen["mlflow_run"])
    assert stage.data.tags["prefect.pipeline_flow_run_id"] == run.prefect_flow_run_id
    assert stage.data.tags["mlflow.parentRunId"] == run.mlflow_run_id
    assert os.environ[PIPELINE_FLOW_RUN_VAR] == run.prefect_flow_run_id


def test_a_pipeline_run_publishes_one_results_artifact(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the report stage's flow run and the pipeline's both published ``seed-results``. The fake
    DVC runs the real report stage in the stage environment, as `python -m flows.report` would."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey, FlowRunFilter, FlowRunFilterTags

    from flows.common import PIPELINE_FLOW_RUN_VAR, pipeline_tag
    from flows.report import report_flow

    write_report_inputs(project, "one-artifact-test")
    real_run = subprocess.run
    seen: dict[str, str] = {}

    def dvc_running_the_report(cmd: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(cmd, list) and cmd[:1] == ["dvc"]:
            monkeypatch.setenv(PIPELINE_FLOW_RUN_VAR, kwargs["env"][PIPELINE_FLOW_RUN_VAR])
            monkeypatch.setenv("SEED_PARENT_RUN_ID", kwargs["env"]["SEED_PARENT_RUN_ID"])
            seen["report"] = report_flow(project / "params.yaml", return_state=True).state_details.flow_run_id
            return subprocess.CompletedProcess(cmd, 0)
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", dvc_running_the_report)
    run = dvc_run.pipeline_run_flow()
    assert seen["report"]
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            tags=FlowRunFilterTags(all_=[pipeline_tag(run.prefect_flow_run_id)])))
        assert {str(r.id) for r in runs} == {run.prefect_flow_run_id, str(seen["report"])}
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[RESULTS_KEY])),
                                          flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(
                                              all_=[pipeline_tag(run.prefect_flow_run_id)])))
    assert [str(a.flow_run_id) for a in artifacts] == [run.prefect_flow_run_id]  # one, with the UI links
    assert run.links["MLflow run"] in artifacts[0].data


def test_an_rl_stage_publishes_its_analyzer_audit(tmp_path: Path) -> None:
    """The audit table of an analyzing row, keyed by its algorithm, on the flow run that made it; none for GRPO."""
    from prefect import flow
    from prefect.artifacts import Artifact

    from flows.results import audit_key, publish_audit

    curve = tmp_path / "curve.csv"
    curve.write_text("round,analysis/parse_ok_rate,analysis/fail_truncated,rollout/success_rate\n0,1.0,0.0,0.5\n"
                     "1,0.25,0.75,0.6\n")
    plain = tmp_path / "grpo.csv"
    plain.write_text("round,rollout/success_rate\n0,0.5\n")

    @flow
    def stage() -> tuple[bool, bool]:
        return publish_audit(curve, "seed_gated"), publish_audit(plain, "grpo")

    assert stage() == (True, False)
    table = Artifact.get(audit_key("seed_gated"))
    assert table is not None and table.type == "table" and audit_key("seed_gated") == "analyzer-audit-seed-gated"
    assert "0.75" in str(table.data) and "analysis/fail_truncated" in str(table.data)
    assert "rollout/success_rate" not in str(table.data)
    assert Artifact.get(audit_key("grpo")) is None
