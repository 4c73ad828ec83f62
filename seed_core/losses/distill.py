"""Token-level on-policy distillation from the skill-augmented teacher (seed-algorithm.md §1.10-1.11).

``DISTILL_LOSSES`` (``seed_core.registries``) maps ``rl.distill_loss`` to ``(LossInputs, **kwargs) -> (loss,
metrics)``, with the coefficient and keyword arguments its ``LossEntry`` declares. The teacher is the same policy scoring the same response tokens under the prompt with the skill
inserted; it is detached.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from seed_core.losses.aggregate import masked_mean
from seed_core.losses.types import LossInputs, LossOutput, as_float

DistillLossFn = Callable[..., LossOutput]


def _opd(inp: LossInputs, gate_of: Callable[[Tensor], Tensor], needed_by: str) -> LossOutput:
    """Shared body: L = masked_mean(g * (l^T - l^S), mask * teacher_mask) with g = gate_of(delta), detached."""
    active = inp.teacher_token_mask()  # (B, T)
    # Tokens without a teacher (padding, samples with teacher_mask 0) are set to student = teacher = 0,
    # so their possibly garbage values reach neither the loss nor the gradient and never produce NaN.
    keep = active != 0
    student = torch.where(keep, inp.logprobs, torch.zeros_like(inp.logprobs))  # (B, T), carries the gradient
    teacher_raw = inp.require("teacher_logprobs", needed_by=needed_by).detach()
    teacher = torch.where(keep, teacher_raw, torch.zeros_like(teacher_raw))
    delta = teacher - student.detach()  # (B, T), the skill-induced shift
    gate = gate_of(delta).detach()  # (B, T)
    loss = masked_mean(gate * (teacher - student), active)
    response_tokens = inp.mask.sum()
    coverage = active.sum() / response_tokens if as_float(response_tokens) > 0 else 0.0
    metrics = {
        "opd_loss": as_float(loss),
        "gate_mean": as_float(masked_mean(gate, active)),
        "gate_active_ratio": as_float(masked_mean((gate > 0.5).to(active.dtype), active)),
        "teacher_gap_mean": as_float(masked_mean(delta, active)),
        "teacher_coverage": as_float(coverage),
    }
    return loss, metrics


def gated_opd_loss(inp: LossInputs, *, beta: float) -> LossOutput:
    """SDAR/SEED gated on-policy distillation loss (§1.10-1.11; SDAR arXiv 2605.15155 ``sdar_utils.py``).

        delta = l^T - sg(l^S)                       skill-induced log-prob shift, (B, T)
        g     = sg(sigmoid(beta * delta))           beta = 0 gives g = 0.5 (GRPO+OPSD baseline)
        L     = masked_mean(g * (l^T - l^S), mask * teacher_mask[:, None])

    l^S = inp.logprobs (current student, with grad); l^T = inp.teacher_logprobs (detached).
    dL/dl^S = -g / N on the N active tokens: minimising L pushes every sampled token *up*, with weight
    near 1 where the teacher endorses it (delta > 0) and near 0 where it rejects it. Samples with
    teacher_mask 0 contribute nothing; with no teacher token at all, L = 0 and gate metrics are 0.
    Metrics: opd_loss, gate_mean, gate_active_ratio (g > 0.5), teacher_gap_mean, teacher_coverage
    (fraction of response tokens that have a teacher).
    """
    return _opd(inp, lambda delta: torch.sigmoid(beta * delta), needed_by="gated_opd")


def opd_loss(inp: LossInputs) -> LossOutput:
    """Ungated variant of ``gated_opd`` (g = 1): L = masked_mean(l^T - l^S, mask * teacher_mask[:, None]).

    Same shapes and metrics as ``gated_opd``.
    """
    return _opd(inp, torch.ones_like, needed_by="opd")


SKILL_SD_EXP_CLAMP = 20.0
"""Skill-SD clamps the exponent of k3 at 20 (``skillsd_utils.py``)."""
SKILL_SD_RATIO_CLAMP = 10.0
"""Skill-SD clamps the log importance ratio at 10 before exp."""


def skill_sd_loss(inp: LossInputs) -> LossOutput:
    """Skill-SD (SDAR's static-skill reproduction, §1.10 table), as SDAR computes it: ``compute_sdl_loss`` in
    ``verl/trainer/ppo/skillsd_utils.py:14-55`` of the SDAR repository, whose importance ratio (``:48-49``) is taken
    from the student log-probs that carry the gradient, so rho is differentiated too.

        e   = l^S - l^T                                    (B, T); l^T detached
        k3  = exp(min(-e, 20)) - 1 + e                     >= 0, = 0 iff l^S == l^T
        rho = exp(min(l^S - l^old, 10))                    importance ratio to the rollout policy (with gradient)
        L   = masked_mean(rho * k3, mask * teacher_mask[:, None])

    dL/dl^S = rho * (k3 + 1 - exp(l^T - l^S)) / N on the N active tokens where neither clamp binds (a clamped
    factor contributes no gradient of its own).
    Metrics: opd_loss, teacher_gap_mean, teacher_coverage, skill_sd_ratio_mean.
    """
    active = inp.teacher_token_mask()
    keep = active != 0
    zeros = torch.zeros_like(inp.logprobs)
    student = torch.where(keep, inp.logprobs, zeros)
    teacher = torch.where(keep, inp.require("teacher_logprobs", needed_by="skill_sd").detach(), zeros)
    old = torch.where(keep, inp.old_logprobs.detach(), zeros)
    e = student - teacher
    k3 = torch.exp((-e).clamp(max=SKILL_SD_EXP_CLAMP)) - 1.0 + e
    rho = torch.exp((student - old).clamp(max=SKILL_SD_RATIO_CLAMP))
    loss = masked_mean(rho * k3, active)
    response_tokens = inp.mask.sum()
    metrics = {
        "opd_loss": as_float(loss),
        "teacher_gap_mean": as_float(masked_mean(teacher - student.detach(), active)),
        "teacher_coverage": as_float(active.sum() / response_tokens if as_float(response_tokens) > 0 else 0.0),
        "skill_sd_ratio_mean": as_float(masked_mean(rho.detach(), active)),
    }
    return loss, metrics
