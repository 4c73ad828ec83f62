"""Experiment tracking behind one small protocol; the only seed_core module allowed to import mlflow.

Engine code receives a ``Tracker`` and calls ``log_metrics``; ``NullTracker`` is the default so the
engine runs without MLflow (tests, ``python -m seed_core.<stage>`` without tracking).
``MlflowTracker`` logs to one MLflow run through the client API (no fluent global state, so it is
safe in Prefect's worker threads). Run hierarchy (DESIGN §9): one parent run per pipeline run
(``pipeline_run``), one child per stage (``stage_run``) and one grandchild per RL round. Params are
the flattened config with secret values redacted; metrics are keyed ``stage/name`` with a step.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Iterator, Protocol

import yaml

from seed_core.config import SECRET_VARS, SeedConfig, endpoint_env, flatten, project_root


class Tracker(Protocol):
    run_id: str | None

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None: ...

    def log_params(self, params: dict[str, Any]) -> None: ...

    def log_artifact(self, path: str | Path) -> None: ...

    def log_table(self, table: Any, artifact_file: str) -> None: ...

    def log_figure(self, figure: Any, artifact_file: str) -> None: ...


class NullTracker:
    """Discards everything (but keeps the last metrics, handy in tests)."""

    run_id: str | None = None

    def __init__(self) -> None:
        self.history: list[tuple[int | None, dict[str, float]]] = []

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.history.append((step, dict(metrics)))

    def log_params(self, params: dict[str, Any]) -> None:
        pass

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        pass

    def log_table(self, table: Any, artifact_file: str) -> None:
        pass

    def log_figure(self, figure: Any, artifact_file: str) -> None:
        pass

    def set_tags(self, tags: dict[str, Any]) -> None:
        pass

    def register_checkpoint(self, checkpoint: Path, name: str) -> str:
        return ""


def tracking_uri() -> str:
    """$MLFLOW_TRACKING_URI, else an absolute sqlite file in the project (never cwd-relative, pitfall 12)."""
    return endpoint_env("MLFLOW_TRACKING_URI") or f"sqlite:///{project_root() / 'mlflow.db'}"


def artifact_location(uri: str) -> str | None:
    """Artifacts beside a sqlite store (``<db dir>/mlartifacts``); a server decides for itself."""
    if not uri.startswith("sqlite:///"):
        return None
    return (Path(uri.removeprefix("sqlite:///")).parent / "mlartifacts").resolve().as_uri()


def redact(values: dict[str, Any]) -> dict[str, str]:
    """Stringify values for MLflow and replace any that contain a secret (e.g. the API key) by ``***``."""
    secrets = [s for s in (endpoint_env(name) for name in SECRET_VARS) if s]
    out: dict[str, str] = {}
    for key, value in values.items():
        text = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
        out[key] = "***" if any(s in text for s in secrets) else text[:6000]
    return out


def git_commit(root: Path | None = None) -> str:
    """HEAD of the checkout (``unknown`` outside git)."""
    proc = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root or project_root(),
                          capture_output=True, text=True, check=False)
    return proc.stdout.strip() if proc.returncode == 0 else "unknown"


def dvc_lock_hashes(inputs: list[Path], root: Path | None = None) -> dict[str, str]:
    """``dvc.dep.<path>`` -> md5 recorded in ``dvc.lock`` for each input that an upstream stage produced.

    DVC rewrites the lock after each stage, so an upstream output's hash is current when a downstream
    stage runs (stack-notes §5.2). Inputs DVC has not recorded (in-process runs) are left out.
    """
    root = root or project_root()
    lock_path = root / "dvc.lock"
    if not lock_path.is_file():
        return {}
    recorded: dict[str, str] = {}
    for stage in (yaml.safe_load(lock_path.read_text()) or {}).get("stages", {}).values():
        for out in stage.get("outs", []):
            recorded[out["path"]] = str(out.get("md5", ""))
    rels = [Path(os.path.relpath(Path(p).resolve(), root.resolve())).as_posix() for p in inputs]
    return {f"dvc.dep.{rel}": recorded[rel] for rel in rels if rel in recorded}


class MlflowTracker:
    """A ``Tracker`` bound to one open MLflow run; bare metric keys get the ``prefix/`` namespace."""

    def __init__(self, client: Any, run_id: str, prefix: str = "") -> None:
        self.client = client
        self.run_id = run_id
        self.prefix = prefix

    def _key(self, name: str) -> str:
        return name if "/" in name or not self.prefix else f"{self.prefix}/{name}"

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        from mlflow.entities import Metric
        from mlflow.utils.time import get_current_time_millis

        now = get_current_time_millis()
        batch = [Metric(self._key(k), float(v), now, step or 0) for k, v in metrics.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)]
        for start in range(0, len(batch), 1000):
            self.client.log_batch(self.run_id, metrics=batch[start:start + 1000])

    def log_params(self, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, v) for k, v in redact(params).items()]
        for start in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[start:start + 100])

    def set_tags(self, tags: dict[str, Any]) -> None:
        for key, value in redact(tags).items():
            self.client.set_tag(self.run_id, key, value)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), artifact_path)
        else:
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_table(self, table: Any, artifact_file: str) -> None:
        """A pandas DataFrame as an MLflow table artifact (``*.json``: the run's Artifacts view and the
        Evaluation/compare views render it as a table)."""
        self.client.log_table(self.run_id, table, artifact_file)

    def log_figure(self, figure: Any, artifact_file: str) -> None:
        """A matplotlib figure as an image artifact (``*.png``), shown inline in the run's Artifacts view."""
        self.client.log_figure(self.run_id, figure, artifact_file)

    def register_checkpoint(self, checkpoint: Path, name: str) -> str:
        """Log an HF checkpoint dir as run artifacts and register it as a new version of model ``name``.

        A plain artifact round-trips exactly and needs no flavor (the transformers flavor wants
        torchvision offline, pitfall 11); load it with ``download_artifacts("models:/<name>/<v>")``.
        """
        from mlflow.exceptions import MlflowException

        self.log_artifact(checkpoint, "checkpoint")
        with contextlib.suppress(MlflowException):
            self.client.create_registered_model(name)
        source = f"{self.client.get_run(self.run_id).info.artifact_uri}/checkpoint"
        version = self.client.create_model_version(name, source=source, run_id=self.run_id)
        return str(version.version)


