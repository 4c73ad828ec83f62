"""Glue shared by the stage flows: argument parsing with a clean config error, the data layout, and
the MLflow run of a stage tied to its Prefect flow run, its DVC lineage and the pipeline's parent run.

The methods compared by the pipeline live here once (``rl_algorithms``, ``eval_methods``: fixed baselines
plus ``rl.algorithm`` and its "*" row); ``dvc.yaml`` mirrors them with ``${rl.algorithm}`` in its ``foreach``
lists and ``tests/unit/test_params_consistency.py`` checks, through DVC itself, that it does for every
registered algorithm.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml
from prefect.client.orchestration import get_client
from prefect.runtime import flow_run
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings, temporary_settings
from prefect.settings.models.flows import FlowsSettings

from seed_core.algorithms import ALGORITHMS
from seed_core.config import ConfigError, SeedConfig, project_root
from seed_core.lineage.resume import RESUME_FILE, rl_fingerprint
from seed_core.loader import load_config, one_line_errors
from seed_core.methods import METHODS, star
from seed_core.runtime import timing
from seed_core.runtime.io import one_line
from seed_core.tracking import RunTracker, Tracker, open_run

RL_ALGORITHMS = ("grpo", "seed_static", "seed", "seed_no_sft", "seed_no_opd", "seed_static_library")
"""RL runs of every pipeline: the paper's GRPO baseline (from the base model), SEED-static and SEED (from the
Stage-1 checkpoint) and SEED's three ablations (paper Table 2); each starts where ``Algorithm.init`` says."""
EVAL_METHODS = ("vanilla", "sft", *RL_ALGORITHMS)
"""Methods every pipeline evaluates: the base model (``vanilla``), the Stage-1 SFT checkpoint, each RL result."""


def rl_algorithms(cfg: SeedConfig) -> tuple[str, ...]:
    """RL runs of the pipeline: ``RL_ALGORITHMS`` and ``rl.algorithm`` (``seed run -S rl.algorithm=sdar``)."""
    return tuple(dict.fromkeys((*RL_ALGORITHMS, cfg.rl.algorithm)))


def eval_methods(cfg: SeedConfig) -> tuple[str, ...]:
    """Evaluated methods: ``EVAL_METHODS``, ``rl.algorithm`` and its "*" row (evaluated with the static skill of
    each task's type in the prompt: Skill-GRPO* for ``rl.algorithm=skill_grpo``)."""
    return tuple(dict.fromkeys((*EVAL_METHODS, cfg.rl.algorithm, star(cfg.rl.algorithm))))


PARENT_RUN_VAR = "SEED_PARENT_RUN_ID"
"""Run-context variable (not configuration): the MLflow parent run that ``seed run`` / the served
deployment opened; DVC stage processes attach their runs to it (never ``MLFLOW_RUN_ID``, pitfall 15)."""
PIPELINE_FLOW_RUN_VAR = "SEED_PIPELINE_FLOW_RUN_ID"
"""Run-context variable: the Prefect flow run of ``seed run`` / the served deployment; each stage flow run
gets its tag (``pipeline_tag``), so the Prefect UI groups a pipeline run's stages."""
DVC_CONTEXT_VARS = ("DVC_STAGE", "DVC_EXP_NAME", "DVC_EXP_BASELINE_REV")
"""Set by DVC inside stage commands; copied onto the MLflow run as lowercase tags."""


@dataclass(frozen=True)
class StagePaths:
    """Where each stage writes (``dvc.yaml`` declares the same paths as outputs)."""

    data: Path
    reports: Path

    @property
    def base_model(self) -> Path:
        return self.data / "models" / "base"

    @property
    def collect(self) -> Path:
        return self.data / "collect"

    @property
    def annotate(self) -> Path:
        return self.data / "annotate"

    @property
    def sft(self) -> Path:
        return self.data / "sft"

    def rl(self, algorithm: str) -> Path:
        return self.data / "rl" / algorithm

    def init(self, algorithm: str) -> Path:
        """Where ``algorithm``'s RL run starts (``Algorithm.init``): the base model or the Stage-1 checkpoint."""
        init = ALGORITHMS.get(algorithm).init
        return {"base": self.base_model, "sft": self.sft / "checkpoint"}[init]

    def eval(self, method: str) -> Path:
        return self.data / "eval" / method

    def checkpoint(self, method: str) -> Path:
        """The policy a method evaluates: base model, Stage-1 checkpoint, or an RL result ("*" methods: their
        policy's)."""
        policy = METHODS.get(method).policy if method in METHODS else method
        fixed = {"vanilla": self.base_model, "sft": self.sft / "checkpoint"}
        return fixed.get(policy, self.rl(policy) / "checkpoint")


