"""Per-step scores and group-relative advantages (seed-algorithm.md §1.2, §1.3, §1.8).

``ADVANTAGES`` (``seed_core.registries``) maps ``rl.advantage`` to a pure function ``(scores (N,), group_ids (N,))
-> (N,)``; the trainer broadcasts the result over each step sample's response tokens. ``opid_shaped_advantages`` is
OPID's token-level teacher shaping used by the ``opid`` algorithm.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import torch
from torch import Tensor

AdvantageFn = Callable[[Tensor, Sequence[Hashable]], Tensor]

GRPO_EPS = 1e-6
"""verl's epsilon in (s - mean) / (std + eps)."""


def step_scores(
    episode_returns: Tensor | Sequence[float], format_valid: Tensor | Sequence[bool], penalty: float
) -> Tensor:
    """Score of every step sample: S_i = R(tau(i)) - penalty * 1[step i format-invalid]  (§1.2).

    episode_returns: (N,) return of the trajectory each step belongs to (same value for all its steps).
    format_valid:    (N,) bool, whether the step's response parsed to a valid action.
    penalty:         invalid-action penalty c (verl-agent 0.1; Search 0.01). Returns (N,) float32.
    """
    returns = torch.as_tensor(episode_returns, dtype=torch.float32)
    valid = torch.as_tensor(format_valid, dtype=torch.bool)
    if returns.dim() != 1 or returns.shape != valid.shape:
        raise ValueError(
            f"episode_returns {tuple(returns.shape)} and format_valid {tuple(valid.shape)} must both be (N,), "
            f"one entry per step sample"
        )
    return returns - penalty * (~valid).to(returns.dtype)


def _group_index(group_ids: Sequence[Hashable] | Tensor, n: int) -> tuple[Tensor, int]:
    """(N,) long index of each sample's group (in first-seen order) and the number of groups."""
    ids = group_ids.tolist() if isinstance(group_ids, Tensor) else list(group_ids)
    if len(ids) != n:
        raise ValueError(f"group_ids has {len(ids)} entries but scores has {n}; give one group id per step sample")
    slots: dict[Hashable, int] = {}
    index = [slots.setdefault(g, len(slots)) for g in ids]
    return torch.tensor(index, dtype=torch.long), len(slots)


def _group_mean_std(scores: Tensor, group_ids: Sequence[Hashable] | Tensor) -> tuple[Tensor, Tensor]:
    """Per-sample (N,) group mean and unbiased group std, pooled over ALL step samples of the group.

    A group with a single sample gets mean 0 and std 1 (verl ``compute_grpo_outcome_advantage``).
    Statistics are computed in float64 and returned in the scores' dtype.
    """
    if scores.dim() != 1 or not scores.is_floating_point():
        raise ValueError(
            f"scores must be a 1-D float tensor (N,), got shape {tuple(scores.shape)} dtype {scores.dtype}"
        )
    index, num_groups = _group_index(group_ids, scores.shape[0])
    index = index.to(scores.device)
    s = scores.detach().double()
    counts = torch.zeros(num_groups, dtype=torch.float64, device=s.device).index_add_(0, index, torch.ones_like(s))
    sums = torch.zeros_like(counts).index_add_(0, index, s)
    mean = sums / counts
    sq_dev = torch.zeros_like(counts).index_add_(0, index, (s - mean[index]) ** 2)
    std = torch.sqrt(sq_dev / (counts - 1).clamp_min(1.0))
    single = counts == 1
    mean = torch.where(single, torch.zeros_like(mean), mean)
    std = torch.where(single, torch.ones_like(std), std)
    return mean[index].to(scores.dtype), std[index].to(scores.dtype)


def grpo_advantages(scores: Tensor, group_ids: Sequence[Hashable] | Tensor) -> Tensor:
    """GRPO outcome advantage with std normalisation (§1.3, verl ``compute_grpo_outcome_advantage``).

        A_i = (s_i - mean_g) / (std_g + 1e-6),   g = group of sample i

    scores: (N,) per-step-sample scores S_i; group_ids: (N,) GRPO group (task) of each sample.
    mean/std pool every step sample of the group (a 3-step trajectory counts 3 times), std is unbiased
    (N-1); a single-sample group uses mean 0, std 1. Returns (N,). GRPO: arXiv 2402.03300.
    """
    mean, std = _group_mean_std(scores, group_ids)
    return (scores - mean) / (std + GRPO_EPS)


