"""Algorithms = named bundles of (analyzer, distillation term, advantage shaping) (DESIGN §7).

The trainer never branches on the algorithm name; it reads the ``Algorithm`` record:

| name | analyzer | distillation | gate beta | advantage |
|---|---|---|---|---|
| grpo | none | none | - | GRPO |
| seed | ``policy``: the current policy, refreshed every update | gated OPD | rl.gate_beta | GRPO |
| seed_static | ``checkpoint``: frozen at the Stage-1 checkpoint | gated OPD | rl.gate_beta | GRPO |
| sdar | ``checkpoint`` (static skills) | gated OPD | 5.0 | GRPO |
| grpo_opsd | ``checkpoint`` (static skills) | gated OPD | 0.0 (g = 0.5) | GRPO |
| opid | ``policy`` | none | - | GRPO + opid_coef * shift (OPID §1.8) |
"""

from __future__ import annotations

from dataclasses import dataclass

from seed_core.registry import Registry


@dataclass(frozen=True)
class Algorithm:
    name: str
    analyzer: str | None
    """Key in CLIENTS that writes skills during RL (``policy`` or ``checkpoint``), None = no skills."""
    distill: bool
    """Add ``rl.opd_coef * DISTILL_LOSSES[rl.distill_loss]`` to the loss."""
    gate_beta: float | None = None
    """Fixed gate sharpness; None = ``rl.gate_beta``."""
    opid_shaping: bool = False
    """Add ``rl.opid_coef * (teacher - old)`` to the per-token advantage."""

    @property
    def needs_teacher(self) -> bool:
        return self.distill or self.opid_shaping


ALGORITHMS: Registry[Algorithm] = Registry("algorithm")

CHECKPOINT_METHODS = ("vanilla", "sft")
"""Evaluated methods that are a checkpoint, not an RL run: the base model and the Stage-1 checkpoint."""

for _algo in (
    Algorithm("grpo", analyzer=None, distill=False),
    Algorithm("seed", analyzer="policy", distill=True),
    Algorithm("seed_static", analyzer="checkpoint", distill=True),
    Algorithm("sdar", analyzer="checkpoint", distill=True, gate_beta=5.0),
    Algorithm("grpo_opsd", analyzer="checkpoint", distill=True, gate_beta=0.0),
    Algorithm("opid", analyzer="policy", distill=False, opid_shaping=True),
):
    ALGORITHMS.register(_algo.name)(_algo)
