"""The results where users look, seen in a real browser (issue 16): Debian's ``chromium`` driven by
Playwright over the Prefect and MLflow servers that ``seed ui`` starts (``seed_app.services``), on 127.0.0.1
and free ports, after the session's tiny real ``seed run`` (``repro_run`` in conftest.py).

Prefect: every stage's flow run is listed, with its logs, and the latest ``seed-results`` artifact shows
the same table as ``reports/table.md``. MLflow: the pipeline run with its stage children, the table and
the curves on it, and the compare view of two runs. Screenshots go to ``test-artifacts/ui/`` (git-ignored).

Lives in tests/flows/ to share that run and the session's Prefect database and MLflow store. Needs a
``chromium`` binary (``scripts/setup.sh`` installs Debian's; ``$SEED_CHROMIUM`` names another) and is
skipped, with that reason, only without one; nothing is downloaded at run time.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "ui"
CHROMIUM = os.environ.get("SEED_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
TIMEOUT_MS = 60_000
"""Per browser wait: the servers share two loaded cores with the rest of the suite."""

pytestmark = [pytest.mark.ui, pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary: apt-get install chromium (scripts/setup.sh) or set SEED_CHROMIUM")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def ui(repro_run: subprocess.CompletedProcess[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """``seed ui``'s two servers over the session's stores: Prefect on the test server's database, MLflow on
    the session's sqlite store. Yields name -> base URL; stops both (by PID) afterwards."""
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL

    from flows import servers as flows_servers
    from seed_app import services

    ui_dir = tmp_path_factory.mktemp("ui")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flows_servers, "ui_dir", lambda: ui_dir)
        patch.setenv("PREFECT_SERVER_DATABASE_CONNECTION_URL", PREFECT_SERVER_DATABASE_CONNECTION_URL.value())
        patch.delenv("PREFECT_API_URL", raising=False)
        servers = services.server_commands(free_port(), free_port())
        start = time.perf_counter()
        services.start_all(servers)
        print(f"\nui: servers healthy after {time.perf_counter() - start:.1f} s")
        try:
            yield {name: url for name, (_, _, url) in servers.items()}
        finally:
            for name in servers:
                flows_servers.stop(name)


@pytest.fixture(scope="module")
def browser(ui: dict[str, str]) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    print(f"\nui: screenshots in {SHOTS}")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def table_md_rows(text: str) -> list[list[str]]:
    """The cells of every row of the markdown tables in ``text``, headers included (separators left out)."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|")]
    return [r for r in rows if not all(set(c) <= set("-: ") for c in r)]


def pipeline_runs(mlflow_uri: str) -> list[Any]:
    """The MLflow parent runs of the session's ``seed run``s, oldest first."""
    import mlflow

    client = mlflow.MlflowClient(mlflow_uri)
    exp = client.get_experiment_by_name("dvc-repro-test")
    return sorted(client.search_runs([exp.experiment_id], "tags.stage = 'pipeline'"), key=lambda r: r.info.start_time)


