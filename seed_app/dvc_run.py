"""Run the DVC pipeline under one MLflow parent run: ``dvc repro``, or ``dvc exp run`` for a preset,
overrides or a named experiment; as the ``seed-pipeline`` flow of ``seed run`` and of the UI deployment that
``seed serve`` serves (every run triggered there is an experiment, one at a time).

A preset is copied over ``params.yaml`` for the experiment, so DVC records its values (``dvc exp
show``); overrides become ``-S key=value``. Afterwards ``params.yaml`` is put back: the experiment
is saved by DVC (``dvc exp apply <name>`` restores it) and the next run does not inherit its values
(stack-notes pitfall 17). Stage processes find the parent through ``SEED_PARENT_RUN_ID`` and log to
the same absolute MLflow store, also from DVC's temporary experiment copies (pitfall 12).
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from prefect import flow
from prefect.runtime import flow_run

from flows.common import (PARENT_RUN_VAR, PIPELINE_FLOW_RUN_VAR, add_flow_run_tags, eval_methods, flow_run_settings,
                          pipeline_tag)
from flows import results, run_inputs, servers, stage_graph
from seed_app import dvc_lock, interrupt, workspace
from seed_app.services import QUIET_ENV, pipeline_servers
from seed_core.runtime import timing
from seed_core.config import ConfigError, project_root
from seed_core.runtime.io import KnownError
from seed_core.loader import load_config
from seed_core.tracking import open_run, tracking_uri

def dvc_command(overrides: dict[str, Any], name: str | None, experiment: bool,
                targets: tuple[str, ...] = ()) -> list[str]:
    """``dvc repro [targets]``, or ``dvc exp run [-n name] -S key=value ... [targets]`` (values as YAML/JSON
    literals); no targets = the root ``dvc.yaml``."""
    if not (experiment or overrides or name):
        return ["dvc", "repro", *targets]
    cmd = ["dvc", "exp", "run", *(["-n", name] if name else [])]
    for key, value in overrides.items():
        cmd += ["-S", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    return [*cmd, *targets]


def stage_env(parent_run_id: str | None) -> dict[str, str]:
    """The environment of the DVC stage processes: this interpreter first on PATH (``python -m flows.x``
    in dvc.yaml), the parent run, the absolute MLflow store, telemetry off."""
    env = {**QUIET_ENV, **os.environ, "MLFLOW_TRACKING_URI": tracking_uri()}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if parent_run_id:
        env[PARENT_RUN_VAR] = parent_run_id
    return env


def final_metrics(root: Path, cfg: Any) -> dict[str, float]:
    """``<method>/<metric>`` from every evaluation's metrics.json (DVC-cached stages log no MLflow run,
    pitfall 19, so the parent run carries the final numbers)."""
    out: dict[str, float] = {}
    for method in eval_methods(cfg):
        path = root / cfg.project.data_dir / "eval" / method / "metrics.json"
        if path.is_file():
            out |= {f"{method}/{k}": float(v) for k, v in json.loads(path.read_text()).items()
                    if isinstance(v, (int, float))}
    return out


@dataclass
class PipelineRun:
    """What a pipeline run leaves: the parent run's metrics and where to look at it."""

    metrics: dict[str, float]
    mlflow_run_id: str | None = None
    mlflow_experiment_id: str | None = None
    prefect_flow_run_id: str | None = None
    prefect_api_url: str | None = None
    links: dict[str, str] = field(default_factory=dict)


class InputsChanged(ConfigError, KnownError):
    """``params.yaml`` or ``dvc.yaml`` changed while the run ran (``flows.run_inputs``): one line and exit code 2
    (``seed_app.cli_base.pipeline_errors``), and Prefect's log of the pipeline flow run keeps its message without
    the traceback (``_inputs_changed_without_traceback``)."""


def _inputs_changed_without_traceback(record: logging.LogRecord) -> bool:
    if isinstance(record.exc_info, tuple) and isinstance(record.exc_info[1], InputsChanged):
        record.exc_info, record.exc_text = None, None
    return True


logging.getLogger("prefect.flow_runs").addFilter(_inputs_changed_without_traceback)


