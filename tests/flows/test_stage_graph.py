"""The pipeline run shows its stages (issue 41): under ``seed run`` each DVC stage that runs is a subflow run of the
pipeline flow run (linked through a task run of it, ``parent_task_run_id``), each stage DVC skips a ``Cached`` task
run named after it, and the server's graph of the pipeline run (what the UI draws) holds them in DVC's order.

The first tests run a stage flow in this process with the stage environment (seconds); the last ones read the
session's real tiny ``seed run`` and its report-only rerun (``repro_run``, ``rerun`` in conftest.py), whose stages
ran as their own processes forked by the warm stage server.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prefect import flow

from flows.common import PIPELINE_FLOW_RUN_VAR, pipeline_tag
from flows.stage_graph import CACHED, CachedStages, mark_cached, run_stage


@flow(name="graph-test-stage")
def tiny_stage(x: int = 1) -> int:
    return x + 1


@flow(name="graph-test-failing-stage")
def failing_stage() -> None:
    raise ValueError("stage failed")


def graph(flow_run_id: str) -> list[dict[str, Any]]:
    """The nodes of the server's graph of a flow run (``/flow_runs/{id}/graph-v2``, what the UI draws), by start."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        response = client._client.get(f"/flow_runs/{flow_run_id}/graph-v2")
    response.raise_for_status()
    return sorted((node for _, node in response.json()["nodes"]), key=lambda n: n["start_time"])


def children(flow_run_id: str) -> list[tuple[Any, Any]]:
    """(task run, its subflow run or None) for each task run of a flow run, oldest first."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (FlowRunFilter, FlowRunFilterId, FlowRunFilterParentTaskRunId,
                                                TaskRunFilter)
    from prefect.client.schemas.sorting import TaskRunSort

    with get_client(sync_client=True) as client:
        tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                                      task_run_filter=TaskRunFilter(), sort=TaskRunSort.EXPECTED_START_TIME_ASC)
        subflows = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_task_run_id=FlowRunFilterParentTaskRunId(any_=[t.id for t in tasks]))) if tasks else []
    by_parent = {r.parent_task_run_id: r for r in subflows}
    return [(t, by_parent.get(t.id)) for t in tasks]


@pytest.fixture
def pipeline_run(monkeypatch: pytest.MonkeyPatch) -> str:
    """A flow run standing for ``seed run``'s pipeline run, in the stage environment of one DVC stage."""
    from prefect.client.orchestration import get_client
    from prefect.states import Running

    with get_client(sync_client=True) as client:
        parent = client.create_flow_run(tiny_stage, name="graph-test-pipeline", state=Running())
    monkeypatch.setenv(PIPELINE_FLOW_RUN_VAR, str(parent.id))
    monkeypatch.setenv("DVC_STAGE", "evaluate@sft")
    return str(parent.id)


def test_a_stage_under_seed_run_is_a_linked_subflow_run_of_the_pipeline_run(pipeline_run: str) -> None:
    assert run_stage(tiny_stage, x=2) == 3
    [(task, child)] = children(pipeline_run)
    assert task.name == "evaluate@sft" and task.state.is_completed()  # the stand-in took the stage's state
    assert child is not None and child.name == "evaluate@sft" and child.state.is_completed()
    assert pipeline_tag(pipeline_run) in child.tags and child.parameters == {"x": 2}
    [node] = graph(pipeline_run)
    assert (node["kind"], node["id"], node["state_type"]) == ("flow-run", str(child.id), "COMPLETED")
    assert node["label"] == "graph-test-stage / evaluate@sft" and node["end_time"] > node["start_time"]


def test_a_failed_stage_shows_failed_in_the_pipeline_run(pipeline_run: str) -> None:
    with pytest.raises(ValueError, match="stage failed"):
        run_stage(failing_stage)
    [(task, child)] = children(pipeline_run)
    assert child.state.is_failed() and task.state.is_failed()
    assert [n["state_type"] for n in graph(pipeline_run)] == ["FAILED"]


def test_a_stage_outside_seed_run_runs_its_flow_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.client.orchestration import get_client

    monkeypatch.delenv(PIPELINE_FLOW_RUN_VAR, raising=False)
    monkeypatch.setenv("DVC_STAGE", "collect")  # a plain `dvc repro`
    state = run_stage(tiny_stage, x=5, return_state=True)
    assert state.result() == 6
    with get_client(sync_client=True) as client:
        assert client.read_flow_run(state.state_details.flow_run_id).parent_task_run_id is None