def grpo_mean_advantages(scores: Tensor, group_ids: Sequence[Hashable] | Tensor) -> Tensor:
    """Mean-only group advantage, no std division (§1.3; Dr.GRPO arXiv 2503.20783, OPID ``mean_norm``).

        A_i = s_i - mean_g

    Same pooling over step samples as ``grpo``; a single-sample group has mean 0 (A_i = s_i). (N,) -> (N,).
    """
    mean, _ = _group_mean_std(scores, group_ids)
    return scores - mean


def opid_shaped_advantages(
    advantages: Tensor,
    teacher_logprobs: Tensor,
    old_logprobs: Tensor,
    mask: Tensor,
    teacher_mask: Tensor,
    *,
    coef: float,
) -> Tensor:
    """OPID advantage shaping with the skill-induced shift (§1.8, OPID arXiv 2606.26790).

        A'_{b,t} = A_{b,t} + coef * sg(l^T_{b,t} - l^old_{b,t}) * mask_{b,t} * teacher_mask_b

    advantages, teacher_logprobs, old_logprobs, mask: (B, T); teacher_mask: (B,) 1.0 where the
    trajectory has a valid skill. Tokens without a teacher keep A unchanged (teacher values there are
    ignored, even NaN). Returns (B, T), detached from the teacher and old log-probs.
    """
    shape = advantages.shape
    for name, t in (("teacher_logprobs", teacher_logprobs), ("old_logprobs", old_logprobs), ("mask", mask)):
        if t.shape != shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}, expected advantages' shape {tuple(shape)}")
    if teacher_mask.shape != shape[:1]:
        raise ValueError(f"teacher_mask must be (B,) = ({shape[0]},), got {tuple(teacher_mask.shape)}")
    active = mask * teacher_mask.to(mask.dtype)[:, None]  # (B, T)
    shift = (teacher_logprobs - old_logprobs).detach()
    shift = torch.where(active != 0, shift, torch.zeros_like(shift))
    return advantages + coef * shift * active


def rlsd_lambda(step: int, *, lambda0: float, decay_steps: int) -> float:
    """RLSD's mixing weight, linearly decayed: lambda_t = lambda0 * max(0, 1 - t / decay_steps) (0.5 -> 0 over 100)."""
    if decay_steps <= 0:
        return 0.0
    return lambda0 * max(0.0, 1.0 - step / decay_steps)


def rlsd_reweighted_advantages(
    advantages: Tensor,
    teacher_logprobs: Tensor,
    old_logprobs: Tensor,
    mask: Tensor,
    teacher_mask: Tensor,
    *,
    lam: float,
    clip: float,
) -> Tensor:
    """RLSD advantage reweighting by the teacher shift (§1.10 table; SDAR repo ``rlsd_utils.py:145-183``).

        delta = sg(l^T - l^old)                                        (B, T)
        w     = clip(exp(sign(A) * delta), 1 - clip, 1 + clip)         eps_w = clip = 0.2
        A'    = A * ((1 - lam) + lam * w)                               on tokens with a teacher; A elsewhere

    A positive advantage is amplified where the teacher endorses the token (delta > 0), a negative one
    where the teacher rejects it. advantages, teacher_logprobs, old_logprobs, mask: (B, T); teacher_mask:
    (B,). Returns (B, T), detached from the teacher and old log-probs.
    """
    active = mask * teacher_mask.to(mask.dtype)[:, None]
    delta = (teacher_logprobs - old_logprobs).detach()
    delta = torch.where(active != 0, delta, torch.zeros_like(delta))
    w = torch.exp(torch.sign(advantages) * delta).clamp(1.0 - clip, 1.0 + clip)
    scale = torch.where(active != 0, (1.0 - lam) + lam * w, torch.ones_like(w))
    return advantages * scale
