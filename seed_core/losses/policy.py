"""Policy-gradient losses (seed-algorithm.md §1.4): ``POLICY_LOSSES`` (``seed_core.registries``) maps
``rl.policy_loss`` to a pure function ``(LossInputs, **kwargs) -> (loss, metrics)``; the trainer adds KL, entropy
and distillation terms.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from seed_core.losses.aggregate import masked_mean
from seed_core.losses.types import LossInputs, LossOutput, as_float

PolicyLossFn = Callable[..., LossOutput]

LOG_RATIO_CLAMP = 20.0
"""verl clamps log(ratio) to +-20 before exp so a drifted or padded token can't produce inf/NaN."""


def _log_ratio(inp: LossInputs) -> Tensor:
    """(B, T) log pi_theta - log pi_old on valid tokens, 0 on padding, clamped to +-20."""
    diff = inp.logprobs - inp.old_logprobs.detach()
    diff = torch.where(inp.mask != 0, diff, torch.zeros_like(diff))
    return diff.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


def ppo_clip_loss(
    inp: LossInputs,
    *,
    clip_ratio_low: float = 0.2,
    clip_ratio_high: float = 0.2,
    clip_ratio_c: float = 3.0,
) -> LossOutput:
    """Dual-clip PPO surrogate, token-mean (§1.4, verl ``compute_policy_loss`` "vanilla").

        r    = exp(l - l_old)                                  (B, T)
        pg1  = -A r ;  pg2 = -A clip(r, 1 - low, 1 + high) ;  pgc = max(pg1, pg2)
        pg3  = -A c                                            dual clip (Ye et al. 2020, arXiv 1912.09729)
        pg   = min(pg3, pgc) where A < 0, else pgc
        L    = masked_mean(pg, mask)

    Uses inp.logprobs, old_logprobs, advantages, mask (all (B, T)). PPO: arXiv 1707.06347.
    Metrics (python floats): pg_loss, clip_frac (tokens where the clipped branch pg2 > pg1 is active),
    dual_clip_frac (A < 0 tokens capped at -A c), ppo_kl (mean l_old - l), ratio_mean.
    """
    if clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c must be > 1 (dual clip caps the loss at c*|A|), got {clip_ratio_c}")
    if not (0.0 <= clip_ratio_low < 1.0 and clip_ratio_high >= 0.0):
        raise ValueError(
            f"need 0 <= clip_ratio_low < 1 and clip_ratio_high >= 0, got {clip_ratio_low}, {clip_ratio_high}"
        )
    adv, mask = inp.advantages.detach(), inp.mask
    log_ratio = _log_ratio(inp)  # (B, T)
    ratio = torch.exp(log_ratio)
    pg1 = -adv * ratio
    pg2 = -adv * ratio.clamp(1.0 - clip_ratio_low, 1.0 + clip_ratio_high)
    pg_clip = torch.maximum(pg1, pg2)
    pg3 = -adv * clip_ratio_c
    negative = adv < 0
    pg = torch.where(negative, torch.minimum(pg3, pg_clip), pg_clip)
    loss = masked_mean(pg, mask)
    metrics = {
        "pg_loss": as_float(loss),
        "clip_frac": as_float(masked_mean((pg2 > pg1).to(mask.dtype), mask)),
        "dual_clip_frac": as_float(masked_mean(((pg_clip > pg3) & negative).to(mask.dtype), mask)),
        "ppo_kl": as_float(masked_mean(-log_ratio.detach(), mask)),
        "ratio_mean": as_float(masked_mean(ratio.detach(), mask)),
    }
    return loss, metrics


def reinforce_loss(inp: LossInputs, **_clip: float) -> LossOutput:
    """Plain policy gradient without ratio or clipping (Williams 1992), token-mean.

    Clip keywords are accepted and ignored so every POLICY_LOSSES entry is called the same way.

        L = masked_mean(-A * l, mask)          A, l, mask: (B, T)

    On-policy only (one update per rollout); metrics: pg_loss.
    """
    logprobs = torch.where(inp.mask != 0, inp.logprobs, torch.zeros_like(inp.logprobs))
    loss = masked_mean(-inp.advantages.detach() * logprobs, inp.mask)
    return loss, {"pg_loss": as_float(loss)}
