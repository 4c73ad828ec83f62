"""k3 KL to the reference and the entropy term."""

import math

import pytest
import torch

from seed_core.losses.regularizers import entropy_bonus, kl_k3


def test_k3_golden_value_and_gradient() -> None:
    # ref - l = ln 2: k3 = 2 - ln 2 - 1; d k3 / d l = 1 - exp(ref - l) = -1. Second token: ref == l -> 0.
    logprobs = torch.tensor([[0.0, -1.0]], requires_grad=True)
    ref = torch.tensor([[math.log(2.0), -1.0]])
    loss, metrics = kl_k3(logprobs, ref, torch.ones(1, 2))
    loss.backward()
    assert loss.item() == pytest.approx((1 - math.log(2.0)) / 2, abs=1e-6)
    assert metrics["kl_loss"] == pytest.approx(0.1534264, abs=1e-6)
    assert logprobs.grad.flatten().tolist() == pytest.approx([-0.5, 0.0], abs=1e-6)


def test_k3_is_clamped_to_ten() -> None:
    # exp(5) - 5 - 1 = 142.4 and exp(-20) + 20 - 1 = 19 (after clamping -30 to -20): both capped at 10.
    logprobs = torch.tensor([[0.0, 30.0]], requires_grad=True)
    loss, _ = kl_k3(logprobs, torch.tensor([[5.0, 0.0]]), torch.ones(1, 2))
    loss.backward()
    assert loss.item() == pytest.approx(10.0)
    assert logprobs.grad.tolist() == [[0.0, 0.0]]


def test_k3_ignores_padding() -> None:
    logprobs = torch.tensor([[0.0, 0.0]], requires_grad=True)
    loss, _ = kl_k3(logprobs, torch.tensor([[math.log(2.0), -math.inf]]), torch.tensor([[1.0, 0.0]]))
    loss.backward()
    assert loss.item() == pytest.approx(1 - math.log(2.0), abs=1e-6)
    assert torch.isfinite(logprobs.grad).all()


def test_entropy_bonus_is_token_mean_entropy() -> None:
    entropy = torch.tensor([[1.0, 2.0], [3.0, 9.0]])
    value, metrics = entropy_bonus(entropy, torch.tensor([[1.0, 1.0], [1.0, 0.0]]))
    assert value.item() == pytest.approx(2.0)
    assert metrics == {"entropy": pytest.approx(2.0)}
