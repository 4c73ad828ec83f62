import math

import pytest
import torch

from seed_core.algorithms import ALGORITHMS
from seed_core.config import RLConfig
from seed_core.trainer.rl_step import RLSamples, compute_reference_logprobs, rl_update


def _naive(model, prompt, response):
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
    return torch.stack([logp[len(prompt) - 1 + j, t] for j, t in enumerate(response)])


def _samples(with_teacher=(True, False, True)):
    prompts = [[10, 11, 12], [13, 14], [15, 16, 17, 18]]
    teacher = [[99, 98, 10, 11, 12], None, [97, 15, 16, 17, 18]]
    return RLSamples(
        prompt_ids=prompts,
        response_ids=[[40, 41, 42], [43], [44, 45]],
        teacher_prompt_ids=[t if w else None for t, w in zip(teacher, with_teacher)],
        group_ids=["g0", "g0", "g1"],
        scores=torch.tensor([10.0, -0.1, 0.0]),
    )


def test_teacher_rescoring_uses_exactly_the_sampled_ids(tiny_policy):
    model = tiny_policy.model
    s = _samples()
    out = compute_reference_logprobs(model, None, s, tiny_policy.tokenizer.pad_token_id, 2, needs_teacher=True)
    for i in range(3):
        torch.testing.assert_close(out["old"][i], _naive(model.eval(), s.prompt_ids[i], s.response_ids[i]),
                                   atol=1e-4, rtol=1e-4)
    # teacher = same weights, same response ids, skill-augmented prompt
    torch.testing.assert_close(out["teacher"][0], _naive(model, s.teacher_prompt_ids[0], s.response_ids[0]),
                               atol=1e-4, rtol=1e-4)
    assert torch.all(out["teacher"][1] == 0) and out["teacher"][1].numel() == 1
    assert "ref" not in out
    assert s.teacher_mask.tolist() == [1.0, 0.0, 1.0]


def _params(model):
    return [p.detach().clone() for p in model.parameters()]


