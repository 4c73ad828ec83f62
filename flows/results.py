"""Results where users look: the report's table and curves as keyed Prefect artifacts and on the MLflow
pipeline run, and the UI links that ``seed run`` prints at the end.

The Prefect artifacts have fixed keys (``RESULTS_KEY``, ``RESULTS_TABLE_KEY``), so the Artifacts page
and each key's history show the latest table one click away. The MLflow pipeline run gets the table
(``log_table``), the curve images and the headline metrics (the table's per-method success rates),
because DVC-cached stages log no MLflow run of their own (stack-notes pitfall 19).
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
from prefect.client.schemas.sorting import FlowRunSort
from prefect.runtime import flow_run

from flows import servers
from flows.common import lock_out_md5s
from seed_core.config import endpoint_env
from seed_core.repro import numerics
from seed_core.repro.reference import judge, verdict_lines
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
    with get_client(sync_client=True) as client:
        return client.read_flow_runs(flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=[tag])),
                                     sort=FlowRunSort.START_TIME_ASC)


def publish_stage_runs(tag: str) -> str:
    """On the current (pipeline) flow run: a markdown artifact linking each stage flow run with ``tag``
    (links relative to the UI, so they work on whichever server shows the project's database).
    DVC-cached stages run no flow and are not listed."""
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


TRAINING_VIEW = "workflowType=machine_learning"
"""MLflow 3.17's UI shows every experiment as its sidebar switch says, whatever the experiment's type tag: GenAI (the
default) opens an experiment on the GenAI overview and a run as an evaluation, Model training on the runs. A link
with this query opens in Model training, and the experiment pages reached from it keep it."""


def mlflow_run_url(base: str, experiment_id: str, run_id: str) -> str:
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?{TRAINING_VIEW}"


def prefect_flow_run_url(api_url: str, flow_run_id: str) -> str:
    """The UI page of a flow run on the server behind ``api_url`` (``http://host:port/api``)."""
    return f"{api_url.rstrip('/').removesuffix('/api')}/runs/flow-run/{flow_run_id}"


REFERENCE_SWEEP = "benchmarks/results/learning.json"
"""The committed multi-seed reference (a ``seed sweep``'s learning.json) that ``seed run``'s verdict reads."""
REFERENCE_NUMERICS = "data/collect/resolved_config.json"
"""A committed stage record whose ``numerics`` section says what the committed reference run ran under."""


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)


def reference_verdict(root: Path, table: str = "reports/table.md") -> str:
    """``seed run``'s last word on its table, two verdicts (lines):

    1. statistical (``seed_core.repro.reference``): per method of ``reports/table.csv``, inside or outside the 95% range
       of one run under the committed multi-seed reference ``REFERENCE_SWEEP``, and by how much; a method the
       reference lacks is said so. This is the verdict to act on: another CPU is another draw.
    2. bit-identity (``identity_line``): ``table`` equal to its version in git ``HEAD``, with whether that was to
       be expected (the same CPU model and pinned numerics as the committed run, ``seed_core.repro.numerics``)."""
    return "\n".join([*statistical_lines(root, Path(table).parent / "table.csv"), *base_model_lines(root),
                      identity_line(root, table)])


BASE_MODEL = "data/models/base"
"""The testbed's (or preset's) base model: every row starts from it, and the reference's seeds share one."""


def _base_md5(lock_text: str) -> str | None:
    """``BASE_MODEL``'s md5 among the outs of a ``dvc.lock`` text (None when it has none or does not parse)."""
    try:
        return lock_out_md5s(lock_text).get(BASE_MODEL)
    except (yaml.YAMLError, AttributeError, KeyError, TypeError):
        return None


def base_model_lines(root: Path) -> list[str]:
    """A caveat when this run's base model is not the committed run's (``dvc.lock`` against ``HEAD:dvc.lock``): the
    reference's seeds vary the RL seed on one base model, so its ranges leave out another base model's variation.
    Measured once (benchmarks/results/numerics_run_cost.json): the default under ``SEED_NUMERICS=native`` on the
    reference's CPU built another base model, and its GRPO came out at 13.3, below the range [22.4, 44.5]."""
    lock = root / "dvc.lock"
    ours = _base_md5(lock.read_text()) if lock.is_file() else None
    committed = _git(root, "show", "HEAD:dvc.lock")
    theirs = _base_md5(committed.stdout) if committed.returncode == 0 else None
    if ours is None or theirs is None or ours == theirs:
        return []
    return [f"seed: this run's base model ({BASE_MODEL}, md5 {ours[:8]}) is not the reference's ({theirs[:8]}): "
            f"the reference's seeds vary the RL seed on one base model, so a row outside its range may come from the "
            f"base model alone (a measured case: benchmarks/results/numerics_run_cost.json)"]


def statistical_lines(root: Path, table_csv: Path) -> list[str]:
    """The statistical verdict of ``table_csv`` (each method's overall row of its first split) against
    ``REFERENCE_SWEEP`` in ``root``; one line when either file is missing."""
    ref_path, csv = root / REFERENCE_SWEEP, root / table_csv
    if not ref_path.is_file():
        return [f"seed: no committed multi-seed reference {REFERENCE_SWEEP} (a `seed sweep`'s "
                f"reports/sweep/learning.json, copied there and committed) to judge the table by"]
    if not csv.is_file():
        return [f"seed: no {table_csv} to judge against the reference"]
    reference = json.loads(ref_path.read_text())
    rows = [r for r in table_rows(csv.parent) if r.get("task_type") == "all"]
    first_split = rows[0]["split"] if rows else None
    rows = [r for r in rows if r["split"] == first_split and r.get("success_rate") is not None]
    return verdict_lines(judge(rows, reference), REFERENCE_SWEEP, str(reference.get("setting", {}).get("preset", "")))


def identity_line(root: Path, table: str) -> str:
    """Whether ``table`` is bit-identical to the committed one, and whether identity was to be expected: the
    committed run's numerics (``REFERENCE_NUMERICS`` at ``HEAD``) against what this machine's stages run under."""
    if _git(root, "cat-file", "-e", f"HEAD:{table}").returncode != 0:
        return (f"seed: bit-identity: no committed reference {table} to compare with (commit it with dvc.lock to "
                f"make this run the reference)")
    same = _git(root, "diff", "--quiet", "HEAD", "--", table).returncode == 0
    committed = _git(root, "show", f"HEAD:{REFERENCE_NUMERICS}")
    try:
        theirs = json.loads(committed.stdout).get(numerics.RECORD_KEY) if committed.returncode == 0 else None
    except ValueError:
        theirs = None
    ours = {"settings": numerics.effective(), **numerics.cpu()}
    alike = theirs is not None and theirs.get("settings") == ours["settings"] and \
        theirs.get("cpu_model") == ours["cpu_model"]
    if theirs is None:
        why = ("the committed run records no numerics: it predates their pinning, so identity is expected only on "
               "its machine")
    elif alike:
        why = f"same CPU model ({ours['cpu_model']}) and pinned numerics as the committed run"
    else:
        why = (f"the committed run ran on {theirs.get('cpu_model') or '?'} under {_settings(theirs.get('settings'))}, "
               f"this machine is {ours['cpu_model'] or '?'} under {_settings(ours['settings'])}; `seed doctor` says "
               f"whether their numerics agree")
    if same:
        return f"seed: bit-identity: {table} is identical to the committed one ({why})"
    hint = ("so the code, params or data differ: `dvc params diff`, `dvc metrics diff`" if alike
            else "the statistical verdict above is the one to act on")
    return f"seed: bit-identity: {table} differs from the committed one (`git diff {table}`); {why}; {hint}"


def _settings(settings: dict[str, str] | None) -> str:
    return ", ".join(f"{k}={v or '(native)'}" for k, v in (settings or {}).items()) or "unknown settings"


AUDIT_COLUMNS = ("analysis/parse_ok_rate", "analysis/fail_truncated", "analysis/fail_invalid_json",
                 "analysis/fail_missing_field", "analysis/fail_empty_skill", "analysis/fail_call",
                 "analysis/skill_correct", "rl/teacher_coverage", "rl/teacher_gap_decision", "audit/parse_ok_rate",
                 "audit/skill_correct", "audit/candidate_parse_ok_rate", "audit/refreshed", "audit/analyzer_round")
"""The analyzer audit's columns of an RL stage's ``curve.csv`` (``seed_core.analyzer.audit``; ``audit/*``: the gated
analyzer's panel), in the order of its Prefect table."""


def audit_key(algorithm: str) -> str:
    """The keyed Prefect artifact of an algorithm's analyzer audit (keys allow lowercase letters, digits, dashes)."""
    return f"analyzer-audit-{algorithm.replace('_', '-')}"


def audit_rows(curve_csv: Path) -> list[dict[str, Any]]:
    """One row per round of ``curve.csv``: the round and the audit columns it has; [] when the row never analyzed."""
    frame = pd.read_csv(curve_csv)
    columns = [c for c in AUDIT_COLUMNS if c in frame.columns]
    if "analysis/parse_ok_rate" not in columns:
        return []
    rows = frame[["round", *columns]].to_dict(orient="records")
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()} for row in rows]


def publish_audit(curve_csv: Path, algorithm: str) -> bool:
    """The analyzer audit of an RL stage as a keyed Prefect table artifact of the current flow run (call inside a
    flow); returns whether the algorithm analyzed (else nothing is published)."""
    rows = audit_rows(curve_csv)
    if rows:
        create_table_artifact(table=rows, key=audit_key(algorithm),
                              description=f"Analyzer audit of rl@{algorithm}, round by round (curve.csv)")
    return bool(rows)
