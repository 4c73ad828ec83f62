"""Shared-prefix scoring and update (issue 42): each distinct prompt computed once, against the unshared path.

The unshared path (``response_logprobs`` over packed rows) is the reference; the tolerances are the measured float
differences (``benchmarks/results/shared_prefix_exactness.json``), far below any row-swap error: rows that read
another row's prompt differ by > 0.01 nats on the tiny model (checked in ``test_each_row_reads_its_own_prompt``).
"""

import copy

import pytest
import torch

from seed_core.algorithms import ALGORITHMS
from seed_core.config import GenerationConfig, RLConfig
from seed_core.rollout.backends import HFBackend
from seed_core.trainer import logprobs as lp
from seed_core.trainer import rl_step
from seed_core.trainer.distributed import Rows, group_by_prompt, split_micro
from seed_core.trainer.logprobs import can_share_prefix, pack_sequences, response_logprobs, score_in_chunks, \
    shared_response_logprobs
from seed_core.trainer.rl_step import RLSamples, rl_update

A = [11, 12, 13, 14, 15, 16, 17]  # two prompts of different lengths: left padding differs between them
B = [21, 22, 23, 24]
PROMPTS = [A, B, A, B, A, [31, 32]]  # interleaved groups and a singleton
RESPONSES = [[40, 41, 42], [43], [44, 45], [46, 47, 48, 49], [50], [51, 52]]


@pytest.fixture(params=["full_logits", "selective_head"])
def path(request, monkeypatch):
    """Both head paths: the tiny model's logits are under ``FULL_LOGITS_MAX``; 0 sends it to ``SelectiveHead``."""
    if request.param == "selective_head":
        monkeypatch.setattr(lp, "FULL_LOGITS_MAX", 0)
    return request.param


def test_shared_logprobs_and_entropy_equal_the_unshared_rows(tiny_policy, path):
    model = tiny_policy.model.eval()
    pad = tiny_policy.tokenizer.pad_token_id
    batch = pack_sequences(PROMPTS, RESPONSES, pad)
    with torch.no_grad():
        want, want_ent = response_logprobs(model, batch, with_entropy=True)
        got, got_ent, mask = shared_response_logprobs(model, PROMPTS, RESPONSES, pad, with_entropy=True)
    assert torch.equal(mask, batch.response_mask)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    torch.testing.assert_close(got_ent, want_ent, atol=1e-5, rtol=0)


def test_each_row_reads_its_own_prompt(tiny_policy, path):
    """Every row equals that row scored alone under its own prompt, and not under the other group's prompt (the
    test would see a row given another row's prefix: the gap is > 0.01 nats here, the tolerance 1e-5)."""
    model = tiny_policy.model.eval()
    pad = tiny_policy.tokenizer.pad_token_id
    with torch.no_grad():
        got, _, _ = shared_response_logprobs(model, PROMPTS, RESPONSES, pad)
        for i, (prompt, response) in enumerate(zip(PROMPTS, RESPONSES)):
            alone, _ = response_logprobs(model, pack_sequences([prompt], [response], pad))
            torch.testing.assert_close(got[i, :len(response)], alone[0], atol=1e-5, rtol=0)
            other = B if prompt == A else A
            swapped, _ = response_logprobs(model, pack_sequences([other], [response], pad))
            assert (swapped[0] - alone[0]).abs().max() > 0.01


def test_one_backward_through_the_shared_prompt_gives_the_gradients_of_separate_rows(tiny_policy, path):
    """d/dtheta sum_i w_ij l_ij: the prompt's activations get the sum of their rows' gradients (docstring)."""
    pad = tiny_policy.tokenizer.pad_token_id
    shared_model = tiny_policy.model.train()
    plain_model = copy.deepcopy(shared_model)
    weights = torch.randn(len(PROMPTS), 4, generator=torch.Generator().manual_seed(0))
    want, _ = response_logprobs(plain_model, pack_sequences(PROMPTS, RESPONSES, pad))
    (want * weights).sum().backward()
    got, _, _ = shared_response_logprobs(shared_model, PROMPTS, RESPONSES, pad)
    (got * weights).sum().backward()
    worst = max(float((p.grad - q.grad).abs().max()) for p, q in zip(shared_model.parameters(),
                                                                       plain_model.parameters()))
    scale = max(float(q.grad.abs().max()) for q in plain_model.parameters())
    assert scale > 0 and worst <= 1e-5 * scale


class _Comm:
    """Another rank holds ``extra`` more forward passes (``Collective.max_int`` is the only collective used)."""

    def __init__(self, extra: int) -> None:
        self.extra = extra

    def max_int(self, value: int) -> int:
        return value + self.extra


def test_score_in_chunks_shares_prompts_counts_both_passes_and_pads_to_the_other_rank(tiny_policy):
    model = tiny_policy.model
    pad = tiny_policy.tokenizer.pad_token_id
    calls = []
    handle = model.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        plain = score_in_chunks(model, PROMPTS, RESPONSES, pad, micro_batch_size=8)
        n_plain, calls[:] = len(calls), []
        shared = score_in_chunks(model, PROMPTS, RESPONSES, pad, micro_batch_size=8, share_prefix=True)
        n_shared, calls[:] = len(calls), []
        score_in_chunks(model, PROMPTS, RESPONSES, pad, micro_batch_size=8, share_prefix=True, comm=_Comm(3))
        n_padded = len(calls)
    finally:
        handle.remove()
    assert (n_plain, n_shared, n_padded) == (1, 2, 5)  # one pass; a prefix and a continuation pass; + 3 padding
    for a, b in zip(plain, shared):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=0)


