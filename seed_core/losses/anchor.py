"""The anchor loss of the ``anchored`` analyzer governance (issue 39): it keeps the policy's analysis alive.

Two terms on the round's own analyses (prompt x_i, the analyzer's answer y_i, i = 1..N):

    r_i    = clip(c_g * g_i * [won_i] + b_json * [valid_i] + b_ne * [nonempty_i] - p_long * [chars_i > m], -C, C)
    l_i    = (1 / |y_i|) sum_t log pi(y_i,t | x_i, y_i,<t)
    L_sg   = -(1 / N) sum_i r_i * l_i
    L_kl   = sum_{i,t} k3_{i,t} / sum_i |y_i|,   k3 = exp(q - p) - (q - p) - 1,  p = log pi, q = log pi_0
    L      = c_sg * L_sg + c_kl * L_kl

``L_sg`` is SEED's skill-generation loss as its code computes it (public fork ``zhangdw156/SEED``): the reward is
``seed/skill_gen.py:44-91`` (``compute_skill_gen_reward``: the downstream log-prob gain counted only on won episodes,
failed_reward_mode "zero"; the bonuses, penalty, length limit and clip are ``SkillGenRewardConfig``'s defaults at
``seed/skill_gen.py:5-13``, ``SEED_REWARD``); g_i is the mean, over the trajectory's teacher-scored response tokens,
of log pi_old(y | teacher prompt) - log pi_old(y | prompt) (``verl/trainer/ppo/ray_trainer.py``
``_build_seed_skill_gen_payload``); l_i and the batch mean are ``verl/workers/actor/dp_actor.py``
``backward_skill_gen_loss`` (a per-answer token mean, weighted by the detached reward, averaged over answers). SEED
takes it as a separate optimizer step after the PPO update, with coefficient ``skill_gen_loss_coef`` (0.01 in its
launchers where it is on; off in the paper's). ``L_kl`` is our extension: the k3 KL estimator of pi against the
Stage-1 model pi_0 on the same analysis tokens (token mean), which pulls the analysis format back to what Stage 1
taught without touching the action tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch


@dataclass(frozen=True)
class SkillGenReward:
    """SEED's ``SkillGenRewardConfig`` defaults (``seed/skill_gen.py:5-13``)."""

    gain_coef: float = 1.0
    valid_json_bonus: float = 0.2
    non_empty_bonus: float = 0.2
    too_long_penalty: float = 0.2
    max_output_chars: int = 1200
    clip: float = 2.0


SEED_REWARD = SkillGenReward()


def skill_gen_reward(gain: float, won: bool, valid_json: bool, non_empty: bool, chars: int,
                     spec: SkillGenReward = SEED_REWARD) -> float:
    """r_i of the module docstring (a gain on a lost episode counts 0, SEED's "zero" mode)."""
    too_long = spec.max_output_chars > 0 and chars > spec.max_output_chars
    reward = (spec.gain_coef * (gain if won else 0.0) + spec.valid_json_bonus * valid_json
              + spec.non_empty_bonus * non_empty - spec.too_long_penalty * too_long)
    return max(min(reward, spec.clip), -spec.clip) if spec.clip > 0 else reward


def anchor_loss(logprobs: torch.Tensor, ref_logprobs: torch.Tensor | None, mask: torch.Tensor,
                rewards: Sequence[float], sg_coef: float, kl_coef: float) -> tuple[torch.Tensor, dict[str, float]]:
    """L = c_sg L_sg + c_kl L_kl over (N, T) analysis-token log-probs (``mask`` 1 on answer tokens; ``ref_logprobs``
    None: no KL term). Returns the loss and ``anchor/*`` metrics."""
    mask = mask.to(logprobs.dtype)
    lengths = mask.sum(dim=-1)
    seq_mean = (logprobs * mask).sum(dim=-1) / lengths.clamp_min(1.0)
    reward = torch.as_tensor(list(rewards), dtype=logprobs.dtype, device=logprobs.device)
    sg = -(reward * seq_mean).mean() if len(reward) else logprobs.new_zeros(())
    loss = sg_coef * sg
    metrics = {"anchor/sg_loss": float(sg.detach()), "anchor/reward_mean": float(reward.mean()) if len(reward) else 0.0,
               "anchor/seq_logprob_mean": float(seq_mean.detach().mean()) if len(reward) else 0.0}
    if ref_logprobs is not None and kl_coef > 0:
        diff = ref_logprobs.to(logprobs.dtype) - logprobs
        k3 = (torch.exp(diff) - diff - 1.0) * mask
        kl = k3.sum() / mask.sum().clamp_min(1.0)
        loss = loss + kl_coef * kl
        metrics["anchor/kl"] = float(kl.detach())
    metrics["anchor/loss"] = float(loss.detach())
    return loss, metrics
