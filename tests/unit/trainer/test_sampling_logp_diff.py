"""The weight-sync monitor ``rollout/sampling_logp_diff_mean`` / ``_max`` (TRL's sampling_logp_difference):
|engine log-prob of each sampled token - trainer log-prob under theta_old|, the same on the single-step path
(theta_old = the update's own first forward) and the old-pass path, and the round check on it."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from seed_core.algorithms import ALGORITHMS
from seed_core.config import RLConfig, SeedConfig
from seed_core.runtime.io import one_line
from seed_core.loader import with_overrides
from seed_core.stages.weight_sync import DIFF_MAX, DIFF_MEAN, StaleEngineWeightsError, check_weight_sync
from seed_core.trainer.logprobs import score_in_chunks
from seed_core.trainer.rl_step import RLSamples, rl_update

PROMPTS = [[10, 11, 12], [13, 14], [15, 16, 17, 18], [19, 20]]
RESPONSES = [[40, 41, 42], [43], [44, 45], [46, 47, 48, 49]]


def _samples(model, pad_id: int, offsets: list[float]) -> RLSamples:
    """Samples whose engine log-probs are theta's own plus ``offsets[i]`` on every token of row i."""
    exact = score_in_chunks(model, PROMPTS, RESPONSES, pad_id, 8)
    return RLSamples(prompt_ids=PROMPTS, response_ids=RESPONSES, teacher_prompt_ids=[None] * 4,
                     group_ids=["g0", "g0", "g1", "g1"], scores=torch.tensor([1.0, 0.0, 1.0, 0.0]),
                     sampling_logprobs=[[float(x) + off for x in lp] for lp, off in zip(exact, offsets)])


@pytest.mark.parametrize("mini_batch_size", [8, 2], ids=["single-step", "old-pass"])
def test_diff_is_the_engine_minus_theta_old_on_both_paths(tiny_policy, mini_batch_size: int) -> None:
    model, pad = tiny_policy.model, tiny_policy.tokenizer.pad_token_id
    offsets = [0.0, 0.5, -0.25, 0.0]
    samples = _samples(model, pad, offsets)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)  # the update moves theta: the diff must use theta_old
    cfg = RLConfig(mini_batch_size=mini_batch_size, micro_batch_size=1, kl_coef=0.0)
    m = rl_update(model, opt, samples, cfg=cfg, algorithm=ALGORITHMS.get("grpo"), pad_id=pad)
    assert m["rl/optimizer_steps"] == (1.0 if mini_batch_size == 8 else 2.0)
    tokens = [len(r) for r in RESPONSES]
    expected = sum(abs(o) * n for o, n in zip(offsets, tokens)) / sum(tokens)
    assert m[DIFF_MEAN] == pytest.approx(expected, abs=1e-5)
    assert m[DIFF_MAX] == pytest.approx(0.5, abs=1e-5)


def test_exact_engine_gives_zero_and_missing_logprobs_give_no_metric(tiny_policy) -> None:
    model, pad = tiny_policy.model, tiny_policy.tokenizer.pad_token_id
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    cfg = RLConfig(mini_batch_size=8, micro_batch_size=2, kl_coef=0.0)
    m = rl_update(model, opt, _samples(model, pad, [0.0] * 4), cfg=cfg, algorithm=ALGORITHMS.get("grpo"), pad_id=pad)
    assert m[DIFF_MEAN] < 1e-5 and m[DIFF_MAX] < 1e-5
    unknown = dataclasses.replace(_samples(model, pad, [0.0] * 4), sampling_logprobs=None)
    m = rl_update(model, opt, unknown, cfg=cfg, algorithm=ALGORITHMS.get("grpo"), pad_id=pad)
    assert DIFF_MEAN not in m and DIFF_MAX not in m


def _cfg(**overrides: object) -> SeedConfig:
    return with_overrides(SeedConfig(), {"rl.max_sampling_logp_diff": 0.1, **overrides})


def test_check_fails_a_stale_round_in_one_line_naming_the_fix() -> None:
    check_weight_sync(_cfg(), {DIFF_MEAN: 0.05, DIFF_MAX: 3.0}, 2)  # within the limit
    check_weight_sync(_cfg(), {}, 2)  # no engine log-probs: nothing to check
    for backend in ("hf", "vllm"):
        with pytest.raises(StaleEngineWeightsError) as err:
            check_weight_sync(_cfg(**{"generation.backend": backend}), {DIFF_MEAN: 0.2, DIFF_MAX: 4.0}, 3)
        message = str(err.value)
        assert "\n" not in message and "round 3: stale engine weights" in message
        assert "rl.max_sampling_logp_diff = 0.1" in message and "0.2" in message
    assert "VLLM_SERVER_DEV_MODE=1" in message  # the vLLM fix
    assert one_line(err.value) == message  # a known error: the stage CLI and the flows print it, no traceback
    with pytest.raises(StaleEngineWeightsError):
        check_weight_sync(_cfg(), {DIFF_MEAN: math.nan}, 0)


def test_check_is_off_at_zero_and_skipped_where_the_engine_reports_another_distribution() -> None:
    check_weight_sync(_cfg(**{"rl.max_sampling_logp_diff": 0.0}), {DIFF_MEAN: 5.0}, 0)
    for tempered in ({"generation.temperature": 0.7}, {"generation.top_k": 20}, {"generation.top_p": 0.9}):
        check_weight_sync(_cfg(**tempered), {DIFF_MEAN: 5.0}, 0)
