"""Two SEED rounds with rollouts and self-analysis on a real vLLM engine (tiny model): the engine follows
the policy from round to round (round 1 samples from round 0's checkpoint), and the trainer re-scores
exactly the ids the engine sampled. Runs only with ``SEED_VLLM_PYTHON`` (see test_vllm_real.py)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch

from seed_core.config import SeedConfig
from seed_core.loader import with_overrides

VLLM_PYTHON = os.environ.get("SEED_VLLM_PYTHON", "")
pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(not (VLLM_PYTHON and Path(VLLM_PYTHON).is_file()),
                       reason="set SEED_VLLM_PYTHON to a vLLM environment's python (scripts/setup_vllm.sh [--cpu])"),
]


@pytest.mark.timeout(900)
def test_seed_rounds_on_vllm_follow_the_policy(tmp_path):
    from seed_core.io import read_records
    from seed_core.stages.rl import run_rl_round
    from seed_core.rollout.vllm_engine import POOL
    from seed_core.model_builders import build_tiny_analyzer_model
    from seed_core.types import StepRecord

    model = build_tiny_analyzer_model(tmp_path / "analyzer")
    cpu = not torch.cuda.is_available()
    cfg = with_overrides(SeedConfig(), {
        "model.path": str(model), "model.device": "cpu" if cpu else "cuda", "env.name": "sokoban",
        "env.max_steps": 2, "rl.algorithm": "seed", "rl.tasks_per_round": 2, "rl.group_size": 2, "rl.lr": 1e-3,
        "rl.mini_batch_size": 8, "rl.micro_batch_size": 8, "rl.save_every": 1, "generation.max_new_tokens": 12,
        "generation.max_prompt_tokens": 256, "rl.analyzer_max_new_tokens": 16, "generation.backend": "vllm",
        "generation.vllm.python": VLLM_PYTHON, "generation.vllm.dtype": "float32",
        "generation.vllm.max_model_len": 1024, "generation.vllm.extra_args": ["--enforce-eager"] if cpu else []})
    try:
        m0 = run_rl_round(cfg, 0, model, tmp_path / "rl")
        m1 = run_rl_round(cfg, 1, model, tmp_path / "rl")
        sources = {e.source for g in POOL._groups.values() for e in g.engines}
    finally:
        POOL.stop_all()
    for m in (m0, m1):
        assert all(math.isfinite(v) for v in m.values()), m
        assert m["analysis/parse_ok_rate"] > 0 and m["rl/optimizer_steps"] >= 1
    # the engine ended on round 0's checkpoint: round 1's rollouts and self-analysis used the updated policy
    assert (tmp_path / "rl" / "round_000" / "checkpoint").resolve() in sources
    records = read_records(tmp_path / "rl" / "round_001" / "trajectories.parquet", StepRecord)
    assert records and all(r.policy_version == "seed/round_001" for r in records)
