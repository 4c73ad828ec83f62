"""Gated OPD (SDAR/SEED) and ungated OPD: golden values, gradient direction, teacher masking."""

import math

import pytest
import torch

from seed_core.losses import DISTILL_LOSSES, LossInputs
from seed_core.registry import UnknownNameError

SIG_1 = 0.7310585786  # sigmoid(1) = 1 / (1 + e^-1)
SIG_M2 = 0.1192029220  # sigmoid(-2) = 1 / (1 + e^2)


def _inputs(student: list[list[float]], teacher: list[list[float]], **kw: torch.Tensor) -> LossInputs:
    s = torch.tensor(student, requires_grad=True)
    mask = kw.pop("mask", torch.ones_like(s))
    zeros = torch.zeros_like(s)
    t = torch.tensor(teacher, requires_grad=True)
    return LossInputs(s, zeros, zeros, mask, teacher_logprobs=t, **kw)


def test_gated_opd_golden_value_beta_5() -> None:
    # delta = T - S = [0.2, -0.4]; g = sigmoid(5 * delta) = [sigmoid(1), sigmoid(-2)]
    inp = _inputs([[-1.0, -2.0]], [[-0.8, -2.4]])
    loss, metrics = DISTILL_LOSSES.get("gated_opd")(inp, beta=5.0)
    assert loss.item() == pytest.approx((SIG_1 * 0.2 + SIG_M2 * -0.4) / 2, abs=1e-6)
    assert metrics["opd_loss"] == pytest.approx(0.0492652, abs=1e-6)
    assert metrics["gate_mean"] == pytest.approx((SIG_1 + SIG_M2) / 2, abs=1e-6)
    assert metrics["gate_active_ratio"] == 0.5
    assert metrics["teacher_gap_mean"] == pytest.approx(-0.1, abs=1e-6)
    assert metrics["teacher_coverage"] == 1.0


def test_gradient_is_minus_gate_over_n_and_teacher_gets_none() -> None:
    inp = _inputs([[-1.0, -2.0]], [[-0.8, -2.4]])
    loss, _ = DISTILL_LOSSES.get("gated_opd")(inp, beta=5.0)
    loss.backward()
    assert inp.logprobs.grad.flatten().tolist() == pytest.approx([-SIG_1 / 2, -SIG_M2 / 2], abs=1e-6)
    assert inp.teacher_logprobs.grad is None


def test_beta_zero_gives_gate_exactly_one_half() -> None:
    inp = _inputs([[-1.0, -2.0, -3.0]], [[0.0, -5.0, -3.0]])
    loss, metrics = DISTILL_LOSSES.get("gated_opd")(inp, beta=0.0)
    assert metrics["gate_mean"] == 0.5
    assert metrics["gate_active_ratio"] == 0.0  # g > 0.5 is strict
    assert loss.item() == pytest.approx(0.5 * (1.0 - 3.0 + 0.0) / 3, abs=1e-6)


def test_teacher_equal_to_student_gives_zero_loss() -> None:
    inp = _inputs([[-1.0, -2.0]], [[-1.0, -2.0]])
    loss, metrics = DISTILL_LOSSES.get("gated_opd")(inp, beta=5.0)
    assert loss.item() == 0.0
    assert metrics["gate_mean"] == 0.5


def test_trajectories_without_teacher_contribute_nothing() -> None:
    student = [[-1.0, -2.0], [-0.3, -0.7]]
    tmask = torch.tensor([1.0, 0.0])
    results = []
    for row1 in ([0.0, 0.0], [math.nan, 9.0]):  # changing the masked row's teacher changes nothing
        inp = _inputs(student, [[-0.8, -2.4], row1], teacher_mask=tmask)
        loss, metrics = DISTILL_LOSSES.get("gated_opd")(inp, beta=5.0)
        loss.backward()
        results.append((loss.item(), inp.logprobs.grad.clone(), metrics))
    (loss_a, grad_a, m_a), (loss_b, grad_b, m_b) = results
    assert loss_a == loss_b == pytest.approx((SIG_1 * 0.2 - SIG_M2 * 0.4) / 2, abs=1e-6)
    assert torch.equal(grad_a, grad_b)
    assert grad_a[1].tolist() == [0.0, 0.0]
    assert m_a == m_b
    assert m_a["teacher_coverage"] == 0.5


