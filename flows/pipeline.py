"""The whole pipeline in one process (development, tests): every stage flow as a subflow, in order.

Stage 1 (prepare_model, generate_alfworld -> collect -> annotate -> sft), then RL for each of ``rl_algorithms`` from
where it starts (``Algorithm.init``: the base model or the SFT checkpoint), an evaluation of every method in ``eval_methods`` and the report. One
MLflow parent run holds a child run per stage (and a grandchild per RL round). This path does not
version anything: ``dvc repro`` / ``seed run`` is the reproducible way to run the same stages.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.runtime import flow_run

from flows.annotate import annotate_flow
from flows.collect import collect_flow
from flows.common import eval_methods, parse_args, rl_algorithms, stage_paths
from flows.evaluate import evaluate_flow
from flows.generate_alfworld import generate_alfworld_flow
from flows.prepare_model import prepare_model_flow
from flows.report import report_flow
from flows.results import log_results
from flows.rl import rl_flow
from flows.sft import sft_flow
from seed_core.loader import load_config
from seed_core.tracking import open_run


@flow(name="pipeline")
def pipeline_flow(params_path: Path = Path("params.yaml")) -> dict[str, float]:
    """Run every stage in order; returns the report's ``<method>/<env>/<split>/success_rate`` metrics."""
    cfg = load_config(params_path)
    tags = {"stage": "pipeline", "prefect.flow_run_id": flow_run.id or ""}
    with open_run(cfg, "pipeline", tags=tags) as parent:
        for stage in (prepare_model_flow, generate_alfworld_flow, collect_flow, annotate_flow, sft_flow):
            stage(params_path, parent_run_id=parent.run_id)
        for algorithm in rl_algorithms(cfg):
            rl_flow(params_path, algorithm, parent_run_id=parent.run_id)
        for method in eval_methods(cfg):
            evaluate_flow(params_path, method, parent_run_id=parent.run_id)
        metrics = report_flow(params_path, parent_run_id=parent.run_id)
        log_results(parent, stage_paths(cfg).reports)  # the table, curves and headline metrics
        parent.log_artifact(params_path)
    return metrics


if __name__ == "__main__":
    pipeline_flow(parse_args("pipeline").params)
