"""Prefect flows: one per DVC stage (``python -m flows.<stage>``) and the in-process ``pipeline``, with their
glue (``common``), the results published where users look (``results``) and the local servers (``servers``).

Inside a DVC stage process (``$DVC_STAGE`` set) without ``$PREFECT_API_URL``, i.e. a plain ``dvc repro``,
this package points Prefect at ``seed ui``'s server when it is up, else at the project's own database
(``.prefect/``, the one ``seed ui`` serves), before Prefect is imported: the stage's flow run stays
in the history instead of dying with a temporary database.

First of all, the CPU numerics are pinned (``seed_core.repro.numerics.pin``: ATen, MKL and oneDNN at AVX2 unless the
user set them), before torch loads in this process or in the warm stage server that forks it.

Under ``seed run`` a stage process first checks that ``params.yaml`` and ``dvc.yaml`` are as the run began
(``flows.run_inputs``), then hands itself to the run's warm stage server (``flows.warm``), which has
imported Prefect, MLflow and torch once, and exits with the status of the fork that ran the stage.

The engine's log lines (``seed_core.runtime.logs``) reach each flow run's logs in the Prefect UI: ``seed_core`` is
added to ``PREFECT_LOGGING_EXTRA_LOGGERS`` before Prefect is imported, at ``$SEED_LOG_LEVEL`` (default INFO).
``<project>/.env`` is read first (``seed_core.config.load_env_file``), so a ``PREFECT_API_URL`` there counts.
"""

from seed_core.repro.numerics import pin as _pin_numerics

_pin_numerics()  # first: before torch loads here, and before a stage hands its environment to the warm server

from flows.run_inputs import check_stage as _check_run_inputs  # noqa: E402

_check_run_inputs()  # under `seed run`: params.yaml and dvc.yaml as the run began, or this stage stops in one line

from flows.warm import client_main as _client_main  # noqa: E402

_client_main()  # under `seed run`: this stage runs in a fork of the warm stage server, and exits there

import logging as _logging  # noqa: E402
import os as _os  # noqa: E402

_extra = [name for name in _os.environ.get("PREFECT_LOGGING_EXTRA_LOGGERS", "").split(",") if name.strip()]
_os.environ["PREFECT_LOGGING_EXTRA_LOGGERS"] = ",".join(dict.fromkeys([*_extra, "seed_core"]))
_logging.getLogger("seed_core").setLevel(_os.environ.get("SEED_LOG_LEVEL", "INFO"))

from seed_core.config import load_env_file as _load_env_file  # noqa: E402

_load_env_file()  # <project>/.env (endpoints, secrets; never over the environment), before Prefect reads its URL

if _os.environ.get("DVC_STAGE") and not _os.environ.get("PREFECT_API_URL"):
    from flows.servers import use_project_prefect as _use_project_prefect

    _use_project_prefect()