def test_prefect_ui_shows_every_stage_run_with_its_logs_and_the_latest_results_table(
        ui: dict[str, str], page: Any, repro_project: tuple[Path, dict[str, str]], rerun: Any, mlflow_uri: str) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterId, FlowRunFilter, FlowRunFilterTags

    from flows.common import pipeline_tag

    root, _ = repro_project
    first, latest = (r.data.tags["prefect.flow_run_id"] for r in pipeline_runs(mlflow_uri)[:2])
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[pipeline_tag(first)])))
        flows = {str(f.id): f.name for f in client.read_flows()}
    stage_runs = [r for r in runs if str(r.id) != first]
    stages = yaml.safe_load((root / "dvc.lock").read_text())["stages"]  # rl@seed runs flow `rl`, ...
    stages.pop("code")  # the code fingerprints: a plain script, no flow run
    assert sorted(flows[str(r.flow_id)] for r in stage_runs) == sorted(s.split("@")[0] for s in stages)

    base = ui["prefect"]
    page.goto(f"{base}/runs")  # every flow run of the session's test server, newest first
    page.get_by_text("Hide subflows").first.wait_for()
    shot(page, "prefect-flow-runs")
    # the rerun's pipeline flow run page carries its pipeline tag (not looked up in the list: the list pages 100 runs,
    # and in a random order the suite's later flow tests add enough to push the rerun off the first page)
    page.goto(f"{base}/runs/flow-run/{latest}")
    page.get_by_text(pipeline_tag(latest)).first.wait_for()
    for run in stage_runs:  # each stage's flow run page opens on its logs
        page.goto(f"{base}/runs/flow-run/{run.id}")
        page.get_by_text(f"Beginning subflow run '{run.name}' for flow '{flows[str(run.flow_id)]}'").wait_for()
        if flows[str(run.flow_id)] == "report":
            page.get_by_text("| Method |").first.wait_for()  # the report stage logs the table
            shot(page, "prefect-report-stage-logs")

    page.goto(f"{base}/artifacts/key/seed-results")  # the key's history, newest first
    newest = page.locator("a[href*='/artifacts/artifact/']").first
    newest.wait_for()
    shot(page, "prefect-seed-results-history")
    newest.click()
    page.locator("table").first.wait_for()
    shown = page.locator("table tr").evaluate_all(
        "rows => rows.map(r => Array.from(r.querySelectorAll('th, td')).map(c => c.innerText.trim()))")
    shot(page, "prefect-seed-results-latest")
    assert shown == table_md_rows((root / "reports" / "table.md").read_text())
    with get_client(sync_client=True) as client:  # the page opened is the rerun's artifact
        shown_artifact = client.read_artifacts(artifact_filter=ArtifactFilter(
            id=ArtifactFilterId(any_=[page.url.rsplit("/", 1)[-1]])))
    assert [str(a.flow_run_id) for a in shown_artifact] == [latest]


def test_prefect_ui_shows_the_pipeline_runs_stages_in_its_graph(
        ui: dict[str, str], page: Any, repro_project: tuple[Path, dict[str, str]], rerun: Any, mlflow_uri: str) -> None:
    """Issue 41: the pipeline run's page draws its stages (the graph is a canvas: its nodes are checked through the
    server's graph in test_stage_graph, here that the page has a graph and lists the stages as its subflow runs),
    and the rerun's page lists the stages DVC skipped as Cached task runs."""
    root, _ = repro_project
    first, latest = (r.data.tags["prefect.flow_run_id"] for r in pipeline_runs(mlflow_uri)[:2])
    stages = [s for s in yaml.safe_load((root / "dvc.lock").read_text())["stages"] if s != "code"]
    empty = "did not generate any task or subflow runs"
    base = ui["prefect"]

    page.goto(f"{base}/runs/flow-run/{first}")
    page.locator("canvas").first.wait_for()
    page.wait_for_timeout(2000)  # the graph draws its nodes after the page has loaded
    shot(page, "prefect-pipeline-graph")
    assert page.get_by_text(empty).count() == 0
    page.get_by_text("Subflow Runs", exact=True).click()  # the tab (not the header's "N Subflow runs")
    try:
        page.get_by_text(f"{len(stages)} Flow runs").wait_for()  # one per stage with a flow
        page.get_by_text("report").first.wait_for()  # newest first: the last stage
    finally:
        shot(page, "prefect-pipeline-subflow-runs")

    page.goto(f"{base}/runs/flow-run/{latest}")
    page.locator("canvas").first.wait_for()
    page.wait_for_timeout(2000)
    shot(page, "prefect-rerun-graph")
    assert page.get_by_text(empty).count() == 0
    page.get_by_text("Task Runs", exact=True).click()
    try:
        page.get_by_text("Cached").first.wait_for()
        page.get_by_text(stages[0]).first.wait_for()
    finally:
        shot(page, "prefect-rerun-task-runs")


