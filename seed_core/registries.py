"""The name tables of seed's open sets: each name with the ``"module:attr"`` of its implementation, imported
on first ``get`` (``seed_core.registry.Registry``). So the config loader checks every name of a config without
importing an environment, a loss or torch, and ``seed_core.lineage.code_closure`` reads these tables (statically, as it
reads imports) to give each stage the implementation files its config can select, and no other.

A new implementation is one line here (tests/unit/test_registry.py imports every entry and checks its name).
The modules that use a table import it from its package as before (``seed_core.envs.ENVS``,
``seed_core.losses.DISTILL_LOSSES``, ``seed_core.rollout.backends.BACKENDS``, ...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seed_core.registry import Registry

if TYPE_CHECKING:
    from seed_core.envs.base import TextEnv

ENVS: "Registry[type[TextEnv]]" = Registry("environment", {
    "alfworld": "seed_core.envs.alfworld:ALFWorldEnv",
    "ezpoints": "seed_core.envs.ezpoints:EZPointsEnv",
    "search_qa": "seed_core.envs.search_qa:SearchQAEnv",
    "sokoban": "seed_core.envs.sokoban:SokobanEnv",
    "webshop": "seed_core.envs.webshop:WebShopEnv",
})
"""``env.name``: the environment class, built as ``ENVS.get(name)(cfg.env)`` (``seed_core.envs.make_env``)."""

BACKENDS: Registry[Any] = Registry("generation backend", {
    "hf": "seed_core.rollout.backends:HFBackend",
    "vllm": "seed_core.rollout.vllm_backend:VLLMBackend",
})
"""``generation.backend``: ``BACKENDS.get(name)(policy, gen_cfg)`` (``seed_core.rollout.backends``)."""

CLIENTS: Registry[Any] = Registry("analyzer client", {
    "checkpoint": "seed_core.analyzer.clients:checkpoint_client",
    "openai": "seed_core.analyzer.openai_client:openai_client",
    "oracle": "seed_core.analyzer.clients:oracle_client",
    "policy": "seed_core.analyzer.clients:policy_client",
})
"""``annotate.client`` and ``Algorithm.analyzer``: ``CLIENTS.get(name)(cfg, env=, backend=, checkpoint=)``."""

ADVANTAGES: Registry[Any] = Registry("advantage estimator", {
    "grpo": "seed_core.losses.advantages:grpo_advantages",
    "grpo_mean": "seed_core.losses.advantages:grpo_mean_advantages",
})
"""``rl.advantage``: ``(scores (N,), group_ids) -> advantages (N,)``."""

POLICY_LOSSES: Registry[Any] = Registry("policy loss", {
    "ppo_clip": "seed_core.losses.policy:ppo_clip_loss",
    "reinforce": "seed_core.losses.policy:reinforce_loss",
})
"""``rl.policy_loss``: ``(LossInputs, *, clip_ratio_low, clip_ratio_high, clip_ratio_c) -> (loss, metrics)``."""

DISTILL_LOSSES: Registry[Any] = Registry("distillation loss", {
    "gated_opd": "seed_core.losses.distill:gated_opd_loss",
    "opd": "seed_core.losses.distill:opd_loss",
    "skill_sd": "seed_core.losses.distill:skill_sd_loss",
})
"""``rl.distill_loss`` (or the one an algorithm fixes): ``(LossInputs, *, beta) -> (loss, metrics)``."""

SHAPINGS: Registry[Any] = Registry("advantage shaping", {
    "opid": "seed_core.trainer.shapings:opid_shaping",
    "rlsd": "seed_core.trainer.shapings:rlsd_shaping",
})
"""``Algorithm.shaping``: ``(LossInputs, RLConfig, step) -> per-token advantages (B, T)``."""

RETRIEVAL_METHODS: Registry[Any] = Registry("retrieval method", {
    "bm25": "seed_core.retrieval.bm25:build_bm25",
    "dense": "seed_core.retrieval.dense:build_dense",
    "hybrid": "seed_core.retrieval.hybrid:build_hybrid",
})
"""``env.search_qa.retrieval_method``: ``(texts, IndexOptions) -> SearchIndex`` (``seed_core.retrieval.methods``)."""