def test_seed_update_changes_parameters_and_logs_finite_metrics(tiny_policy):
    model = tiny_policy.model
    before = _params(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    cfg = RLConfig(mini_batch_size=2, micro_batch_size=1, kl_coef=0.01)
    m = rl_update(model, opt, _samples(), cfg=cfg, algorithm=ALGORITHMS.get("seed"),
                  pad_id=tiny_policy.tokenizer.pad_token_id, ref_model=model)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert all(math.isfinite(v) for v in m.values())
    assert m["rl/optimizer_steps"] == 2.0 and abs(m["rl/teacher_sample_ratio"] - 2 / 3) < 1e-6
    assert m["rl/teacher_coverage"] > 0 and 0 < m["rl/gate_mean"] < 1


def test_no_valid_skill_means_no_distillation_signal(tiny_policy):
    cfg = RLConfig(mini_batch_size=8, micro_batch_size=8, kl_coef=0.0)
    opt = torch.optim.SGD(tiny_policy.model.parameters(), lr=0.0)
    m = rl_update(tiny_policy.model, opt, _samples(with_teacher=(False, False, False)), cfg=cfg,
                  algorithm=ALGORITHMS.get("seed"), pad_id=tiny_policy.tokenizer.pad_token_id)
    assert m["rl/opd_loss"] == 0.0 and m["rl/teacher_coverage"] == 0.0


def test_grpo_ignores_teachers_and_empty_batch_is_recorded(tiny_policy):
    cfg = RLConfig(mini_batch_size=8, micro_batch_size=8, kl_coef=0.0)
    opt = torch.optim.SGD(tiny_policy.model.parameters(), lr=0.0)
    m = rl_update(tiny_policy.model, opt, _samples(), cfg=cfg, algorithm=ALGORITHMS.get("grpo"),
                  pad_id=tiny_policy.tokenizer.pad_token_id)
    assert "rl/opd_loss" not in m
    empty = RLSamples([], [], [], [], torch.zeros(0))
    assert rl_update(tiny_policy.model, opt, empty, cfg=cfg, algorithm=ALGORITHMS.get("grpo"),
                     pad_id=0) == {"rl/skipped_empty_batch": 1.0, "rl/samples": 0.0}


def test_on_policy_shortcut_equals_the_explicit_old_pass(tiny_policy):
    """One optimizer step per iteration: l_old = sg(l_theta), so skipping the old pass changes nothing."""
    from seed_core.trainer.rl_step import micro_batch_loss

    model, pad = tiny_policy.model, tiny_policy.tokenizer.pad_token_id
    s, cfg, algo = _samples(), RLConfig(kl_coef=0.0), ALGORITHMS.get("opid_self")
    adv = torch.tensor([1.0, -1.0, 0.5])
    with_old = compute_reference_logprobs(model, None, s, pad, 8, needs_teacher=True)
    without = compute_reference_logprobs(model, None, s, pad, 8, needs_teacher=True, needs_old=False)
    assert "old" not in without
    for a, b in zip(with_old["teacher"], without["teacher"]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    model.eval()
    l1, m1 = micro_batch_loss(model, s, [0, 1, 2], with_old, adv, pad_id=pad, cfg=cfg, algorithm=algo)
    l2, m2 = micro_batch_loss(model, s, [0, 1, 2], without, adv, pad_id=pad, cfg=cfg, algorithm=algo)
    torch.testing.assert_close(l1.local(), l2.local(), atol=1e-5, rtol=1e-5)
    assert abs(m2["ratio_mean"] - 1.0) < 1e-6 and abs(m1["ratio_mean"] - 1.0) < 1e-4


def _grads(model):
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def test_mini_batch_loss_is_a_global_token_mean_whatever_the_micro_batching(tiny_policy):
    """sum_k (n_k / N) L_k equals the token-mean over the whole mini-batch: 1 micro-batch of 3 rows, 3 of 1
    row, or a 4-token budget all give the same loss and the same update (seed_core.trainer.distributed)."""
    model, pad = tiny_policy.model, tiny_policy.tokenizer.pad_token_id
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    results = []
    for micro, budget in ((3, 0), (1, 0), (8, 4)):
        model.load_state_dict(start)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        cfg = RLConfig(mini_batch_size=8, micro_batch_size=micro, micro_batch_tokens=budget, kl_coef=0.0,
                       entropy_coef=0.0)
        m = rl_update(model, opt, _samples(), cfg=cfg, algorithm=ALGORITHMS.get("seed"), pad_id=pad)
        results.append((m["rl/total_loss"], [p.detach().clone() for p in model.parameters()]))
    model.load_state_dict(start)
    for loss, params in results[1:]:
        assert abs(loss - results[0][0]) < 1e-5
        for a, b in zip(params, results[0][1]):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    assert any(not torch.equal(a, start_v) for a, start_v in zip(results[0][1], start.values()))


def test_an_algorithms_fixed_gate_beta_wins_over_the_config(tiny_policy):
    """grpo_opsd is beta = 0 (g = 0.5 everywhere) even when rl.gate_beta says 5: one owner, used and logged."""
    cfg = RLConfig(mini_batch_size=8, micro_batch_size=8, kl_coef=0.0, gate_beta=5.0)
    opt = torch.optim.SGD(tiny_policy.model.parameters(), lr=0.0)
    m = rl_update(tiny_policy.model, opt, _samples(), cfg=cfg, algorithm=ALGORITHMS.get("grpo_opsd"),
                  pad_id=tiny_policy.tokenizer.pad_token_id)
    assert m["rl/gate_mean"] == pytest.approx(0.5, abs=1e-7)
    from seed_core.algorithms import effective_values

    algo = ALGORITHMS.get("grpo_opsd")
    from seed_core.algorithms import effective_rl

    assert effective_values(effective_rl(cfg, algo), algo)["algo/beta"] == 0.0
    sdar = ALGORITHMS.get("sdar")
    assert effective_values(effective_rl(cfg, sdar), sdar)["algo/beta"] == 5.0
