"""The actor loss of one micro-batch, composed from an ``Algorithm`` record (seed-algorithm.md §1.7-1.10).

    A'   = SHAPINGS[algorithm.shaping](A, ...)                     per-token advantage (OPID §1.8, RLSD §1.10)
    L_tok = pg_coef * L_PG(A') + kl_coef * KL_k3(pi || ref) - entropy_coef * H     token-means over ``mask``
    L_dis = c * DISTILL_LOSSES[distill_loss](**kwargs)                               token-mean over teacher tokens
    L     = L_tok + L_dis                                                          (algorithm.distill only)

c is the value of the key the loss's entry declares as its coefficient (``LossEntry.coef``: ``rl.opd_coef`` for the
three losses of the paper) and ``kwargs`` the values of its declared arguments (the gated loss's ``beta``:
``rl.gate_beta``), so a loss with a coefficient of its own needs no edit here.
``cfg`` must be the *effective* RL config (``seed_core.algorithms.effective_rl``): the algorithm's fixed
values are already in it, so the coefficients used here are exactly the ones logged. Pure: no model, no
I/O, so tests pin the composition (sign, coefficient and mask of each term) on hand-made tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from torch import Tensor

from seed_core.algorithms import Algorithm, loss_coef, loss_kwargs
from seed_core.config import RLConfig
from seed_core.losses.regularizers import entropy_bonus, kl_k3
from seed_core.losses.types import LossInputs
from seed_core.registries import DISTILL_LOSSES, POLICY_LOSSES, SHAPINGS


@dataclass
class ComposedLoss:
    token_loss: Tensor
    """pg_coef * L_PG + kl_coef * KL - entropy_coef * H (token-mean over ``mask``)."""
    distill_loss: Tensor | None
    """c * L_distill (token-mean over teacher tokens), None without a distillation term."""
    metrics: dict[str, float]
    pg_loss: Tensor | None = None
    """L_PG(A') before ``pg_coef`` (the policy-gradient term the distillation is compared with: ``rl/grad_ratio``)."""

    @property
    def total(self) -> Tensor:
        return self.token_loss if self.distill_loss is None else self.token_loss + self.distill_loss


def compose_loss(inp: LossInputs, *, cfg: RLConfig, algorithm: Algorithm, step: int = 0) -> ComposedLoss:
    """The terms of one micro-batch (module docstring). ``inp.advantages`` are the unshaped (B, T) advantages;
    ``inp.ref_logprobs`` None skips KL, ``inp.entropy`` None skips the entropy bonus; ``step`` is the RL round
    (RLSD's lambda schedule)."""
    if algorithm.shaping is not None:
        inp = replace(inp, advantages=SHAPINGS.get(algorithm.shaping)(inp, cfg, step))
    pg, metrics = POLICY_LOSSES.get(cfg.policy_loss)(
        inp, clip_ratio_low=cfg.clip_ratio_low, clip_ratio_high=cfg.clip_ratio_high, clip_ratio_c=cfg.clip_ratio_c)
    loss = cfg.pg_coef * pg
    if inp.ref_logprobs is not None:
        kl, kl_metrics = kl_k3(inp.logprobs, inp.ref_logprobs, inp.mask)
        loss = loss + cfg.kl_coef * kl
        metrics.update(kl_metrics)
    if inp.entropy is not None:
        ent, ent_metrics = entropy_bonus(inp.entropy, inp.mask)
        loss = loss - cfg.entropy_coef * ent
        metrics.update(ent_metrics)
    distill = None
    if algorithm.distill:
        d, d_metrics = DISTILL_LOSSES.get(cfg.distill_loss)(inp, **loss_kwargs(cfg))
        distill = loss_coef(cfg) * d
        metrics.update(d_metrics)
    return ComposedLoss(loss, distill, metrics, pg_loss=pg)
