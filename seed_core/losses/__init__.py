"""Pure loss and advantage functions of the RL stage (seed-algorithm.md §1.2-1.12): ``advantages``, ``policy``,
``distill``, ``regularizers`` (KL, entropy), ``aggregate`` (masked means) and ``types`` (``LossInputs``).

Tables (``seed_core.registries``): ``ADVANTAGES`` (rl.advantage), ``POLICY_LOSSES`` (rl.policy_loss),
``DISTILL_LOSSES`` (rl.distill_loss). Nothing here reads a config: the trainer passes explicit keyword arguments.
This package re-exports the tables and the modules that import no other module of it (``advantages``,
``aggregate``, ``types``): re-exporting one that does (``distill``) would make importing any loss module load
every other one (an import circle through this file; tests/unit/test_layering.py).
"""

from seed_core.losses.advantages import opid_shaped_advantages, rlsd_lambda, rlsd_reweighted_advantages, step_scores
from seed_core.losses.aggregate import masked_mean, masked_sum
from seed_core.losses.types import LossInputs, LossOutput
from seed_core.registries import ADVANTAGES, DISTILL_LOSSES, POLICY_LOSSES

__all__ = [
    "ADVANTAGES",
    "DISTILL_LOSSES",
    "POLICY_LOSSES",
    "LossInputs",
    "LossOutput",
    "masked_mean",
    "masked_sum",
    "opid_shaped_advantages",
    "rlsd_lambda",
    "rlsd_reweighted_advantages",
    "step_scores",
]
