"""The name tables of seed's open sets: each name with the ``"module:attr"`` of its implementation, imported
on first ``get`` (``seed_core.registry.Registry``), and what the entry declares: the config keys it reads
(``Entry.reads``), a loss's coefficient and arguments (``LossEntry``), a backend's abilities (``BackendEntry``). So
the config loader checks every name of a config without importing an environment, a loss or torch;
``seed_core.lineage.stage_params`` derives what each stage reads from these declarations (an algorithm's keys are
its parts' keys); and ``seed_core.lineage.code_closure`` reads the tables (statically, as it reads imports) to give
each stage the implementation files its config can select, and no other.

A new implementation is one entry here (tests/unit/test_registry.py imports every entry and checks its name).
The modules that use a table import it from its package as before (``seed_core.envs.ENVS``,
``seed_core.losses.DISTILL_LOSSES``, ``seed_core.rollout.backends.BACKENDS``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from seed_core.registry import Entry, Registry


@dataclass(frozen=True)
class BackendEntry(Entry):
    """A generation backend and what it can do, asked instead of its name."""

    in_process: bool = False
    """Generates from the policy's weights in this process (``hf``): the trained policy, or any weights handed to
    it (a governed analyzer's own). So it cannot run on a policy FSDP shards across processes."""
    reloads_weights: bool = False
    """A separate engine that loads the policy's weights from disk each round (``vllm``)."""
    serves: bool = False
    """Can be an already running server (``generation.vllm.base_url``) whose health the pre-flight checks."""


@dataclass(frozen=True)
class LossEntry(Entry):
    """A loss term: the config key of its coefficient and the config keys of its keyword arguments."""

    coef: str = ""
    """The dotted config key the term is multiplied by (``rl.opd_coef``)."""
    kwargs: tuple[tuple[str, str], ...] = ()
    """(keyword argument, dotted config key) pairs it is called with (the gated loss's ``beta``: ``rl.gate_beta``)."""

    @property
    def keys(self) -> tuple[str, ...]:
        return (*((self.coef,) if self.coef else ()), *(key for _, key in self.kwargs), *self.reads)


ENVS: Registry[Any] = Registry("environment", {
    "alfworld": "seed_core.envs.alfworld:ALFWorldEnv",
    "ezpoints": "seed_core.envs.ezpoints:EZPointsEnv",
    "search_qa": "seed_core.envs.search_qa:SearchQAEnv",
    "sokoban": "seed_core.envs.sokoban:SokobanEnv",
    "webshop": "seed_core.envs.webshop:WebShopEnv",
})
"""``env.name``: the environment class, built as ``ENVS.get(name)(cfg.env)`` (``seed_core.envs.make_env``)."""


BACKENDS: Registry[Any] = Registry("generation backend", {
    "hf": BackendEntry("seed_core.rollout.backends:HFBackend", in_process=True),
    "vllm": BackendEntry("seed_core.rollout.vllm_backend:VLLMBackend", reloads_weights=True, serves=True),
})
"""``generation.backend``: built by ``seed_core.rollout.backends.make_backend(policy, gen_cfg)``, the one place."""

ANNOTATOR_KEYS = ("annotate.client", "annotate.model", "annotate.temperature", "annotate.max_tokens",
                  "annotate.parse_attempts", "annotate.timeout_s", "annotate.max_retries", "annotate.prompt_version")
"""What the Stage-1 analyzer's answers depend on (``openai``: model and sampling; the oracle: nothing more): the
annotate stage's analyzer, and OPID's (``Algorithm.analyzer`` ``annotate``)."""
SELF_ANALYZER_KEYS = ("rl.analyzer_temperature", "rl.analyzer_max_new_tokens", "annotate.parse_attempts")
"""What the policy's own analyses depend on besides its weights."""

CLIENTS: Registry[Any] = Registry("analyzer client", {
    "checkpoint": Entry("seed_core.analyzer.clients:checkpoint_client",
                        reads=(*SELF_ANALYZER_KEYS, "rl.analyzer_checkpoint")),
    "openai": Entry("seed_core.analyzer.openai_client:openai_client", reads=ANNOTATOR_KEYS),
    "oracle": Entry("seed_core.analyzer.clients:oracle_client", reads=("annotate.parse_attempts",)),
    "policy": Entry("seed_core.analyzer.clients:policy_client", reads=SELF_ANALYZER_KEYS),
})
"""``annotate.client`` and ``Algorithm.analyzer``: ``CLIENTS.get(name)(cfg, env=, backend=, checkpoint=)``."""

GOVERNANCE: Registry[Any] = Registry("analyzer governance", {
    "live": "seed_core.analyzer.governance:LIVE",
    "frozen": "seed_core.analyzer.governance:FROZEN",
    "ema": Entry("seed_core.analyzer.governance:EMA", reads=("rl.analyzer_ema_rate",)),
    "gated": Entry("seed_core.analyzer.governance:GATED", reads=("rl.audit_panel_tasks", "rl.audit_tolerance")),
    "anchored": Entry("seed_core.analyzer.governance:ANCHORED", reads=("rl.anchor_coef", "rl.anchor_kl_coef")),
})
"""``Algorithm.governance``: how a self-analyzer's weights follow the policy (``seed_core.analyzer.governance``)."""

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
    "gated_opd": LossEntry("seed_core.losses.distill:gated_opd_loss", coef="rl.opd_coef",
                           kwargs=(("beta", "rl.gate_beta"),)),
    "opd": LossEntry("seed_core.losses.distill:opd_loss", coef="rl.opd_coef"),
    "skill_sd": LossEntry("seed_core.losses.distill:skill_sd_loss", coef="rl.opd_coef"),
})
"""``rl.distill_loss`` (or the one an algorithm fixes): ``(LossInputs, **kwargs) -> (loss, metrics)``, multiplied
by its ``coef`` (``seed_core.trainer.compose``); ``kwargs`` come from the config as the entry declares them."""

SHAPINGS: Registry[Any] = Registry("advantage shaping", {
    "opid": Entry("seed_core.trainer.shapings:opid_shaping", reads=("rl.opid_coef",)),
    "rlsd": Entry("seed_core.trainer.shapings:rlsd_shaping",
                  reads=("rl.rlsd_lambda0", "rl.rlsd_decay_steps", "rl.rlsd_clip")),
})
"""``Algorithm.shaping``: ``(LossInputs, RLConfig, step) -> per-token advantages (B, T)``."""

RETRIEVAL_METHODS: Registry[Any] = Registry("retrieval method", {
    "bm25": "seed_core.retrieval.bm25:build_bm25",
    "dense": "seed_core.retrieval.dense:build_dense",
    "hybrid": "seed_core.retrieval.hybrid:build_hybrid",
})
"""``env.search_qa.retrieval_method``: ``(texts, IndexOptions) -> SearchIndex`` (``seed_core.retrieval.methods``)."""