def reproduce(cmd: list[str], root: Path, env: dict[str, str], inputs: str,
              watch: Callable[[bytes], None] | None = None) -> None:
    """Run ``cmd`` (``dvc repro`` / ``dvc exp run``) holding DVC's lock (``seed_app.dvc_lock``: no other DVC
    command changes the project under the run) and the workspace (both through ``pass_fds``), with the inputs the
    run started from (``inputs``: ``flows.run_inputs.snapshot``, which each stage checks), in a process group of its
    own that a Ctrl-C stops before the servers do (``seed_app.interrupt``); ``watch`` sees DVC's output as it passes.
    Raises ``InputsChanged`` when an input
    changed meanwhile, else ``CalledProcessError`` when DVC failed."""
    with dvc_lock.hold(root) as fd:  # the run's own hold (``run_pipeline``), or one of this root's own
        code = interrupt.run_dvc(dvc_lock.command(cmd, fd, root), root, {**env, run_inputs.INPUTS_VAR: inputs},
                                 pass_fds=(*workspace.inherited_fds(), fd), watch=watch)
    if names := run_inputs.changed(json.loads(inputs)):
        raise InputsChanged(f"the run stopped: {run_inputs.message(json.loads(inputs), names)}")
    if code:
        raise subprocess.CalledProcessError(code, cmd)


@workspace.exclusive
@dvc_lock.exclusive
def run_pipeline(preset: Path | None = None, overrides: dict[str, Any] | None = None, name: str | None = None,
                 experiment: bool = False, tags: dict[str, Any] | None = None, targets: tuple[str, ...] = (),
                 run_name: str = "pipeline", summary: Callable[[Path, Any], dict[str, float]] | None = None,
                 artifacts: tuple[str, ...] = ("params.yaml", "dvc.lock", "reports/table.md"),
                 reports: str | None = "reports") -> PipelineRun:
    """Validate the config (a bad preset or override stops here), then run DVC (``targets``: default the
    root pipeline) under a parent run named ``run_name`` that gets ``summary(root, cfg)`` (default: every
    method's final metrics), the ``artifacts`` (paths relative to the project) and, from ``reports``, the
    results table, curves and headline metrics (``flows.results``; also as Prefect artifacts when this
    runs inside a flow run). It holds the workspace from its first line (``seed_app.workspace``; a busy one raises
    ``workspace.Busy``), before ``params.yaml`` is read or written, and ``dvc`` inherits the lock; so it does
    with DVC's own lock (``seed_app.dvc_lock``: a ``dvc exp run`` beside it is refused before it writes anything).
    ``params.yaml`` is put back after an experiment unless it changed under the run (then it stays as the user
    left it)."""
    overrides = overrides or {}
    root = project_root()
    params = root / "params.yaml"
    cfg = load_config(preset or params, overrides or None)
    cmd = dvc_command(overrides, name, experiment or preset is not None, targets)
    original, inputs = params.read_text(), None
    try:
        if preset is not None:
            params.write_text(Path(preset).read_text())
        run_tags = {"stage": run_name, "dvc.command": " ".join(cmd), **(tags or {})}
        if flow_run.id:
            run_tags["prefect.flow_run_id"] = flow_run.id
            add_flow_run_tags(flow_run.id, [pipeline_tag(flow_run.id)])
        with pipeline_servers() as (api_url, _), open_run(cfg, run_name, tags=run_tags) as parent:
            env = {**stage_env(parent.run_id), "PREFECT_API_URL": api_url}
            cached = None
            if flow_run.id:  # each stage a subflow run of this one, each skipped one a Cached task run
                env[PIPELINE_FLOW_RUN_VAR] = flow_run.id
                cached = stage_graph.CachedStages(flow_run.id)
            try:
                timing.mark("dvc_start")
                inputs = run_inputs.snapshot(root, overrides)  # stage processes fork from the warm server
                reproduce(cmd, root, env, inputs, watch=cached and cached.seen)
                timing.mark("dvc_end")
            finally:
                if cached:
                    cached.close()
                if flow_run.id:  # also after a failed stage: the link to its logs matters most then
                    results.publish_stage_runs(pipeline_tag(flow_run.id))
            metrics = (summary or final_metrics)(root, cfg)
            parent.log_metrics(metrics)
            if reports:
                metrics |= results.log_results(parent, root / reports)
            for path in (root / a for a in artifacts):
                if path.is_file():
                    parent.log_artifact(path)
            run = PipelineRun(metrics, parent.run_id, experiment_id(parent), flow_run.id, api_url)
            run.links = ui_links(run)
            if flow_run.id and reports and (root / reports / "table.md").is_file():
                results.publish_prefect(root / reports, run.links)
    finally:
        if cmd[1] == "exp" and not (inputs and "params.yaml" in run_inputs.changed(json.loads(inputs))):
            params.write_text(original)
    return run


