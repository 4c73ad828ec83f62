"""DVC stage ``report``: tables (``reports/table.md``, ``table.csv``) and learning curves (PNG), published
where users look: MLflow (``log_table``, ``log_figure``) and keyed Prefect artifacts (``flows.results``).

The Prefect artifacts are published by one flow run per pipeline run: this stage's under a plain ``dvc
repro``, the pipeline's (with the UI links, also when DVC reused the report) under ``seed run`` and the
served deployment, which set ``SEED_PIPELINE_FLOW_RUN_ID``; both publishing gave two ``seed-results``
per run."""

from __future__ import annotations

import os
from pathlib import Path

from prefect import flow, get_run_logger

from flows.common import PIPELINE_FLOW_RUN_VAR, eval_methods, parse_args, rl_algorithms, stage_paths, stage_run
from flows.results import publish_prefect
from flows.stage_graph import run_stage
from seed_core.loader import load_config
from tasks.report import report


@flow(name="report")
def report_flow(params_path: Path = Path("params.yaml"), parent_run_id: str | None = None) -> dict[str, float]:
    cfg = load_config(params_path)
    paths = stage_paths(cfg)
    eval_dirs = {m: paths.eval(m) for m in eval_methods(cfg)}
    rl_dirs = {a: paths.rl(a) for a in rl_algorithms(cfg)}
    inputs = [d / "episodes.parquet" for d in eval_dirs.values()] + [d / "curve.csv" for d in rl_dirs.values()]
    with stage_run(cfg, "report", "report", inputs, parent_run_id) as tracker:
        metrics = report(eval_dirs, rl_dirs, paths.reports, cfg, tracker)
        tracker.log_metrics(metrics)
        tracker.log_artifact(paths.reports)
    if not os.environ.get(PIPELINE_FLOW_RUN_VAR):  # under `seed run` its flow run publishes the table, once
        publish_prefect(paths.reports)
    get_run_logger().info("\n%s", (paths.reports / "table.md").read_text())
    return metrics


if __name__ == "__main__":
    run_stage(report_flow, params_path=parse_args("report").params)