def test_mlflow_ui_shows_the_pipeline_run_its_stages_results_and_a_comparison(
        ui: dict[str, str], page: Any, repro_project: tuple[Path, dict[str, str]], rerun: Any,
        mlflow_uri: str) -> None:
    import mlflow

    first, second = pipeline_runs(mlflow_uri)[:2]
    exp_id, run_id = first.info.experiment_id, first.info.run_id
    children = mlflow.MlflowClient(mlflow_uri).search_runs([exp_id], f"tags.mlflow.parentRunId = '{run_id}'")
    stages = yaml.safe_load((repro_project[0] / "dvc.lock").read_text())["stages"]
    # one MLflow child run per DVC stage, but generate_alfworld: with env sokoban it has nothing to do and opens none
    assert len(children) == len(set(stages) - {"generate_alfworld", "code"})  # neither logs an MLflow run
    base = ui["mlflow"]

    page.goto(f"{base}/#/experiments/{exp_id}/runs")
    row = page.locator("[role=row]", has_text="pipeline").last  # the oldest pipeline run is listed last
    row.wait_for()
    row.locator("button").first.click()  # expand: its stage runs are nested under it
    for child in children:
        page.get_by_role("link", name=child.info.run_name, exact=True).first.wait_for()
    shot(page, "mlflow-pipeline-run-and-stage-runs")

    page.goto(f"{base}/#/experiments/{exp_id}/runs/{run_id}/artifacts/results/table.json")
    page.get_by_text("View as table").first.wait_for()
    for method in ("vanilla", "sft", "grpo", "seed", "seed_static"):
        page.get_by_text(method, exact=True).first.wait_for()
    shot(page, "mlflow-pipeline-table")
    page.get_by_text("curves", exact=True).first.click()  # in the run's artifact tree
    page.get_by_text("curve_success.png", exact=True).first.click()
    image = page.locator("img[src^='blob:']").first  # the PNG fetched from the run's artifacts
    image.wait_for()
    assert image.evaluate("img => img.complete && img.naturalWidth") > 100
    shot(page, "mlflow-pipeline-curve")

    ids = [first.info.run_id, second.info.run_id]
    query = urllib.parse.urlencode({"runs": json.dumps(ids), "experiments": json.dumps([exp_id])})
    page.goto(f"{base}/#/compare-runs?{query}")
    page.get_by_text("Run details").first.wait_for()
    for shown in ids:
        page.get_by_text(shown).first.wait_for()
    page.get_by_text("seed/eval/success_rate").first.wait_for()  # a headline metric of both
    shot(page, "mlflow-compare-two-pipeline-runs")


def test_mlflow_opens_where_a_training_user_looks(ui: dict[str, str], page: Any,
                                                  repro_project: tuple[Path, dict[str, str]], mlflow_uri: str) -> None:
    """The links seed prints (``flows.results.mlflow_run_url``: Model training, ``TRAINING_VIEW``) open the pipeline
    run as a training run (its metrics and parameters), and the experiment reached from it on its runs, with the
    pipeline run listed: not on MLflow 3.17's GenAI overview of traces (issue 41)."""
    from flows.results import TRAINING_VIEW, mlflow_run_url

    first = pipeline_runs(mlflow_uri)[0]
    exp_id, base = first.info.experiment_id, ui["mlflow"]
    page.goto(mlflow_run_url(base, exp_id, first.info.run_id))
    page.get_by_text("seed/eval/success_rate").first.wait_for()  # a headline metric on the run's overview
    shot(page, "mlflow-run-from-seed-link")
    page.goto(f"{base}/#/experiments/{exp_id}/runs?{TRAINING_VIEW}")
    page.locator("[role=row]", has_text="pipeline").last.wait_for()  # the training runs' table
    shot(page, "mlflow-experiment-runs")