def test_padding_tokens_are_ignored() -> None:
    mask = torch.tensor([[1.0, 0.0]])
    inp = _inputs([[-1.0, math.nan]], [[-0.8, -math.inf]], mask=mask)
    loss, metrics = DISTILL_LOSSES.get("gated_opd")(inp, beta=5.0)
    loss.backward()
    assert loss.item() == pytest.approx(SIG_1 * 0.2, abs=1e-6)
    assert inp.logprobs.grad.flatten().tolist() == pytest.approx([-SIG_1, 0.0], abs=1e-6)


def test_no_teacher_anywhere_gives_zero_without_nan() -> None:
    inp = _inputs([[-1.0, -2.0]], [[math.nan, 3.0]], teacher_mask=torch.zeros(1))
    loss, metrics = DISTILL_LOSSES.get("gated_opd")(inp, beta=5.0)
    loss.backward()
    assert loss.item() == 0.0
    assert inp.logprobs.grad.tolist() == [[0.0, 0.0]]
    assert metrics == {
        "opd_loss": 0.0,
        "gate_mean": 0.0,
        "gate_active_ratio": 0.0,
        "teacher_gap_mean": 0.0,
        "teacher_coverage": 0.0,
    }


def test_missing_teacher_logprobs_is_a_clear_error() -> None:
    inp = LossInputs(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2), torch.ones(1, 2))
    with pytest.raises(ValueError, match="gated_opd needs LossInputs.teacher_logprobs"):
        DISTILL_LOSSES.get("gated_opd")(inp, beta=5.0)


def test_ungated_opd_weights_every_token_by_one() -> None:
    inp = _inputs([[-1.0, -2.0]], [[-0.8, -2.4]])
    loss, metrics = DISTILL_LOSSES.get("opd")(inp)
    loss.backward()
    assert loss.item() == pytest.approx((0.2 - 0.4) / 2, abs=1e-6)
    assert metrics["gate_mean"] == 1.0
    assert inp.logprobs.grad.flatten().tolist() == pytest.approx([-0.5, -0.5])


def test_unknown_distill_loss_lists_known_names() -> None:
    with pytest.raises(UnknownNameError, match="gated_opd, opd"):
        DISTILL_LOSSES.get("reverse_kl")


def test_skill_sd_golden_value_and_gradient_with_rho_carrying_gradient() -> None:
    """One token, l^S = ln 0.5, l^T = ln 0.25, l^old = ln 0.4 (SDAR skillsd_utils.py:14-55): e = ln 2, k3 = 0.5 - 1 +
    ln 2 = 0.193147, rho = 1.25, L = 0.241434; dL/dl^S = rho * (k3 + 1 - 0.5) = 1.25 * ln 2 = 0.866434 (with rho
    detached it would be 1.25 * 0.5 = 0.625)."""
    s = torch.tensor([[math.log(0.5)]], dtype=torch.float64, requires_grad=True)
    t = torch.tensor([[math.log(0.25)]], dtype=torch.float64)
    old = torch.tensor([[math.log(0.4)]], dtype=torch.float64)
    inp = LossInputs(s, old, torch.zeros_like(old), torch.ones_like(old), teacher_logprobs=t)
    loss, metrics = DISTILL_LOSSES.get("skill_sd")(inp)
    assert loss.item() == pytest.approx(1.25 * (0.5 - 1 + math.log(2)), rel=1e-12)
    assert loss.item() == pytest.approx(0.241434, abs=1e-6)
    assert metrics["skill_sd_ratio_mean"] == pytest.approx(1.25, rel=1e-12)
    loss.backward()
    assert s.grad.item() == pytest.approx(1.25 * math.log(2), rel=1e-12)
    assert s.grad.item() == pytest.approx(0.866434, abs=1e-6)