def stage_paths(cfg: SeedConfig) -> StagePaths:
    """``<root>/<project.data_dir>`` and ``reports/`` beside it (an absolute data_dir moves both, as tests do)."""
    data = project_root() / cfg.project.data_dir
    return StagePaths(data=data, reports=data.parent / "reports")


def dvc_lock_hashes(inputs: list[Path], root: Path | None = None) -> dict[str, str]:
    """``dvc.dep.<path>`` -> md5 recorded in ``dvc.lock`` for each input that an upstream stage produced."""
    return {f"dvc.dep.{rel}": md5 for rel, md5 in dvc_lock_md5s(inputs, root).items()}


def lock_out_md5s(lock_text: str) -> dict[str, str]:
    """Output path -> md5 of every stage's outs in the text of a ``dvc.lock`` (empty for an empty lock)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~5x faster than the pure-Python loader
    return {out["path"]: str(out.get("md5", ""))
            for stage in (yaml.load(lock_text, Loader=loader) or {}).get("stages", {}).values()
            for out in stage.get("outs", [])}


def dvc_lock_md5s(inputs: list[Path], root: Path | None = None) -> dict[str, str]:
    """Project-relative path -> md5 recorded in ``dvc.lock`` for each input that an upstream stage produced.

    DVC rewrites the lock after each stage, so an upstream output's hash is current when a downstream
    stage runs (stack-notes §5.2). Inputs DVC has not recorded (in-process runs) are left out.
    """
    root = root or project_root()
    lock_path = root / "dvc.lock"
    if not lock_path.is_file():
        return {}
    recorded = lock_out_md5s(lock_path.read_text())
    rels = [Path(os.path.relpath(Path(p).resolve(), root.resolve())).as_posix() for p in inputs]
    return {rel: recorded[rel] for rel in rels if rel in recorded}


def parse_args(stage: str, *options: str) -> argparse.Namespace:
    """``--params`` (+ the given ``--option``s); a malformed config stops here, before any work."""
    timing.mark("imports_done")  # called from a stage module's ``__main__``: its imports are done
    parser = argparse.ArgumentParser(prog=f"python -m flows.{stage}")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"), help="params.yaml or a preset")
    choices = {"method": METHODS.names(), "algorithm": ALGORITHMS.names()}
    for option in options:
        parser.add_argument(f"--{option}", required=True, choices=choices[option])
    args = parser.parse_args()
    try:
        load_config(args.params)
    except ConfigError as err:
        sys.exit(f"seed: {err}")
    one_line_errors(stage)  # an error whose message names its fix (a full disk, bad weights): one line at the end
    logging.getLogger("prefect.flow_runs").addFilter(_known_error_without_traceback)
    logging.getLogger("prefect.task_runs").addFilter(_known_error_without_traceback)
    timing.mark("config_loaded")  # validation imports the registries (torch, which the engine needs anyway)

    _PROCESS_SETTINGS.enter_context(temporary_settings(flow_run_settings()))  # for the rest of this stage process
    return args


def _known_error_without_traceback(record: logging.LogRecord) -> bool:
    """A Prefect log line of a failed task or flow run keeps its message (which names the error and its fix,
    ``seed_core.runtime.io.one_line``) but not the traceback, for the errors users meet (not for bugs)."""
    err = record.exc_info[1] if isinstance(record.exc_info, tuple) else None
    if err is not None and one_line(err) is not None:
        record.exc_info, record.exc_text = None, None
    return True


_PROCESS_SETTINGS = contextlib.ExitStack()
HEARTBEAT_VARS = ("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "PREFECT_RUNNER_HEARTBEAT_FREQUENCY")


def flow_run_settings() -> dict[Any, Any]:
    """Prefect settings for seed's flow runs (stage flows, ``seed run``'s pipeline flow): no flow-run heartbeats
    unless the user chose a frequency (one of ``HEARTBEAT_VARS``, or a profile value other than Prefect's default).

    Why: when a flow run ends, Prefect's sync engine joins its heartbeat thread, which sleeps in 1-s steps, so
    every stage process spent ~0.8 s at its end waiting (measured; ~12 s over the default's 15 stages).
    Heartbeats only matter to a zombie-flow automation on the server (Prefect's "detect zombie flows"), which
    seed does not create; a user who adds one sets ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` and gets them back.
    """
    chosen = get_current_settings().flows.heartbeat_frequency
    if any(os.environ.get(var) for var in HEARTBEAT_VARS) or \
            chosen != FlowsSettings.model_fields["heartbeat_frequency"].default:
        return {}
    return {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}


@contextlib.contextmanager
def stage_run(cfg: SeedConfig, name: str, prefix: str, inputs: list[Path],
              parent_run_id: str | None = None) -> Iterator[RunTracker]:
    """The stage's MLflow run: child of the pipeline run, tagged with its Prefect flow run and DVC lineage,
    its DVC-tracked inputs as MLflow dataset inputs, with system metrics while it runs."""
    timing.mark("flow_body")
    md5s = dvc_lock_md5s(inputs)
    tags: dict[str, Any] = {"stage": name, "prefect.flow_run_id": flow_run.id or "",
                            **{v.lower(): os.environ[v] for v in DVC_CONTEXT_VARS if os.environ.get(v)},
                            **{f"dvc.dep.{rel}": md5 for rel, md5 in md5s.items()}}
    pipeline_run = join_pipeline_run()
    if pipeline_run:
        tags["prefect.pipeline_flow_run_id"] = pipeline_run
    parent = parent_run_id or os.environ.get(PARENT_RUN_VAR)
    with timing.span("mlflow"), open_run(cfg, name, parent_run_id=parent, prefix=prefix, tags=tags,
                                         system_metrics=True) as tracker:
        tracker.log_data_inputs(md5s)
        with timing.span("flow_body"):  # exclusive: the "mlflow" span is opening and closing the run
            yield tracker
    timing.mark("stage_run_end")


def join_pipeline_run() -> str | None:
    """Tag the current flow run with the tag of the pipeline run it belongs to (``SEED_PIPELINE_FLOW_RUN_ID``,
    set by ``seed run``), so the Prefect UI groups them; returns that pipeline flow run's id (None: none)."""
    pipeline_run = os.environ.get(PIPELINE_FLOW_RUN_VAR)
    if not (pipeline_run and flow_run.id):
        return None
    if pipeline_tag(pipeline_run) in flow_run.tags:  # created with it (``flows.stage_graph.run_stage``)
        return pipeline_run
    with timing.span("prefect"):
        add_flow_run_tags(flow_run.id, [pipeline_tag(pipeline_run)])
    return pipeline_run


def pipeline_tag(flow_run_id: str) -> str:
    """Prefect tag shared by a pipeline flow run and its stage flow runs (filter the Flow Runs page by it)."""
    return f"seed-run:{flow_run_id[:8]}"


def add_flow_run_tags(flow_run_id: str, tags: list[str]) -> None:
    """Add ``tags`` to an existing flow run (a DVC stage's run is created before it knows its pipeline)."""
    with get_client(sync_client=True) as client:
        current = client.read_flow_run(flow_run_id).tags
        client.update_flow_run(flow_run_id, tags=[*current, *(t for t in tags if t not in current)])


def model_tags(cfg: SeedConfig, algorithm: str) -> dict[str, Any]:
    """Tags of a registered checkpoint (version and model): what made it."""
    return {"algorithm": algorithm, "env": cfg.env.name, "seed": cfg.project.seed, "preset": cfg.project.preset,
            "base_model": cfg.model.path}


def model_name(cfg: SeedConfig, method: str) -> str:
    """Registered model of a method's checkpoint: ``seed-<env>-<method>`` (sft, each RL algorithm)."""
    return f"seed-{cfg.env.name}-{method}"


def finish(tracker: Tracker, out_dir: Path, metrics: dict[str, float]) -> dict[str, float]:
    """Log the stage's summary metrics and its resolved config and metrics files (written by the stage)."""
    tracker.log_metrics(metrics)
    for name in ("resolved_config.json", "metrics.json"):
        if (out_dir / name).is_file():
            tracker.log_artifact(out_dir / name)
    return metrics


def resume_key(cfg: SeedConfig, init_checkpoint: Path) -> str:
    """What finished RL rounds depend on (``seed_core.lineage.resume.rl_fingerprint``; the engine checks it too)."""
    return rl_fingerprint(cfg, init_checkpoint)


def reset_stale_rounds(out_dir: Path, key: str) -> None:
    """Keep finished rounds only if they were made from the same config and checkpoint; else start over.

    The round directories are not DVC outputs (DVC would delete them before a rerun), so a killed RL
    stage resumes from its last DONE round; this guard stops a changed config from reusing them.
    """
    marker = out_dir / RESUME_FILE
    if out_dir.exists() and (not marker.is_file() or marker.read_text() != key):
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(key)