def experiment_id(tracker: Any) -> str | None:
    """The MLflow experiment of an open run (None without tracking)."""
    client = getattr(tracker, "client", None)
    return client.get_run(tracker.run_id).info.experiment_id if client and tracker.run_id else None


def ui_links(run: PipelineRun) -> dict[str, str]:
    """``MLflow run`` / ``Prefect flow run`` URLs for the servers that are up (``seed ui``'s, or the
    http tracking URI); the Prefect link is to ``seed ui``'s server, which serves the same database as a
    temporary one (``flows.servers.prefect_home``)."""
    links: dict[str, str] = {}
    base = results.mlflow_ui()
    if base and run.mlflow_run_id and run.mlflow_experiment_id:
        links["MLflow run"] = results.mlflow_run_url(base, run.mlflow_experiment_id, run.mlflow_run_id)
    prefect_base = servers.ui_url("prefect")
    if prefect_base and run.prefect_flow_run_id:
        links["Prefect flow run"] = results.prefect_flow_run_url(f"{prefect_base}/api", run.prefect_flow_run_id)
    return links


@flow(name="seed-pipeline", log_prints=True)
def pipeline_run_flow(preset: Path | None = None, overrides: dict[str, Any] | None = None,
                      name: str | None = None) -> PipelineRun:
    """``seed run``: ``run_pipeline`` as one Prefect flow run (the stage flow runs are grouped under it)."""
    return run_pipeline(preset, overrides or {}, name)


@workspace.exclusive
def run_in_flow(preset: Path | None = None, overrides: dict[str, Any] | None = None,
                name: str | None = None) -> PipelineRun:
    """``pipeline_run_flow`` against ``pipeline_servers()`` (``seed ui``'s servers, else temporary ones on the
    project's databases), so the pipeline run and its stages stay in the Prefect and MLflow history; the workspace
    is held (``seed_app.workspace``) before any server starts."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with pipeline_servers() as (url, _), temporary_settings({PREFECT_API_URL: url, **flow_run_settings()}):
        return pipeline_run_flow(preset, overrides or {}, name)


SERVED_OVERRIDES = ("project.seed", "rl.*", "sft.*", "collect.*", "eval.*", "env.*", "generation.temperature",
                    "generation.top_p", "generation.top_k", "generation.max_new_tokens", "generation.max_prompt_tokens",
                    "generation.batch_size", "generation.eval_temperature")
"""The override keys a ``seed-pipeline/ui`` run (``seed serve``, anyone who reaches the Prefect API) may set:
``fnmatch`` patterns of dotted params keys. A key must match one *and* hold a number, a boolean or a named
choice in the schema (a ``Literal``, or a registry key such as ``rl.algorithm``, which the loader checks against
its registry). A free string or list could name an executable, a path outside the project or a host
(``generation.vllm.python``, ``model.path``, ``rl.static_skills_dir``, ``env.search_qa.retriever_url``), so
none is served; nor are whole sections that run programs or decide where things go (``generation.vllm.*``,
``annotate.*``, ``model.*``, ``project.accelerate_config``, ``tracking.*``). Presets set anything: they are
project files (``presets/``), chosen by name."""
SERVED_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
"""A served run's DVC experiment name: a plain word (DVC makes it a git ref)."""


class ServedRequestError(ValueError):
    """A ``seed-pipeline/ui`` request with a parameter it may not set; one line naming it and what is allowed."""


