"""Stage 1 (``run_annotate``, ``annotate.client: openai``) against a real OpenAI-compatible server: vLLM
(CPU in CI) serving SmolLM2-135M-Instruct, reached through OPENAI_BASE_URL exactly as a user's endpoint
is, the project's openai client unchanged. The trajectories are real Sokoban rollouts (tiny model). The
small model's quality is what it is: the test requires an answer to every request and reports the parse rate
and the per-request latency; it does not grade the skills."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from seed_core.config import SeedConfig
from seed_core.runtime.io import read_records
from seed_core.loader import with_overrides
from seed_core.types import AnnotationRecord
from tests.vllm.conftest import report, vllm_server

pytestmark = pytest.mark.vllm
SERVED = "SmolLM2-135M-Instruct"
TASKS, GROUP = 4, 2


def _collect(model_dir: Path, out: Path, cfg: SeedConfig) -> int:
    """``TASKS`` x ``GROUP`` real Sokoban episodes of the tiny model (hf), written as the collect stage does."""
    from seed_core.envs import make_env
    from seed_core.runtime.io import write_records
    from seed_core.modeling.models import load_policy
    from seed_core.rollout.backends import BACKENDS
    from seed_core.rollout.collector import rollout
    from seed_core.data_gen.task_sets import write_tasks
    from seed_core.types import StepRecord

    tasks = make_env(cfg.env).make_tasks("train", TASKS, seed=3)
    backend = BACKENDS.get("hf")(load_policy(cfg.model.model_copy(update={"path": str(model_dir)})), cfg.generation)
    records = rollout(cfg.env, tasks, backend, group_size=GROUP, temperature=1.0, max_new_tokens=16, seed=3,
                      policy_version="base", progress=False)
    write_records(records, out / "trajectories.parquet", StepRecord)
    write_tasks(tasks, out / "tasks.json")
    return len({r.traj_id for r in records})


@pytest.mark.timeout(900)
def test_stage1_against_vllm_serving_smollm2(smollm2: Path, tiny_model_dir: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from seed_core.stages.annotate import run_annotate

    cfg = with_overrides(SeedConfig(), {
        "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 3, "annotate.client": "openai",
        "annotate.model": SERVED, "annotate.max_tokens": 192, "annotate.concurrency": TASKS * GROUP,
        "annotate.timeout_s": 300,
        "annotate.min_ok_fraction": 0.0, "annotate.fail_fast_after": 0})  # a 135M model: report, do not grade
    n = _collect(tiny_model_dir, tmp_path / "collect", cfg)
    with vllm_server(smollm2, SERVED, tmp_path / "logs") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server: the client's placeholder key
        metrics = run_annotate(cfg, tmp_path / "collect", tmp_path / "annotate")
    notes = read_records(tmp_path / "annotate" / "annotations.parquet", AnnotationRecord)
    per_request = [r.latency_s / max(r.attempts, 1) for r in notes]
    parse_rate = sum(r.ok for r in notes) / len(notes)
    report(f"stage 1 on vLLM-served {SERVED}: parse rate {sum(r.ok for r in notes)}/{len(notes)} = {parse_rate:.2f}, "
          f"{sum(r.attempts for r in notes)} requests, per-request latency median "
          f"{statistics.median(per_request):.2f} s "
          f"(min {min(per_request):.2f}, max {max(per_request):.2f}), completion tokens "
          f"{sum(r.completion_tokens for r in notes)}, failures {metrics.get('failure_reasons', {})}")
    assert len(notes) == n == TASKS * GROUP and metrics["annotate/trajectories"] == n
    assert all(r.model == SERVED and r.client == "openai" for r in notes)
    assert all(r.raw_output.strip() and r.completion_tokens > 0 for r in notes)  # every request was answered
    transport = ("APIConnectionError", "APITimeoutError", "InternalServerError", "BadRequestError", "NotFoundError")
    assert not [r.error for r in notes if r.error.startswith(transport)]  # failures, if any, are the model's
    assert all(0 < t < cfg.annotate.timeout_s for t in per_request)