def test_split_counts_a_shared_prompt_once_and_groups_rows_by_prompt():
    prompts = [[1] * 10, [2] * 10, [1] * 10, [2] * 10]
    lengths = [12, 13, 14, 11]  # prompt 10 + response 2, 3, 4, 1
    rows = group_by_prompt(Rows([0, 1, 2, 3], [True, True, True, False]), prompts)
    assert rows == Rows([0, 2, 1, 3], [True, True, True, False])
    # shared: 12 + (14 - 10) = 16 <= 16, then the other prompt starts a new pass; unshared: one row each
    assert [r.index for r in split_micro(rows, lengths, 8, 16, prompts)] == [[0, 2], [1, 3]]
    assert [r.index for r in split_micro(rows, lengths, 8, 16)] == [[0], [2], [1], [3]]


def _samples(pad_id: int) -> RLSamples:
    return RLSamples(prompt_ids=PROMPTS, response_ids=RESPONSES, teacher_prompt_ids=[A + [5]] * 3 + [None] * 3,
                     group_ids=["a", "b", "a", "b", "a", "c"], scores=torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 1.0]))


@pytest.mark.parametrize("algorithm", ["grpo", "seed"])
def test_one_update_with_shared_prompts_matches_the_unshared_update(tiny_policy, path, algorithm, monkeypatch):
    """The same loss and, after one SGD step of lr 1 (weights move by the gradient itself: AdamW's m / sqrt(v) would
    blow up float-order differences of near-zero gradients), the same weights to float order; the shared path ran."""
    pad = tiny_policy.tokenizer.pad_token_id
    used = []
    real = rl_step.shared_response_logprobs
    monkeypatch.setattr(rl_step, "shared_response_logprobs", lambda *a, **k: used.append(1) or real(*a, **k))
    results = {}
    for share in (False, True):
        model = copy.deepcopy(tiny_policy.model)
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        cfg = RLConfig(algorithm=algorithm, kl_coef=0.01, entropy_coef=0.01, mini_batch_size=8, ppo_epochs=1,
                       micro_batch_size=8, micro_batch_tokens=0, share_prefix=share)
        metrics = rl_update(model, optimizer, _samples(pad), cfg=cfg, algorithm=ALGORITHMS.get(algorithm),
                            pad_id=pad, ref_model=copy.deepcopy(tiny_policy.model).eval())
        results[share] = (metrics, [p.detach().clone() for p in model.parameters()])
    assert used, "the update never took the shared path"
    (m0, w0), (m1, w1) = results[False], results[True]
    assert m1["rl/total_loss"] == pytest.approx(m0["rl/total_loss"], abs=1e-6)
    moved = max(float((a - b).abs().max()) for a, b in zip(w0, [p.detach() for p in tiny_policy.model.parameters()]))
    assert moved > 1e-3 and max(float((a - b).abs().max()) for a, b in zip(w0, w1)) < 1e-5 * moved


def test_under_activation_checkpointing_the_replayed_passes_give_the_same_gradients(tiny_policy, path):
    """The backward replays each checkpointed layer: the prefix pass's cache must not store the prompt twice and the
    continuation's must still hold it (``WriteOnceLayer`` / ``ReadOnlyLayer``). transformers drops a cache under
    checkpointing unless the layer declares it safe, which ``shared_response_logprobs`` does for its call only."""
    pad = tiny_policy.tokenizer.pad_token_id
    plain_model = copy.deepcopy(tiny_policy.model).train()
    shared_model = tiny_policy.model.train()
    shared_model.gradient_checkpointing_enable()
    weights = torch.randn(len(PROMPTS), 4, generator=torch.Generator().manual_seed(0))
    want, _ = response_logprobs(plain_model, pack_sequences(PROMPTS, RESPONSES, pad))
    (want * weights).sum().backward()
    got, _, _ = shared_response_logprobs(shared_model, PROMPTS, RESPONSES, pad)
    (got * weights).sum().backward()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    worst = max(float((p.grad - q.grad).abs().max()) for p, q in zip(shared_model.parameters(),
                                                                       plain_model.parameters()))
    assert worst <= 1e-5 * max(float(q.grad.abs().max()) for q in plain_model.parameters())
    assert not any("_can_checkpoint_with_cache" in vars(m) for m in shared_model.modules())  # the call's only
    assert can_share_prefix(shared_model)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_hf_rollout_prefills_each_prompt_once_with_the_same_tokens(tiny_policy, temperature):
    prompts = ["push the box left", "push the box left", "go up", "push the box left", "go up"]
    runs = [HFBackend(tiny_policy, GenerationConfig(batch_size=8, share_prefix=share))
            .generate(prompts, temperature=temperature, max_new_tokens=12, seed=5) for share in (False, True)]
    for plain, shared in zip(*runs):
        assert shared.token_ids == plain.token_ids
        assert max((abs(a - b) for a, b in zip(shared.logprobs, plain.logprobs)), default=0.0) < 1e-4
