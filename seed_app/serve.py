"""The Prefect UI deployment: trigger or schedule a versioned pipeline run with parameters.

``seed serve`` (or ``python -m seed_app.serve``) registers ``seed-pipeline/ui`` on the Prefect server
(``seed ui`` starts one) and runs what the UI triggers. Every run is a DVC experiment
(``seed_app.dvc_run.run_pipeline``), so its params, data and metrics are versioned. ``global_limit=1``:
one run at a time, because concurrent ``dvc exp run`` in one workspace corrupts results (pitfall 18).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from seed_app.dvc_run import run_pipeline


@flow(name="seed-pipeline", log_prints=True)
def seed_pipeline(preset: str = "params.yaml", overrides: dict[str, Any] | None = None,
                  experiment_name: str = "") -> dict[str, float]:
    """Run the whole DVC pipeline as an experiment.

    Args:
        preset: ``params.yaml`` (the workspace values) or a file under ``presets/``, e.g.
            ``presets/alfworld-qwen2.5-3b.yaml``.
        overrides: dotted keys, e.g. ``{"rl.opd_coef": 0.02, "rl.gate_beta": 1.0}`` (``dvc exp run -S``).
        experiment_name: DVC experiment name (empty: DVC picks one).
    """
    chosen = None if preset == "params.yaml" else Path(preset)
    return run_pipeline(chosen, overrides or {}, experiment_name or None, experiment=True).metrics


def main() -> None:
    seed_pipeline.serve(name="ui", global_limit=1, tags=["seed"],
                        description="Versioned SEED pipeline run (dvc exp run) with a preset and overrides.")


if __name__ == "__main__":
    main()
