"""Pure loss and advantage functions of the RL stage (seed-algorithm.md §1.2-1.12).

Registries: ``ADVANTAGES`` (rl.advantage), ``POLICY_LOSSES`` (rl.policy_loss), ``DISTILL_LOSSES``
(rl.distill_loss). Nothing here reads a config: the trainer passes explicit keyword arguments.
"""

from seed_core.losses.advantages import (
    ADVANTAGES,
    opid_shaped_advantages,
    rlsd_lambda,
    rlsd_reweighted_advantages,
    step_scores,
)
from seed_core.losses.aggregate import masked_mean, masked_sum
from seed_core.losses.distill import DISTILL_LOSSES
from seed_core.losses.policy import POLICY_LOSSES
from seed_core.losses.regularizers import entropy_bonus, kl_k3
from seed_core.losses.types import LossInputs, LossOutput

__all__ = [
    "ADVANTAGES",
    "DISTILL_LOSSES",
    "POLICY_LOSSES",
    "LossInputs",
    "LossOutput",
    "entropy_bonus",
    "kl_k3",
    "masked_mean",
    "masked_sum",
    "opid_shaped_advantages",
    "rlsd_lambda",
    "rlsd_reweighted_advantages",
    "step_scores",
]
