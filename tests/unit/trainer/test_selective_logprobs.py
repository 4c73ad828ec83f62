"""The chunked selective log-softmax (``seed_core.trainer.logprobs``) against the full-vocabulary one.

``_full_vocab_response_logprobs`` is the implementation the trainer used before (log_softmax over all
(B, T, V) logits, then gather), kept here only as the reference.
"""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from seed_core.algorithms import ALGORITHMS
from seed_core.config import RLConfig
from seed_core.trainer import logprobs as lp
from seed_core.trainer import rl_step
from seed_core.trainer.logprobs import pack_sequences, response_logprobs, selective_log_softmax
from seed_core.trainer.rl_step import RLSamples, rl_update


@pytest.fixture(autouse=True)
def selective_even_for_tiny_models(request, monkeypatch):
    """The tiny test models' logits are under ``FULL_LOGITS_MAX``: the tests of the selective path lower it to 0."""
    if "full_vocabulary_path" not in request.node.name:
        monkeypatch.setattr(lp, "FULL_LOGITS_MAX", 0)


def _full_vocab_response_logprobs(model, batch, *, with_entropy=False):
    """The pre-change implementation: every (B, T, V) logit and its log_softmax materialised."""
    device = next(model.parameters()).device
    T = batch.response_ids.shape[1]
    out = model(input_ids=batch.input_ids.to(device), attention_mask=batch.attention_mask.to(device),
                position_ids=batch.position_ids.to(device), logits_to_keep=T + 1, use_cache=False)
    logp_all = F.log_softmax(out.logits[:, :-1, :].float(), dim=-1)
    mask = batch.response_mask.to(device)
    logprobs = logp_all.gather(-1, batch.response_ids.to(device).unsqueeze(-1)).squeeze(-1) * mask
    entropy = -(logp_all.exp() * logp_all).sum(-1) * mask if with_entropy else None
    return logprobs, entropy


def test_golden_two_word_vocabulary():
    """z = h W^T = [0, ln 3]: p = [1/4, 3/4]; log p(y=1) = ln(3/4); H = -(1/4 ln 1/4 + 3/4 ln 3/4)."""
    hidden = torch.tensor([[1.0]], requires_grad=True)
    weight = torch.tensor([[0.0], [math.log(3.0)]])
    logp, ent = selective_log_softmax(hidden, weight, None, torch.tensor([1]), with_entropy=True)
    assert logp.item() == pytest.approx(math.log(0.75), abs=1e-6)
    assert ent.item() == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)), abs=1e-6)
    # d log p(1) / dh = sum_v (onehot_v - p_v) W_v = (0 - 1/4) * 0 + (1 - 3/4) * ln 3 = ln(3) / 4
    logp.sum().backward()
    assert hidden.grad.item() == pytest.approx(math.log(3.0) / 4, abs=1e-6)


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_values_and_gradients_match_full_log_softmax(chunk):
    """Any chunking (including chunks that do not divide N = 10) equals log_softmax(h W^T + b)[y] and its
    entropy, in value and in the gradients of h, W and b."""
    torch.manual_seed(0)
    h = torch.randn(10, 6, requires_grad=True)
    w = torch.randn(11, 6, requires_grad=True)
    b = torch.randn(11, requires_grad=True)
    y = torch.randint(0, 11, (10,))
    g_l, g_h = torch.randn(10), torch.randn(10)

    logp, ent = selective_log_softmax(h, w, b, y, with_entropy=True, chunk=chunk)
    (logp * g_l + ent * g_h).sum().backward()
    got = [h.grad.clone(), w.grad.clone(), b.grad.clone()]
    h.grad = w.grad = b.grad = None

    ref_all = F.log_softmax(F.linear(h, w, b), dim=-1)
    ref_lp = ref_all.gather(-1, y[:, None]).squeeze(-1)
    ref_ent = -(ref_all.exp() * ref_all).sum(-1)
    (ref_lp * g_l + ref_ent * g_h).sum().backward()
    torch.testing.assert_close(logp, ref_lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent, ref_ent, atol=1e-5, rtol=1e-5)
    for g, ref in zip(got, [h.grad, w.grad, b.grad]):
        torch.testing.assert_close(g, ref, atol=1e-5, rtol=1e-5)


def _ragged():
    """Four rows: different prompt and response lengths (left- and right-padding both exercised)."""
    prompts = [[10, 11, 12, 13, 14], [20, 21], [30, 31, 32], [33]]
    responses = [[40, 41], [42, 43, 44, 45, 46], [47], [48, 49, 50]]
    return prompts, responses


def _scorer(tiny_policy, seed):
    """The tiny policy in train mode, the ragged batch, and ``run(fn)``: fn's log-probs and entropy and the
    gradients of a fixed random weighting of them, (logp, entropy, [grad per parameter])."""
    model = tiny_policy.model.train()
    prompts, responses = _ragged()
    batch = pack_sequences(prompts, responses, pad_id=tiny_policy.tokenizer.pad_token_id)
    weights = torch.randn(batch.response_ids.shape, generator=torch.Generator().manual_seed(seed))

    def run(fn):
        model.zero_grad(set_to_none=True)
        logp, ent = fn(model, batch, with_entropy=True)
        (logp * weights + 0.1 * ent).sum().backward()
        return logp.detach(), ent.detach(), [p.grad.clone() for p in model.parameters()]

    return model, batch, run