RunTracker = MlflowTracker | NullTracker
"""What ``open_run`` yields: a Tracker that can also tag runs and register checkpoints."""


@functools.cache
def _client(uri: str) -> Any:
    """One client per store and process: each new client re-opens (and re-checks) the sqlite schema (~1 s)."""
    import mlflow

    return mlflow.MlflowClient(tracking_uri=uri)


def _client_and_experiment(name: str) -> tuple[Any, str]:
    uri = tracking_uri()
    client = _client(uri)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return client, exp.experiment_id
    return client, client.create_experiment(name, artifact_location=artifact_location(uri))


@contextlib.contextmanager
def open_run(cfg: SeedConfig, name: str, *, parent_run_id: str | None = None, prefix: str = "",
             tags: dict[str, Any] | None = None, log_config: bool = True) -> Iterator[RunTracker]:
    """Open one MLflow run (child of ``parent_run_id`` when given) and close it FINISHED or FAILED.

    Yields a ``NullTracker`` when ``cfg.tracking.enabled`` is false.
    """
    if not cfg.tracking.enabled:
        yield NullTracker()
        return
    client, experiment_id = _client_and_experiment(cfg.tracking.experiment)
    run_tags = {"mlflow.source.git.commit": git_commit(), "preset": cfg.project.preset, **(tags or {})}
    if parent_run_id:
        run_tags["mlflow.parentRunId"] = parent_run_id
    run = client.create_run(experiment_id, run_name=name, tags=redact(run_tags))
    tracker = MlflowTracker(client, run.info.run_id, prefix)
    status = "FAILED"
    try:
        if log_config:
            tracker.log_params(flatten(cfg))
            tracker.set_tags({"config_sha256": config_hash(cfg)})
        yield tracker
        status = "FINISHED"
    finally:
        client.set_terminated(run.info.run_id, status=status)


def config_hash(cfg: SeedConfig) -> str:
    """Short sha256 of the resolved config (a tag to group runs with identical settings)."""
    text = json.dumps(cfg.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
