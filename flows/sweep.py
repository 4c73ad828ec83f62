"""DVC stages of ``sweep/dvc.yaml``: ``cell@<seed>`` (one seed's pipeline -> ``data/sweep/seed_<seed>``, its
own MLflow child run) and ``report`` (statistics over seeds -> ``reports/sweep/``).

    python -m flows.sweep --seed 3        # one cell
    python -m flows.sweep --report        # the report over sweep.seeds
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from prefect import flow

from flows.common import dvc_lock_md5s, stage_paths, stage_run
from flows.stage_graph import run_stage
from seed_core.config import ConfigError, project_root
from seed_core.runtime.io import write_json
from seed_core.loader import load_config
from seed_core.sweep.cells import cell_key, code_fingerprint
from seed_core.sweep.committed import committed_path, read_committed, write_committed
from tasks.sweep import sweep_cell, sweep_report


def cell_dir(data: Path, seed: int) -> Path:
    return data / "sweep" / f"seed_{seed}"


@flow(name="sweep-cell", flow_run_name="sweep-seed-{seed}")
def sweep_cell_flow(params_path: Path = Path("params.yaml"), seed: int = 0,
                    parent_run_id: str | None = None) -> dict[str, Any]:
    """One cell; a result committed under this cell's key (``seed_core.sweep.committed``) is reused, not recomputed."""
    cfg = load_config(params_path, {"project.seed": seed}, origin="--seed")
    paths = stage_paths(cfg)
    key = cell_key(cfg, next(iter(dvc_lock_md5s([paths.base_model]).values()), ""),  # the base model's DVC md5
                   code=code_fingerprint())
    out = cell_dir(paths.data, seed)
    with stage_run(cfg, f"sweep-seed-{seed}", "sweep", [paths.base_model], parent_run_id) as tracker:
        tracker.set_tags({"seed": seed, "methods": ",".join(cfg.sweep.methods), "config_hash": key})
        results = read_committed(project_root(), seed, key)
        if results is not None:
            print(f"sweep cell {seed}: reusing {committed_path(project_root(), seed, key).relative_to(project_root())} "
                  f"(committed under this cell's key {key})")
            write_json(out / "results.json", results)
            tracker.set_tags({"reused_committed": "true"})
        else:
            results = {**sweep_cell(cfg, paths.base_model, out, tracker), "config_hash": key}
            write_json(out / "results.json", results)
            write_committed(project_root(), seed, key, results)
        tracker.log_artifact(out / "results.json")
        return results


@flow(name="sweep-report")
def sweep_report_flow(params_path: Path = Path("params.yaml"), parent_run_id: str | None = None) -> dict[str, Any]:
    cfg = load_config(params_path)
    paths = stage_paths(cfg)
    out = paths.reports / "sweep"
    cells = [cell_dir(paths.data, s) for s in cfg.sweep.seeds]
    with stage_run(cfg, "sweep-report", "sweep", cells, parent_run_id) as tracker:
        summary = sweep_report(cfg, cells, out)
        tracker.log_metrics({f"{m}/mean": s["mean"] for m, s in summary["methods"].items()})
        for name in ("learning.json", "table.md", "curve_success.png"):
            tracker.log_artifact(out / name)
        return summary


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m flows.sweep")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--seed", type=int, help="run the cell of this project.seed")
    group.add_argument("--report", action="store_true", help="statistics over sweep.seeds")
    args = parser.parse_args()
    try:
        load_config(args.params)
    except ConfigError as err:
        sys.exit(f"seed: {err}")
    if args.report:
        run_stage(sweep_report_flow, params_path=args.params)
    else:
        run_stage(sweep_cell_flow, params_path=args.params, seed=args.seed)


if __name__ == "__main__":
    main()
