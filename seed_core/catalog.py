"""Where each registry-key field of the config is checked: (dotted key, registry, value) triples."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from seed_core.config import SeedConfig
    from seed_core.registry import Registry


def registry_fields(cfg: "SeedConfig") -> Iterator[tuple[str, "Registry[Any]", str]]:
    from seed_core.algorithms import ALGORITHMS
    from seed_core.analyzer.clients import CLIENTS
    from seed_core.envs import ENVS
    from seed_core.losses import ADVANTAGES, DISTILL_LOSSES, POLICY_LOSSES
    from seed_core.rollout.backends import BACKENDS

    yield "env.name", ENVS, cfg.env.name
    yield "generation.backend", BACKENDS, cfg.generation.backend
    yield "annotate.client", CLIENTS, cfg.annotate.client
    yield "rl.algorithm", ALGORITHMS, cfg.rl.algorithm
    yield "rl.advantage", ADVANTAGES, cfg.rl.advantage
    yield "rl.policy_loss", POLICY_LOSSES, cfg.rl.policy_loss
    yield "rl.distill_loss", DISTILL_LOSSES, cfg.rl.distill_loss
    if cfg.rl.algorithm in ALGORITHMS:  # a loss the algorithm fixes (skill_sd) must exist too
        from seed_core.algorithms import effective_rl

        algo = ALGORITHMS.get(cfg.rl.algorithm)
        yield f"rl.algorithm={algo.name}: distill_loss", DISTILL_LOSSES, effective_rl(cfg.rl, algo).distill_loss
    from seed_core.methods import METHODS

    for i, method in enumerate(cfg.sweep.methods):  # vanilla, sft, an algorithm, or a "*" method of one
        yield f"sweep.methods[{i}]", METHODS, method