@pytest.mark.parametrize("plain_head", [True, False], ids=["swapped-head", "model-logits"])
def test_response_logprobs_match_full_vocab_reference(tiny_policy, monkeypatch, plain_head):
    """Both paths (swapped head; logits from the model) give the reference's values and gradients."""
    if not plain_head:
        monkeypatch.setattr(lp, "PLAIN_HEAD_MODEL_TYPES", frozenset())
    monkeypatch.setattr(lp, "LOGPROB_CHUNK_TOKENS", 3)  # several chunks over the 11 response tokens
    model, batch, run = _scorer(tiny_policy, seed=1)

    got, want = run(response_logprobs), run(_full_vocab_response_logprobs)
    torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1], want[1], atol=1e-5, rtol=1e-5)
    for g, w in zip(got[2], want[2]):
        torch.testing.assert_close(g, w, atol=1e-6, rtol=1e-4)
    assert type(model.get_output_embeddings()) is torch.nn.Linear  # the head is back after the call


def test_head_is_restored_when_the_forward_fails(tiny_policy):
    model = tiny_policy.model
    head = model.get_output_embeddings()
    batch = pack_sequences([[1, 2]], [[3]], pad_id=tiny_policy.tokenizer.pad_token_id)
    bad = pack_sequences([[1, 2]], [[3]], pad_id=tiny_policy.tokenizer.pad_token_id)
    object.__setattr__(bad, "input_ids", torch.full_like(batch.input_ids, 10**7))  # out of the vocabulary
    with pytest.raises(IndexError):
        response_logprobs(model, bad)
    assert model.get_output_embeddings() is head


def test_one_rl_update_is_unchanged_by_the_selective_log_softmax(tiny_policy, monkeypatch):
    """One SEED update (PPO + KL + entropy + gated OPD, ragged rows, 2 micro-batches) with the old
    full-vocabulary log-probs and with the chunked ones: the same losses (abs 1e-6) and the same updated
    weights (abs 1e-6). The step is plain SGD with lr 1, so the weights move by exactly the clipped gradient
    and the tolerance bounds the gradient difference; AdamW's first step, about lr * sign(g), would turn float
    rounding in near-zero gradient entries into differences of up to 2 lr."""
    monkeypatch.setattr(lp, "LOGPROB_CHUNK_TOKENS", 4)
    prompts, responses = _ragged()
    samples = RLSamples(prompt_ids=prompts, response_ids=responses,
                        teacher_prompt_ids=[[99, 98, *p] if i % 2 == 0 else None for i, p in enumerate(prompts)],
                        group_ids=["a", "a", "b", "b"], scores=torch.tensor([1.0, 0.0, 0.5, -0.1]),
                        success=torch.tensor([True, False, True, False]))
    cfg = RLConfig(mini_batch_size=4, micro_batch_size=2, kl_coef=0.05, entropy_coef=0.01, lr=1.0)
    start = copy.deepcopy(tiny_policy.model)
    ref = copy.deepcopy(start).eval().requires_grad_(False)

    def update():
        model = copy.deepcopy(start)
        opt = torch.optim.SGD(model.parameters(), lr=cfg.lr)
        metrics = rl_update(model, opt, samples, cfg=cfg, algorithm=ALGORITHMS.get("seed"),
                            pad_id=tiny_policy.tokenizer.pad_token_id, ref_model=ref, seed=3)
        return metrics, list(model.parameters())

    new_metrics, new_weights = update()
    monkeypatch.setattr(rl_step, "response_logprobs", _full_vocab_response_logprobs)
    monkeypatch.setattr(lp, "response_logprobs", _full_vocab_response_logprobs)  # score_in_chunks' passes
    old_metrics, old_weights = update()

    for key in ("rl/total_loss", "rl/pg_loss", "rl/kl_loss", "rl/entropy", "rl/opd_loss", "rl/gate_mean"):
        assert new_metrics[key] == pytest.approx(old_metrics[key], abs=1e-6), key
    moved = max(float((w.detach() - s.detach()).abs().max()) for w, s in zip(old_weights, start.parameters()))
    assert moved > 1e-4  # the update did move the weights
    for new, old in zip(new_weights, old_weights):
        torch.testing.assert_close(new, old, atol=1e-6, rtol=0)


def test_small_logits_take_the_full_vocabulary_path_bit_for_bit(tiny_policy, monkeypatch):
    """Under ``FULL_LOGITS_MAX`` the values and gradients are exactly (torch.equal) those of the full-vocabulary
    implementation, so the testbed keeps its measured numbers; just over it the selective head runs."""
    model, batch, run = _scorer(tiny_policy, seed=2)

    size = batch.response_ids.numel() * model.config.vocab_size
    monkeypatch.setattr(lp, "FULL_LOGITS_MAX", size)
    got, want = run(response_logprobs), run(_full_vocab_response_logprobs)
    assert all(torch.equal(g, w) for g, w in zip([*got[:2], *got[2]], [*want[:2], *want[2]]))
    monkeypatch.setattr(lp, "FULL_LOGITS_MAX", size - 1)
    heads = []
    monkeypatch.setattr(lp, "SelectiveHead", lambda *a, **k: _record(heads, *a, **k))
    run(response_logprobs)
    assert heads, "just over FULL_LOGITS_MAX the selective head must run"


def _record(heads, *args, **kwargs):
    heads.append(1)
    return _SELECTIVE_HEAD(*args, **kwargs)


_SELECTIVE_HEAD = lp.SelectiveHead
