"""The ``seed`` command line: run the pipeline, one stage, the UIs, the served deployment, the table.

    seed run                                   # dvc repro under an MLflow parent run, then the table
    seed run --preset presets/sokoban-qwen2.5-1.5b.yaml -S rl.opd_coef=0.02 --name opd-0.02
    seed sweep --seeds 5                       # the methods table over random seeds, with confidence intervals
    seed sweep --methods vanilla,sft,grpo,skill_grpo,skill_grpo*,sdar,seed   # "*": with the static skills
    seed worker --pool sweeps                  # a Prefect process worker serving sweep cells (one per machine)
    seed sweep --pool sweeps --seeds 10        # the sweep's cells fanned out to the pool's workers
    seed stage rl@seed                         # one DVC stage (dvc repro --single-item)
    seed ui / seed ui --stop                   # Prefect + MLflow servers on 127.0.0.1
    seed init                                  # the project's Prefect and MLflow stores (setup.sh runs it)
    seed serve                                 # the Prefect UI deployment (needs `seed ui`)
    seed table                                 # print reports/table.md
    seed preflight                             # go/no-go of SEED's mechanism on the Stage-1 checkpoint (exit 0/1)
    seed doctor [--record]                     # does this CPU give the committed numerics' bits (exit 0/1/3)

Bad input ends in one line, ``seed <command>: <what was wrong, what is allowed, the fix>``, and exit code 2,
never a traceback: a usage error (``SeedGroup``), a bad config or preset, a missing model or data directory or an
endpoint that does not answer (``seed_app.inputs``, checked before any server or stage starts), a busy
workspace (``pipeline_errors``); the shared parts are in ``seed_app.cli_base``. Any other exception ends in one
line too, naming it and our innermost file:line, with the traceback in a log the line names, and exit code 1
(``seed_app.crash``).

The commands live in one module per group, ``seed_app/cli_<group>.py`` (pipeline, pool, ui, preflight, doctor),
each declared with ``cli_base.command(...)``; ``COMMANDS`` below registers them in the order ``seed --help`` lists
them. A new command: a function declared so in its group's module (or a new ``cli_<group>.py``), one entry in
``COMMANDS``, and its bad arguments in ``tests/unit/test_cli_errors.py`` ``BAD_ARGS``.

Imports: the standard library at module top; what a command runs (seed_core's engine, flows, Prefect, MLflow, DVC)
inside the command's function, since importing this module is ``seed --help``'s whole cost and the engine's modules
load torch and transformers (``benchmarks/results/import_cost.json``: ``seed_app.cli`` against
``seed_core.modeling.testbed``, which ``seed doctor``'s build pulls).
"""

from __future__ import annotations

import typer

from seed_app import cli_doctor, cli_pipeline, cli_pool, cli_preflight, cli_ui
from seed_app.cli_base import SeedGroup, one_line, parse_overrides, register
from seed_app.cli_pipeline import parse_methods, up_to_date

__all__ = ["COMMANDS", "app", "one_line", "parse_methods", "parse_overrides", "up_to_date"]  # what callers import

app = typer.Typer(cls=SeedGroup, rich_markup_mode=None, no_args_is_help=True, add_completion=False,
                  help="Run the SEED pipeline (DVC stages, Prefect flows, MLflow tracking) and show its results. "
                       "Every command's --help says what it does and takes.")

COMMANDS = (cli_pipeline.run, cli_pipeline.sweep, cli_pool.worker, cli_pipeline.stage, cli_ui.init, cli_ui.ui,
            cli_ui.serve, cli_preflight.preflight, cli_doctor.doctor, cli_pipeline.table)
"""Every ``seed`` subcommand, in the order of ``seed --help``."""

register(app, COMMANDS)

if __name__ == "__main__":
    app()
