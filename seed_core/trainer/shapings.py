"""Advantage shapings (``SHAPINGS`` in ``seed_core.registries``; ``Algorithm.shaping``): the per-token advantage
A' an algorithm trains on instead of the broadcast group advantage A (seed-algorithm.md §1.8, §1.10). Used by
``seed_core.trainer.compose``; only the rl stages of the algorithms that name a shaping reach this file."""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from seed_core.config import RLConfig
from seed_core.losses.advantages import opid_shaped_advantages, rlsd_lambda, rlsd_reweighted_advantages
from seed_core.losses.types import LossInputs

Shaping = Callable[[LossInputs, RLConfig, int], Tensor]
"""``(inputs, effective RL config, RL round) -> A'`` (B, T)."""


def opid_shaping(inp: LossInputs, cfg: RLConfig, step: int) -> Tensor:
    """A' = A + opid_coef * sg(l^T - l^old) on teacher tokens (§1.8)."""
    return opid_shaped_advantages(inp.advantages, inp.require("teacher_logprobs", needed_by="opid shaping"),
                                  inp.old_logprobs, inp.mask, _tmask(inp), coef=cfg.opid_coef)


def rlsd_shaping(inp: LossInputs, cfg: RLConfig, step: int) -> Tensor:
    """A' = A ((1 - lam_t) + lam_t clip(exp(sign(A) delta), 1 +- eps_w)), lam_t decayed linearly (§1.10)."""
    lam = rlsd_lambda(step, lambda0=cfg.rlsd_lambda0, decay_steps=cfg.rlsd_decay_steps)
    return rlsd_reweighted_advantages(inp.advantages, inp.require("teacher_logprobs", needed_by="rlsd shaping"),
                                      inp.old_logprobs, inp.mask, _tmask(inp), lam=lam, clip=cfg.rlsd_clip)


def _tmask(inp: LossInputs) -> Tensor:
    return inp.teacher_mask if inp.teacher_mask is not None else torch.ones_like(inp.logprobs[:, 0])
