"""Experiment tracking behind one small protocol; with ``seed_core.tracing``, the only seed_core modules that import
mlflow.

Engine code receives a ``Tracker`` and calls ``log_metrics``; ``NullTracker`` is the default so the
engine runs without MLflow (tests, ``python -m seed_core.<stage>`` without tracking).
``MlflowTracker`` logs to one MLflow run through the client API (no fluent global state, so it is
safe in Prefect's worker threads). Run hierarchy (DESIGN §9): one parent run per pipeline run
(``pipeline_run``), one child per stage (``stage_run``) and one grandchild per RL round. Params are
the flattened config with secret values redacted, plus the CPU numerics the process runs under (``numerics.*``,
``seed_core.repro.numerics``); metrics are keyed ``stage/name`` with a step.

The experiment is typed model training (``TRAINING_KIND``). The registered prompts a run sends and the traces of
its LLM calls are ``seed_core.tracing``'s.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any, Iterator, Protocol
from urllib.parse import unquote, urlparse

from seed_core.config import SECRET_VARS, SeedConfig, endpoint_env, flatten, project_root
from seed_core.repro.numerics import mlflow_params as numerics_params


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

    def register_checkpoint(self, checkpoint: Path, name: str, tags: dict[str, Any] | None = None,
                            flavor: str = "transformers") -> str:
        return ""

    def log_data_inputs(self, md5s: dict[str, str], root: Path | None = None) -> None:
        pass

    def record_evaluation(self, name: str, metrics: dict[str, float], md5: str | None = None,
                          metric: str = "eval/success_rate") -> str | None:
        return None


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

    def log_data_inputs(self, md5s: dict[str, str], root: Path | None = None) -> None:
        """The stage's input data as MLflow dataset inputs (the run's Inputs / Datasets used): one per
        DVC-tracked path, its digest the md5 DVC recorded, so runs on identical data share a dataset."""
        from mlflow.data.meta_dataset import MetaDataset
        from mlflow.data.sources import LocalArtifactDatasetSource
        from mlflow.entities import DatasetInput, InputTag

        root = root or project_root()
        datasets = [DatasetInput(MetaDataset(LocalArtifactDatasetSource(str(root / rel)), name=rel,
                                             digest=md5[:36])._to_mlflow_entity(),
                                 tags=[InputTag("mlflow.data.context", "input"), InputTag("dvc.md5", md5)])
                    for rel, md5 in md5s.items()]
        if datasets:
            self.client.log_inputs(self.run_id, datasets=datasets)

    def register_checkpoint(self, checkpoint: Path, name: str, tags: dict[str, Any] | None = None,
                            flavor: str = "transformers") -> str:
        """Log an HF checkpoint dir, register it as a new version of model ``name`` with ``tags`` (algorithm, env,
        seed) on the version and the model, and point the ``newest`` alias at it (MLflow reserves ``latest``).
        ``flavor="transformers"``: an MLflow transformers model (``log_transformers_model``): ``mlflow.transformers.
        load_model("models:/<name>@newest")`` gives a text-generation pipeline. ``"files"``: the checkpoint dir
        as plain artifacts (``download_artifacts`` + ``from_pretrained``), hard-linked if local (``link_artifacts``)."""
        from mlflow.exceptions import MlflowException

        if flavor not in MODEL_FLAVORS:
            raise ValueError(f"model flavor {flavor!r} is not one of {MODEL_FLAVORS}")
        artifact = "model" if flavor == "transformers" else "checkpoint"
        if flavor == "transformers":
            self.log_transformers_model(checkpoint, artifact)  # MLflow re-saves the weights: one copy
        elif not link_artifacts(checkpoint, self.client.get_run(self.run_id).info.artifact_uri, artifact):
            self.log_artifact(checkpoint, artifact)  # another filesystem or a remote store: a copy
        with contextlib.suppress(MlflowException):
            self.client.create_registered_model(name)
        source = f"{self.client.get_run(self.run_id).info.artifact_uri}/{artifact}"
        version = str(self.client.create_model_version(name, source=source, run_id=self.run_id,
                                                       tags=redact(tags or {})).version)
        for key, value in redact(tags or {}).items():
            self.client.set_registered_model_tag(name, key, value)
        self.client.set_registered_model_alias(name, NEWEST, version)
        return version

    def log_transformers_model(self, checkpoint: Path, artifact_path: str = "model") -> None:
        """The checkpoint as an MLflow ``transformers`` model (text-generation) under ``artifact_path``: ``MLmodel``,
        weights and config in ``model/`` (a plain HF dir), the tokenizer in ``components/tokenizer``. MLflow copies
        the weights (a full model cannot be stored by reference, and its local-checkpoint path fails on transformers
        5, so the model is loaded on CPU and saved again): one copy per registered version (4.2 MB testbed, ~0.5 GB
        SmolLM2-135M fp32). Requirements pinned to the installed versions: MLflow's inferred ones add torchvision,
        which does not install next to the CPU torch wheel (stack-notes pitfall 11)."""
        import mlflow.transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(checkpoint)
        tokenizer = AutoTokenizer.from_pretrained(checkpoint)
        requirements = [f"{p}=={version(p)}" for p in ("transformers", "torch", "accelerate")]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / artifact_path
            mlflow.transformers.save_model({"model": model, "tokenizer": tokenizer}, str(path),
                                           task="text-generation", pip_requirements=requirements)
            self.client.log_artifacts(self.run_id, str(path), artifact_path)

    def record_evaluation(self, name: str, metrics: dict[str, float], md5: str | None = None,
                          metric: str = "eval/success_rate") -> str | None:
        """Tag the evaluated version of model ``name`` (its ``newest``) with ``metric`` and move the ``best-<metric
        name>`` alias to it when it beats the current best. Returns the version (None: no such model, no metric, or
        ``newest`` is another checkpoint than the DVC ``md5`` evaluated). The first evaluation with a DVC hash claims
        the version (tag ``dvc.md5``); a later one with another hash (an RL stage restored from DVC's cache while
        another run registered since) is not recorded on it."""
        from mlflow.exceptions import MlflowException

        if metric not in metrics:
            return None
        try:
            version = self.client.get_model_version_by_alias(name, NEWEST)
        except MlflowException:
            return None
        claimed = version.tags.get("dvc.md5")
        if md5 and claimed and claimed != md5:
            return None
        if md5 and not claimed:
            self.client.set_model_version_tag(name, version.version, "dvc.md5", md5)
        value = float(metrics[metric])
        self.client.set_model_version_tag(name, version.version, metric, str(value))
        self.client.set_model_version_tag(name, version.version, "eval_run_id", self.run_id)
        alias = f"best-{metric.rsplit('/', 1)[-1]}"
        try:
            best = self.client.get_model_version_by_alias(name, alias)
            best_value = float(best.tags.get(metric, "-inf"))
        except MlflowException:
            best, best_value = None, float("-inf")
        if best is None or best.version == version.version or value > best_value:
            self.client.set_registered_model_alias(name, alias, version.version)
        return str(version.version)


MODEL_FLAVORS = ("transformers", "files")
"""How ``register_checkpoint`` logs a checkpoint (config ``tracking.model_flavor``)."""


def link_artifacts(src: Path, artifact_uri: str, artifact_path: str) -> bool:
    """Hard-link the files of directory ``src`` into a local (``file://``) artifact store: the run's artifacts and
    the checkpoint share their bytes (a 135M checkpoint is ~0.5 GB). The links stay valid when DVC later replaces the
    workspace output (it unlinks and writes new files, never edits in place). False (nothing left behind) when the
    store is not local or the link fails (another filesystem): the caller copies."""
    parsed = urlparse(artifact_uri)
    if parsed.scheme != "file" or not Path(src).is_dir():
        return False
    dest = Path(unquote(parsed.path)) / artifact_path
    try:
        for file in sorted(p for p in Path(src).rglob("*") if p.is_file()):
            target = dest / file.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(file, target)
    except OSError:
        shutil.rmtree(dest, ignore_errors=True)
        return False
    return True


NEWEST = "newest"
"""Alias of the most recently registered version of a model (MLflow reserves ``latest``)."""

RunTracker = MlflowTracker | NullTracker
"""What ``open_run`` yields: a Tracker that can also tag runs and register checkpoints."""


@functools.cache
def _client(uri: str) -> Any:
    """One client per store and process (a new client re-checks the sqlite schema, ~1 s), its store made first.

    MLflow creates and migrates a sqlite store on its first open, with no lock of its own: processes that open a
    new store at once all run the migrations, the losers fail, and the ``_alembic_tmp_*`` tables they leave break
    every later open (3 processes on a new store: 2-3 of 3 failed, MLflow 3.17.2 and 3.18.0; stop 46's CI: a test
    and a stage process, 5 failures and 24 errors). So a sqlite store is first opened under a lock beside it."""
    import mlflow
    from filelock import FileLock

    if not uri.startswith("sqlite:///"):
        return mlflow.MlflowClient(tracking_uri=uri)
    with FileLock(f"{uri.removeprefix('sqlite:///')}.lock"):  # the client opens (and migrates) the store
        return mlflow.MlflowClient(tracking_uri=uri)


def store_client(uri: str | None = None) -> Any:
    """The client of the MLflow store at ``uri`` (default ``tracking_uri()``), the store created and migrated."""
    return _client(uri or tracking_uri())


EXPERIMENT_KIND = "mlflow.experimentKind"
TRAINING_KIND = "custom_model_development"
"""The experiment tag by which MLflow 3 types an experiment (``genai_development`` opens on the GenAI overview and
traces, ``custom_model_development`` on the runs). Set on creation, and on an existing experiment without one."""


def _client_and_experiment(name: str) -> tuple[Any, str]:
    uri = tracking_uri()
    client = _client(uri)
    exp = client.get_experiment_by_name(name)
    if exp is None:
        return client, client.create_experiment(name, artifact_location=artifact_location(uri),
                                                tags={EXPERIMENT_KIND: TRAINING_KIND})
    if EXPERIMENT_KIND not in exp.tags:
        client.set_experiment_tag(exp.experiment_id, EXPERIMENT_KIND, TRAINING_KIND)
    return client, exp.experiment_id


@contextlib.contextmanager
def open_run(cfg: SeedConfig, name: str, *, parent_run_id: str | None = None, prefix: str = "",
             tags: dict[str, Any] | None = None, log_config: bool = True,
             system_metrics: bool = False) -> Iterator[RunTracker]:
    """Open one MLflow run (child of ``parent_run_id`` when given) and close it FINISHED or FAILED;
    ``system_metrics``: sample CPU, memory, disk, network (and GPU) into ``system/...`` while it is open.

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
    monitor = SystemMetrics(run.info.run_id, tracking_uri()) if system_metrics else None
    status = "FAILED"
    try:
        if log_config:
            tracker.log_params(flatten(cfg) | numerics_params())  # the config and the CPU numerics it ran under
            tracker.set_tags({"config_sha256": config_hash(cfg)})
        yield tracker
        status = "FINISHED"
    finally:
        if monitor is not None:
            monitor.finish()
        client.set_terminated(run.info.run_id, status=status)


SYSTEM_METRICS_INTERVAL_S = 10.0
"""Seconds between system-metric samples (MLflow's default; $MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL wins)."""


def SystemMetrics(run_id: str, uri: str) -> Any:  # noqa: N802 (a class made on first use: mlflow is lazy here)
    """MLflow's ``SystemMetricsMonitor`` (psutil; GPU via pynvml when present), started on ``run_id``, whose
    ``finish`` also logs the samples taken since the last logged step, so a stage shorter than the
    sampling interval still gets one point."""
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    class _Monitor(SystemMetricsMonitor):
        def finish(self) -> None:
            if self._process is None:
                return
            self._shutdown_event.set()
            self._process.join()
            self._process = None
            if any(monitor._metrics for monitor in self.monitors):
                self.publish_metrics(self.aggregate_metrics())
            self.mlflow_logger.flush()

    monitor = _Monitor(run_id, sampling_interval=SYSTEM_METRICS_INTERVAL_S, tracking_uri=uri)
    monitor.start()
    return monitor


def config_hash(cfg: SeedConfig) -> str:
    """Short sha256 of the resolved config (a tag to group runs with identical settings)."""
    text = json.dumps(cfg.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
