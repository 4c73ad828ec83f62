"""The work pool's command: ``seed worker`` (a Prefect process worker serving sweep cells; ``seed_app.pool``).
``seed sweep --pool NAME`` (``seed_app.cli_pipeline``) fans a sweep's cells out to these workers."""

from __future__ import annotations

import re
from typing import Annotated, Optional

import typer

from seed_app.cli_base import command, pipeline_errors
from seed_core.config import ConfigError

POOL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def check_pool_name(name: str, option: str = "--pool") -> str:
    """A work-pool name: letters, digits, ``_ . -`` (it is also the deployment's name); else a ``ConfigError``."""
    if not POOL_NAME.match(name):
        raise ConfigError(f"{option} {name!r}: a pool name is letters, digits and _ . - (e.g. --pool sweeps)")
    return name


PoolOption = Annotated[str, typer.Option(metavar="NAME", help="The Prefect work pool (type process; created when "
                                                              "missing).")]


@command(short_help="Serve sweep cells from a Prefect work pool in this project clone (seed sweep --pool).")
def worker(pool: PoolOption,
           limit: Annotated[int, typer.Option(min=1, max=1024, metavar="N",
                                              help="Cells this worker runs at a time.")] = 1,
           threads: Annotated[Optional[int], typer.Option(
               min=1, max=1024, metavar="N",
               help="Torch threads per cell (default: the cores split over --limit).")] = None,
           name: Annotated[Optional[str], typer.Option(metavar="NAME", help="The worker's name in the pool "
                                                                            "(default: host-PID).")] = None,
           allow_unauthenticated_api: Annotated[bool, typer.Option(
               "--allow-unauthenticated-api",
               help="Start even though the Prefect API asks for no credentials (`seed ui` without --auth): anyone "
                    "who reaches it can then submit flow runs to this pool, read and change its runs, and start "
                    "this worker's cells with any config this clone's params files allow (other flow runs are "
                    "refused).")] = False) -> None:
    """Serve sweep cells from a Prefect work pool in this project clone (seed sweep --pool).

    Runs a Prefect process worker on the Prefect server of $PREFECT_API_URL or `seed ui`, in this process; each
    cell it takes runs with this clone's code, data and base model, logs to the sweep's MLflow server, and ends
    when the worker does. It runs only the sweep cells of the pool's cell deployment: any other flow run (another
    deployment, a command, environment or working-directory override, parameters that are not a cell's, free
    text that is not in this clone's params files) ends Failed/Refused with the reason in the Prefect UI, and
    nothing runs. It refuses an API without authentication unless --allow-unauthenticated-api. One worker per
    machine (or per device group); several on one machine split its cores with --threads. Stop it with Ctrl-C or
    one SIGTERM: its cell is then retried elsewhere.
    """
    from seed_app.pool import start_worker

    with pipeline_errors():
        start_worker(check_pool_name(pool), limit, threads, name, allow_unauthenticated_api)

