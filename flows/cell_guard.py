"""What a ``seed worker`` runs: the sweep cells of its pool's cell deployment, and nothing else (issue 43).

Anyone who reaches the Prefect API can create a deployment in a worker's pool, edit one, or create a flow run with
its own parameters and job variables; Prefect's process worker runs whatever command that names. A seed worker
(``seed_app.cell_worker``) therefore checks every flow run it takes before anything starts:

- ``deployment_refusal``: the flow run belongs to ``flows.pool.deployment_name(pool)`` (flow ``sweep-pool-cell``,
  deployment named after the pool, in the pool), whose entrypoint, pull steps and path are ours, and neither the
  deployment nor the flow run sets a job variable (``command``, ``env``, ``working_dir``, ...) or a default
  parameter;
- ``cell_refusal``: the parameters are a cell's (``sweep_pool_cell_flow``'s names), its config validates, its seed,
  key and base-model md5 agree with that config, the paths and URIs have a cell's shape, and every free-text key of
  the config (a path, a program or a host: ``free_text_keys``) holds the value of this clone's ``params.yaml`` or of
  one of its presets, so a cell cannot point ``generation.vllm.python`` or ``model.path`` anywhere else.

A refused flow run is set to a final Failed state named ``Refused`` whose message says why (``refuse``): the
Prefect UI shows it, and nothing ran. A flow run that passes is not started with Prefect's engine command, which
would read the deployment again (its pull steps may run a shell script, and the deployment may have been edited
since the check) and the parameters again (a flow run's parameters can be updated through the API): the worker
starts ``python -m flows.cell_guard`` (``CELL_COMMAND``), which reads the flow run once, checks its parameters
again, enters the worker's clone and runs ``sweep_pool_cell_flow`` with exactly the parameters it checked.
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterator
from uuid import UUID

from prefect._internal.control_listener import configure_from_env
from prefect.client.orchestration import get_client
from prefect.engine import handle_engine_signals
from prefect.flow_engine import flow_run_logger, load_flow_run, run_flow
from prefect.states import Failed
from pydantic import BaseModel

from flows.pool import CELL_FLOW, ENTRYPOINT, PULL_STEPS, ROOT_VAR, WORKER_NAME_VAR, deployment_name
from flows.sweep_pool import POOL_CELLS, sweep_pool_cell_flow
from seed_core.config import ConfigError, SeedConfig
from seed_core.loader import load_config, plain_value, registry_fields, validate_config
from seed_core.sweep.cells import cell_key

CELL_COMMAND = (sys.executable, "-m", "flows.cell_guard")
"""What a seed worker starts for a checked flow run (instead of ``python -m prefect.engine``)."""
REFUSED = "Refused"
"""The name of the Failed state a refused flow run ends in."""
CHOICE_LISTS = ("sweep.methods",)
"""List-of-name keys the loader checks against a registry (not free text, though their type is ``list[str]``)."""
LABELS = ("project.preset", "tracking.experiment", "annotate.prompt_version", "annotate.model")
"""Free text that names nothing on the worker's machine (a label, an MLflow experiment, a cache tag, a model name
sent to the configured endpoint): a sweep may set it (``-S tracking.experiment=sweep-lab``, docs/experiments.md)."""
MD5 = re.compile(r"([0-9a-f]{32}(\.dir)?)?")
HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}")
TRACKING_URI = re.compile(r"(https?|sqlite|file):/{1,3}[^\s]{1,2000}")
RUN_ID = re.compile(r"[0-9a-f]{32}")


def deployment_refusal(flow_run: Any, deployment: Any, flow_name: str | None, pool: str) -> str | None:
    """Why ``flow_run`` (of ``deployment``, whose flow is ``flow_name``; None: no deployment) is not a run of the
    pool's cell deployment as ``flows.sweep_pool.ensure_deployment`` registers it, or None."""
    ours = deployment_name(pool)
    if deployment is None:
        return "it belongs to no deployment"
    if (flow_name, deployment.name, deployment.work_pool_name) != (CELL_FLOW, pool, pool):
        return f"its deployment {flow_name}/{deployment.name} is not {ours}"
    for what, found, wanted in (("flow", flow_run.flow_id, deployment.flow_id),
                                ("entrypoint", deployment.entrypoint, ENTRYPOINT),
                                ("pull steps", deployment.pull_steps, PULL_STEPS)):
        if found != wanted:
            return f"its {what} {found!r} is not the cell deployment's {wanted!r}"
    if deployment.path not in (None, "", ".") or deployment.storage_document_id or \
            deployment.infrastructure_document_id:
        return "its deployment names code storage or infrastructure"
    for whose, variables in (("its deployment", deployment.job_variables), ("the flow run", flow_run.job_variables)):
        if variables:
            return f"{whose} sets job variables {sorted(variables)} (a cell's process is fixed)"
    if deployment.parameters:
        return f"its deployment sets default parameters {sorted(deployment.parameters)}"
    return None


def free_text_keys(model: type[BaseModel] = SeedConfig, prefix: str = "") -> Iterator[str]:
    """Dotted config keys whose value is free text (a path, a program, a host, a mapping): neither a number, a
    boolean, a ``Literal``, a registry name (the same rule as the served deployment's, ``plain_value``) nor one of
    ``LABELS``."""
    choices = {key for key, _, _ in registry_fields(SeedConfig())} | set(CHOICE_LISTS) | set(LABELS)
    for name, field in model.model_fields.items():
        key, annotation = f"{prefix}{name}", field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from free_text_keys(annotation, f"{key}.")
        elif key not in choices and not plain_value(annotation):
            yield key


