"""The one place seed reads environment variables: secrets and endpoints only (``ENDPOINT_VARS``), also from
``<project>/.env``; configuration belongs in params.yaml (``seed_core.config``, which re-exports these names).
Imports nothing of seed_core, so every layer may ask for an endpoint.
"""

from __future__ import annotations

import os
from pathlib import Path

SECRET_VARS = ("OPENAI_API_KEY", "SEED_UI_PASSWORD", "PREFECT_API_AUTH_STRING", "MLFLOW_TRACKING_PASSWORD")
"""Never logged: a config value or tag that contains one is replaced by ``***`` (``seed_core.tracking.redact``);
the last three are ``seed ui --auth``'s password as the user, Prefect's client and MLflow's client see it."""
ENDPOINT_VARS = ("OPENAI_BASE_URL", "MLFLOW_TRACKING_URI", "PREFECT_API_URL", "ALFWORLD_DATA", "MODELS_ROOT",
                 *SECRET_VARS)


ENV_FILE = ".env"
"""``<project>/.env``: ``KEY=value`` lines for ``ENDPOINT_VARS`` (git-ignored), read by python-dotenv."""
_ENV_FILE_READ: list[Path] = []


def load_env_file(path: Path | None = None) -> list[str]:
    """Set the ``ENDPOINT_VARS`` that ``path`` (default ``<project>/.env``) names and the environment does not,
    once per process: a variable already set always wins, other keys are ignored (configuration belongs in
    params.yaml; their names are logged, values never). Called by ``endpoint_env`` and first thing by the flows
    (Prefect reads ``PREFECT_API_URL`` itself), so stage processes started by DVC see the file too. Returns the
    names it set."""
    from dotenv import dotenv_values

    path = Path(path) if path is not None else env_file()
    if path in _ENV_FILE_READ:
        return []
    _ENV_FILE_READ.append(path)
    if not path.is_file():
        return []
    values = dotenv_values(path, interpolate=False)
    ignored = sorted(k for k in values if k not in ENDPOINT_VARS)
    if ignored:
        import logging

        logging.getLogger(__name__).warning("%s: ignored %s (seed reads only %s from it)", path, ", ".join(ignored),
                                            ", ".join(ENDPOINT_VARS))
    added = [k for k, v in values.items() if k in ENDPOINT_VARS and v and not os.environ.get(k)]
    for name in added:
        os.environ[name] = str(values[name])
    return added


def env_file() -> Path:
    """``<project>/.env`` (``ENV_FILE``)."""
    return project_root() / ENV_FILE


def endpoint_env(name: str) -> str | None:
    """The one place seed reads environment variables (secrets and endpoints only), after ``<project>/.env``
    (``load_env_file``: never over a variable already set)."""
    if name not in ENDPOINT_VARS:
        raise KeyError(f"{name} is not an endpoint/secret variable; configuration belongs in params.yaml")
    load_env_file()
    return os.environ.get(name) or None


def project_root() -> Path:
    """Root of the checkout (the directory holding params.yaml), independent of the cwd."""
    return Path(__file__).resolve().parents[2]


def models_root() -> Path:
    return Path(endpoint_env("MODELS_ROOT") or project_root() / "models")
