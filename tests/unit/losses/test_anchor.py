"""The anchored governance's loss (``seed_core.losses.anchor``): hand-computed golden values and gradients."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from seed_core.losses.anchor import SkillGenReward, anchor_loss, skill_gen_reward
from seed_core.trainer.anchor_step import anchor_update

E = math.e


@pytest.mark.parametrize("args, expected", [
    ((0.5, True, True, True, 100), 0.5 + 0.2 + 0.2),
    ((0.5, False, True, True, 100), 0.2 + 0.2),  # a lost episode's gain counts 0 (SEED's "zero" mode)
    ((5.0, True, True, True, 100), 2.0),  # clipped at +2
    ((-3.0, True, False, False, 2000), -2.0),  # -3 - 0.2 (too long), clipped at -2
    ((0.1, True, False, True, 1201), 0.1 + 0.2 - 0.2),
])
def test_seed_skill_gen_reward(args: tuple, expected: float) -> None:
    assert skill_gen_reward(*args) == pytest.approx(expected, abs=1e-12)


def test_no_clip() -> None:
    assert skill_gen_reward(5.0, True, True, True, 1, SkillGenReward(clip=0.0)) == pytest.approx(5.4)


def test_anchor_loss_and_gradient_by_hand() -> None:
    lp = torch.tensor([[-1.0, -2.0], [-0.5, 0.0]], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([[-1.0, -1.0], [-1.5, 9.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    loss, metrics = anchor_loss(lp, ref, mask, [0.5, -1.0], sg_coef=2.0, kl_coef=0.5)
    # L_sg = -mean(0.5 * -1.5, -1.0 * -0.5) = 0.125; k3 over 3 tokens: 0, e - 2, 1/e; L_kl = (e - 2 + 1/e) / 3
    kl = (E - 2.0 + 1.0 / E) / 3.0
    assert float(loss.detach()) == pytest.approx(2.0 * 0.125 + 0.5 * kl, abs=1e-12)
    assert metrics["anchor/sg_loss"] == pytest.approx(0.125) and metrics["anchor/kl"] == pytest.approx(kl)
    loss.backward()
    # dL/dp: -(c_sg / N) r_i / |y_i| + (c_kl / 3) (1 - e^{q - p}) on answer tokens
    expected = torch.tensor([[-0.25 + 0.0, -0.25 + (0.5 / 3) * (1 - E)],
                             [1.0 + (0.5 / 3) * (1 - 1 / E), 0.0]], dtype=torch.float64)
    assert torch.allclose(lp.grad, expected, atol=1e-12)


def test_anchor_without_reference_is_the_sg_term_alone() -> None:
    lp = torch.tensor([[-1.0, -3.0]])
    loss, metrics = anchor_loss(lp, None, torch.ones(1, 2), [1.0], sg_coef=1.0, kl_coef=5.0)
    assert float(loss) == pytest.approx(2.0) and "anchor/kl" not in metrics


def test_the_anchor_step_is_the_same_in_any_micro_batching(tiny_policy) -> None:
    tok = tiny_policy.tokenizer
    prompts = [tok("pick the box", add_special_tokens=False)["input_ids"], tok("go", add_special_tokens=False)
               ["input_ids"]]
    answers = [tok('{"episode_skill": "push"}', add_special_tokens=False)["input_ids"], tok("{}")["input_ids"]]
    batch = (prompts, answers, [0.9, -0.4])
    ref = copy.deepcopy(tiny_policy.model).eval()
    results = []
    for micro in (1, 2):
        model = copy.deepcopy(tiny_policy.model)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        m = anchor_update(model, opt, batch, ref_model=ref, pad_id=tok.pad_token_id, sg_coef=1.0, kl_coef=0.5,
                          micro=micro, grad_clip=1e9)
        results.append((m, [p.detach().clone() for p in model.parameters()]))
    (m1, w1), (m2, w2) = results
    assert m1["anchor/loss"] == pytest.approx(m2["anchor/loss"], rel=1e-5) and m1["anchor/samples"] == 2.0
    assert max(float((a - b).abs().max()) for a, b in zip(w1, w2)) < 1e-5
    assert any(float((a - b).abs().max()) > 0 for a, b in zip(w1, tiny_policy.model.parameters()))
