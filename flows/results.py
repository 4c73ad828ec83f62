"""Results where users look: the report's table and curves as keyed Prefect artifacts and on the MLflow
pipeline run, and the UI links that ``seed run`` prints at the end.

The Prefect artifacts have fixed keys (``RESULTS_KEY``, ``RESULTS_TABLE_KEY``), so the Artifacts page
and each key's history show the latest table one click away. The MLflow pipeline run gets the table
(``log_table``), the curve images and the headline metrics (the table's per-method success rates),
because DVC-cached stages log no MLflow run of their own (stack-notes pitfall 19).
"""

from __future__ import annotations

import math
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd

from flows import servers
from seed_core.config import endpoint_env
from seed_core.stages.report import TABLE_ARTIFACT, headline_metrics
from seed_core.tracking import Tracker

RESULTS_KEY = "seed-results"
"""Prefect markdown artifact: ``reports/table.md`` (plus links to the MLflow run)."""
RESULTS_TABLE_KEY = "seed-results-table"
"""Prefect table artifact: the rows of ``reports/table.csv``."""
STAGE_RUNS_KEY = "seed-stage-runs"
"""Prefect markdown artifact of a pipeline flow run: its stages' flow runs, linked."""


def table_rows(reports: Path) -> list[dict[str, Any]]:
    """``table.csv`` as JSON-safe rows (an empty score is ``None``, not NaN)."""
    frame = pd.read_csv(Path(reports) / "table.csv")
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            for row in frame.to_dict(orient="records")]


def publish_prefect(reports: Path, links: dict[str, str] | None = None) -> None:
    """The table as keyed Prefect markdown and table artifacts of the current flow run (call inside a flow)."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    reports = Path(reports)
    markdown = (reports / "table.md").read_text()
    if links:
        markdown += "\n" + "\n".join(f"- {name}: [{url}]({url})" for name, url in links.items()) + "\n"
    create_markdown_artifact(markdown=markdown, key=RESULTS_KEY,
                             description="Success table of the latest pipeline run (reports/table.md)")
    create_table_artifact(table=table_rows(reports), key=RESULTS_TABLE_KEY,
                          description="Long results table of the latest pipeline run (reports/table.csv)")


def stage_flow_runs(tag: str) -> list[Any]:
    """Flow runs carrying the pipeline's ``tag``, oldest first (the pipeline run itself included)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        return client.read_flow_runs(flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[tag])),
                                     sort=FlowRunSort.START_TIME_ASC)


def publish_stage_runs(tag: str) -> str:
    """On the current (pipeline) flow run: a markdown artifact linking each stage flow run with ``tag``
    (links relative to the UI, so they work on whichever server shows the project's database).
    DVC-cached stages run no flow and are not listed."""
    from prefect.artifacts import create_markdown_artifact
    from prefect.runtime import flow_run

    runs = [r for r in stage_flow_runs(tag) if str(r.id) != flow_run.id]
    lines = [f"# Stage flow runs of this pipeline run (tag `{tag}`)", ""]
    lines += [f"- [{r.name}](/runs/flow-run/{r.id}): {r.state_name or '-'}" for r in runs]
    if not runs:
        lines.append("- none: every stage was up to date (DVC reused its outputs)")
    markdown = "\n".join(lines) + "\n"
    create_markdown_artifact(markdown=markdown, key=STAGE_RUNS_KEY,
                             description=f"Stage flow runs of pipeline run {flow_run.id}")
    return markdown


def log_results(tracker: Tracker, reports: Path) -> dict[str, float]:
    """On the pipeline's MLflow run: the table (``log_table``), the curve PNGs under ``curves/`` and the
    headline metrics; returns those metrics ({} when the report has not been written)."""
    reports = Path(reports)
    if not (reports / "table.csv").is_file():
        return {}
    table = pd.read_csv(reports / "table.csv")
    tracker.log_table(table, TABLE_ARTIFACT)
    for png in sorted(reports.glob("curve_*.png")):
        tracker.log_artifact(png, "curves")  # type: ignore[call-arg]
    metrics = headline_metrics(table)
    tracker.log_metrics(metrics)
    return metrics


def mlflow_ui() -> str | None:
    """Base URL of a live MLflow UI for this project's store: an http tracking URI (not a pipeline run's
    temporary server, gone when the run ends), else ``seed ui``'s server."""
    uri = endpoint_env("MLFLOW_TRACKING_URI") or ""
    if uri.startswith(("http://", "https://")) and uri not in servers.temporary_urls():
        return uri.rstrip("/") if servers.healthy(f"{uri.rstrip('/')}/health") else None
    return servers.ui_url("mlflow")


def mlflow_run_url(base: str, experiment_id: str, run_id: str) -> str:
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


def prefect_flow_run_url(api_url: str, flow_run_id: str) -> str:
    """The UI page of a flow run on the server behind ``api_url`` (``http://host:port/api``)."""
    return f"{api_url.rstrip('/').removesuffix('/api')}/runs/flow-run/{flow_run_id}"


def reference_verdict(root: Path, table: str = "reports/table.md") -> str:
    """Whether ``table`` equals the committed reference (the version in git ``HEAD``), as one line for
    ``seed run``'s end; the next step to take when it differs or when nothing is committed."""
    def git(*args: str) -> int:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, check=False).returncode

    if git("cat-file", "-e", f"HEAD:{table}") != 0:
        return (f"seed: no committed reference {table} to compare with (commit it with dvc.lock to make this "
                f"run the reference)")
    if git("diff", "--quiet", "HEAD", "--", table) == 0:
        return f"seed: {table} matches the committed reference"
    return (f"seed: {table} differs from the committed reference: `git diff {table}`, `dvc metrics diff` and "
            f"`dvc plots diff` show how")