def free_text(cfg: SeedConfig) -> dict[str, Any]:
    """``cfg``'s free-text keys and values (``free_text_keys``)."""
    data = cfg.model_dump(mode="json")
    out = {}
    for key in free_text_keys():
        node: Any = data
        for part in key.split("."):
            node = node[part]
        out[key] = node
    return out


def project_free_texts(root: Path) -> dict[str, dict[str, Any]]:
    """The free text of this clone's own params files: ``params.yaml`` and each preset that loads."""
    out = {}
    for path in [root / "params.yaml", *sorted((root / "presets").glob("*.yaml"))]:
        try:
            out[path.relative_to(root).as_posix()] = free_text(load_config(path))
        except ConfigError:
            continue
    return out


def _free_text_refusal(cfg: SeedConfig, root: Path) -> str | None:
    """Why ``cfg``'s free text is none of this clone's params files', naming the keys that differ from the
    closest one, or None."""
    mine, known = free_text(cfg), project_free_texts(root)
    if not known or mine in known.values():
        return None if known else f"{root} has no params file that loads"
    name, closest = min(known.items(), key=lambda item: sum(item[1][k] != v for k, v in mine.items()))
    differ = ", ".join(f"{k}={mine[k]!r}" for k in mine if closest[k] != mine[k])
    return (f"its config sets {differ} (free text: a path, a program or a host), unlike {name} and every preset of "
            f"{root}; a cell's free text comes from the project's own params files (commit and pull them)")


def _shape_refusal(parameters: dict[str, Any], cfg: SeedConfig) -> str | None:
    """Why the parameters beside the config are not a cell of ``cfg``, or None."""
    seed, md5 = parameters["seed"], parameters.get("base_model_md5", "")
    checks = (
        (type(seed) is int and seed == cfg.project.seed and seed in cfg.sweep.seeds, "seed", seed),
        (isinstance(md5, str) and MD5.fullmatch(md5), "base_model_md5", md5),
        (isinstance(parameters["cells_dir"], str) and Path(parameters["cells_dir"]).is_absolute()
         and Path(parameters["cells_dir"]).name == POOL_CELLS, "cells_dir", parameters["cells_dir"]),
        (isinstance(parameters["base_model"], str) and Path(parameters["base_model"]).is_absolute(), "base_model",
         parameters["base_model"]),
        (isinstance(parameters["parent_host"], str) and HOST.fullmatch(parameters["parent_host"]), "parent_host",
         parameters["parent_host"]),
        (isinstance(parameters["tracking_uri"], str) and TRACKING_URI.fullmatch(parameters["tracking_uri"]),
         "tracking_uri", parameters["tracking_uri"]),
        (parameters.get("parent_run_id") is None or isinstance(parameters["parent_run_id"], str)
         and RUN_ID.fullmatch(parameters["parent_run_id"]), "parent_run_id", parameters.get("parent_run_id")),
    )
    for ok, name, value in checks:
        if not ok:
            return f"its parameter {name}={repr(value)[:80]} is not a cell's"
    if parameters["key"] != cell_key(cfg, md5):
        return f"its key {str(parameters['key'])[:40]!r} is not its config's ({cell_key(cfg, md5)})"
    return None


def cell_refusal(parameters: dict[str, Any], root: Path) -> str | None:
    """Why ``parameters`` are not a sweep cell that this clone (``root``) runs (module docstring), or None."""
    names = inspect.signature(sweep_pool_cell_flow.fn).parameters
    unknown = sorted(set(parameters) - set(names))
    missing = sorted(n for n, p in names.items() if p.default is inspect.Parameter.empty and n not in parameters)
    if unknown or missing:
        return f"its parameters are not a cell's ({'unknown ' + ', '.join(unknown) if unknown else ''}" \
               f"{'; ' if unknown and missing else ''}{'missing ' + ', '.join(missing) if missing else ''})"
    if not isinstance(parameters["config"], dict):
        return "its parameter config is not a mapping"
    try:
        cfg = validate_config(parameters["config"], source="the cell's config")
    except ConfigError as err:
        return " ".join(str(err).split())[:500]
    return _shape_refusal(parameters, cfg) or _free_text_refusal(cfg, root)


def refusal_message(worker: str, pool: str, why: str) -> str:
    """The refused flow run's state message: who refused it, why, and what a seed worker runs."""
    return (f"refused by seed worker {worker!r}: {why}; a seed worker runs only the sweep cells of deployment "
            f"{deployment_name(pool)} (nothing was run)")


def refused_state(message: str) -> Any:
    return Failed(name=REFUSED, message=message)


def run_checked_cell() -> None:
    """``python -m flows.cell_guard`` (``CELL_COMMAND``), the process a seed worker starts for a checked flow run:
    Prefect's engine entry (``prefect.engine``'s ``__main__``) for the one cell flow, with the flow run's parameters
    read once, checked again (``cell_refusal``) and passed as they were checked; the deployment is not read."""
    flow_run_id = UUID(os.environ["PREFECT__FLOW_RUN_ID"])
    configure_from_env()
    with handle_engine_signals(flow_run_id):
        flow_run = load_flow_run(flow_run_id=flow_run_id)
        root = Path(os.environ[ROOT_VAR])
        parameters = dict(flow_run.parameters)
        if why := cell_refusal(parameters, root):
            with get_client(sync_client=True) as client:
                client.set_flow_run_state(flow_run_id, refused_state(refusal_message(
                    os.environ.get(WORKER_NAME_VAR, "?"), flow_run.work_pool_name or "?", why)), force=True)
            return
        os.chdir(root)  # what the deployment's pull step does
        run_flow(sweep_pool_cell_flow, flow_run=flow_run, parameters=parameters,
                 error_logger=flow_run_logger(flow_run=flow_run))


if __name__ == "__main__":
    run_checked_cell()
