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
           limit: Annotated[int, typer.Option(min=1, metavar="N", help="Cells this worker runs at a time.")] = 1,
           threads: Annotated[Optional[int], typer.Option(
               min=1, metavar="N", help="Torch threads per cell (default: the cores split over --limit).")] = None,
           name: Annotated[Optional[str], typer.Option(metavar="NAME", help="The worker's name in the pool "
                                                                            "(default: host-PID).")] = None) -> None:
    """Serve sweep cells from a Prefect work pool in this project clone (seed sweep --pool).

    Starts a Prefect process worker (prefect worker start --type process) on the Prefect server of
    $PREFECT_API_URL or `seed ui`; each cell it takes runs with this clone's code, data and base model, logs to the
    sweep's MLflow server, and ends when the worker does. One worker per machine (or per device group); several
    on one machine split its cores with --threads. Stop it with Ctrl-C: its cell is then retried elsewhere.
    """
    from seed_app.pool import start_worker

    with pipeline_errors():
        start_worker(check_pool_name(pool), limit, threads, name)