def test_stages_dvc_skips_are_cached_task_runs_in_dvc_order(pipeline_run: str) -> None:
    cached = CachedStages(pipeline_run)
    for chunk in (b"Stage 'prepare_model' didn't change, skipping\nStage 'col", b"lect' didn't change, skipping\n",
                  b"Running stage 'report':\n> python -m flows.report\n",
                  b"Stage 'rl@seed' is cached - skipping run, checking out outputs"):  # the run cache; no newline
        cached.seen(chunk)
    assert cached.close() == ["prepare_model", "collect", "rl@seed"]
    runs = children(pipeline_run)
    assert [(t.name, t.state.name, t.state.type.value, c) for t, c in runs] == [
        (stage, CACHED, "COMPLETED", None) for stage in ("prepare_model", "collect", "rl@seed")]
    assert [(n["kind"], n["label"], n["state_type"]) for n in graph(pipeline_run)] == [
        ("task-run", stage, "COMPLETED") for stage in ("prepare_model", "collect", "rl@seed")]


def test_a_marker_that_fails_is_a_warning_not_a_failed_run(caplog: pytest.LogCaptureFixture) -> None:
    def unreachable(flow_run_id: str, stage: str, client: Any) -> None:
        raise ConnectionError("server gone")

    cached = CachedStages("00000000-0000-0000-0000-000000000000", mark=unreachable)
    cached.seen(b"Stage 'sft' didn't change, skipping\n")
    assert cached.close() == []
    assert "could not mark stage sft as cached in Prefect: server gone" in caplog.text
    assert mark_cached  # the default marker is Prefect's (checked above against the test server)


def stage_names(root: Path) -> list[str]:
    """The stages of the tiny project with a flow (every stage in dvc.lock but ``code``, a plain script)."""
    return [s for s in yaml.safe_load((root / "dvc.lock").read_text())["stages"] if s != "code"]


def pipeline_flow_runs(mlflow_uri: str) -> list[str]:
    """The Prefect flow runs of the session's ``seed run``s (their MLflow parent runs' tags), oldest first."""
    import mlflow

    client = mlflow.MlflowClient(mlflow_uri)
    exp = client.get_experiment_by_name("dvc-repro-test")
    runs = sorted(client.search_runs([exp.experiment_id], "tags.stage = 'pipeline'"), key=lambda r: r.info.start_time)
    return [r.data.tags["prefect.flow_run_id"] for r in runs]


def test_a_real_seed_run_shows_each_stage_as_a_subflow_run_in_order(
        repro_project: tuple[Path, dict[str, str]], repro_run: subprocess.CompletedProcess[str],
        mlflow_uri: str) -> None:
    root, _ = repro_project
    first = pipeline_flow_runs(mlflow_uri)[0]
    ran = [line.split("'")[1] for line in repro_run.stdout.splitlines() if line.startswith("Running stage")]
    runs = children(first)
    assert [t.name for t, _ in runs] == [s for s in ran if s != "code"]  # DVC's order, every stage with a flow
    assert sorted(t.name for t, _ in runs) == sorted(stage_names(root))
    for task, child in runs:
        assert child is not None and child.state.is_completed(), task.name  # named by its flow: rl-grpo, ...
        assert task.state.is_completed() and pipeline_tag(first) in child.tags
    nodes = graph(first)
    assert [(n["kind"], n["id"]) for n in nodes] == [("flow-run", str(c.id)) for _, c in runs]
    assert all(n["state_type"] == "COMPLETED" and n["end_time"] > n["start_time"] for n in nodes)


def test_a_rerun_shows_the_stages_dvc_skipped_as_cached(
        repro_project: tuple[Path, dict[str, str]], rerun: subprocess.CompletedProcess[str], mlflow_uri: str) -> None:
    root, _ = repro_project
    latest = pipeline_flow_runs(mlflow_uri)[1]
    skipped = [line.split("'")[1] for line in rerun.stdout.splitlines() if "didn't change, skipping" in line]
    runs = children(latest)
    # DVC skipped every stage but the report, which ran last; a marker is made as the pipeline process reads DVC's
    # line, so the last ones may trail the report's start (CachedStages): the order is DVC's among the markers
    cached = [t.name for t, c in runs if c is None]
    assert cached == skipped and sorted(t.name for t, _ in runs) == sorted(stage_names(root))
    assert all(t.state.name == CACHED and t.state.is_completed() for t, c in runs if c is None)
    [(report_task, report_run)] = [(t, c) for t, c in runs if c is not None]
    assert report_task.name == "report" and report_run.state.is_completed() and report_task.state.is_completed()
    nodes = graph(latest)
    assert sorted(n["label"] for n in nodes if n["kind"] == "task-run") == sorted(skipped)
    assert [n["id"] for n in nodes if n["kind"] == "flow-run"] == [str(report_run.id)]