def check_served_request(preset: str, overrides: dict[str, Any], experiment_name: str) -> Path | None:
    """Refuse, before anything runs, a served request that sets what ``SERVED_OVERRIDES`` does not allow, names a
    preset that is not a file under the project's ``presets/`` (symlinks resolved), or an odd experiment name.
    Returns the preset file (None: ``params.yaml``). Values are checked by ``run_pipeline``'s config load."""
    from seed_core.config import SeedConfig, flatten
    from seed_core.loader import MAX_VALUE_CHARS, _field_at, plain_value, registry_fields

    root = project_root()
    allowed = f"a served run may set {', '.join(SERVED_OVERRIDES)} (numbers, booleans and named choices only)"
    known, choices = flatten(SeedConfig()), {key for key, _, _ in registry_fields(SeedConfig())}
    for key in overrides:
        if key not in known:
            why = "is not a params.yaml key"
        elif not any(fnmatch.fnmatchcase(key, pattern) for pattern in SERVED_OVERRIDES):
            why = "is not served (only keys that cannot name a program, a path or a host are)"
        elif key not in choices and not plain_value(_field_at(tuple(key.split(".")))[1]):
            why = "holds free text (a path, a program or a host), which is never served"
        elif len(text := json.dumps(overrides[key])) > MAX_VALUE_CHARS:  # before anything parses it
            why = f"has a value {len(text):,} characters long (at most {MAX_VALUE_CHARS:,})"
        else:
            continue
        raise ServedRequestError(f"seed-pipeline/ui: override {key!r} {why}; {allowed}")
    if experiment_name and not SERVED_NAME.fullmatch(experiment_name):
        raise ServedRequestError(f"seed-pipeline/ui: experiment_name {experiment_name!r} is not a plain name "
                                 "(letters, digits, '_', '.', '-'; at most 100)")
    path = (root / preset).resolve()  # an absolute preset stays itself
    if path == (root / "params.yaml").resolve():
        return None
    presets = (root / "presets").resolve()
    if not (path.is_relative_to(presets) and path.suffix in (".yaml", ".yml") and path.is_file()):
        raise ServedRequestError(f"seed-pipeline/ui: preset {preset!r} is not a params file under {presets} "
                                 f"(or params.yaml); choose one of {sorted(p.name for p in presets.glob('*.yaml'))}")
    return path


def check_served_values(preset: Path | None, overrides: dict[str, Any]) -> None:
    """Refuse in one line, before the workspace is held, a served request whose values the config refuses (a bound
    of ``seed_core.config``: ``rl.rounds`` 10^9 or an infinite ``rl.lr`` would hold the only served slot)."""
    from seed_app.cli_base import one_line
    from seed_core.config import ConfigError

    try:
        load_config(preset or project_root() / "params.yaml", overrides or None, origin="override")
    except ConfigError as err:
        raise ServedRequestError(f"seed-pipeline/ui: {one_line(str(err))}") from None


@flow(name="seed-pipeline", log_prints=True)
def seed_pipeline(preset: str = "params.yaml", overrides: dict[str, Any] | None = None,
                  experiment_name: str = "") -> dict[str, float]:
    """Run the whole DVC pipeline as an experiment (the UI deployment's runs). A request is checked before
    anything runs (``check_served_request``): only ``SERVED_OVERRIDES`` keys and a preset under ``presets/``.

    Args:
        preset: ``params.yaml`` (the workspace values) or a file under ``presets/``, e.g.
            ``presets/alfworld-qwen2.5-3b.yaml``.
        overrides: dotted keys, e.g. ``{"rl.opd_coef": 0.02, "rl.gate_beta": 1.0}`` (``dvc exp run -S``); only
            numbers, booleans and named choices of ``SERVED_OVERRIDES`` (rl.*, sft.*, collect.*, eval.*, env.*,
            generation sampling, project.seed).
        experiment_name: DVC experiment name (empty: DVC picks one).
    """
    chosen = check_served_request(preset, overrides or {}, experiment_name)
    check_served_values(chosen, overrides or {})
    return run_pipeline(chosen, overrides or {}, experiment_name or None, experiment=True).metrics


def serve_deployment() -> None:
    """``seed serve``: register ``seed-pipeline/ui`` on the Prefect server and run what the UI triggers;
    ``global_limit=1``, because concurrent ``dvc exp run`` in one workspace corrupts results (pitfall 18)."""
    seed_pipeline.serve(name="ui", global_limit=1, tags=["seed"],
                        description="Versioned SEED pipeline run (dvc exp run) with a preset and overrides.")
