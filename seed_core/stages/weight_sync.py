"""The RL round's weight-sync check: the generation engine must sample from the weights being trained.

``rollout/sampling_logp_diff_mean`` (``seed_core.trainer.rl_step.sampling_logp_diff``, TRL's
``sampling_logp_difference``) is the mean |engine log-prob - trainer log-prob under theta_old| over the round's
sampled tokens; above ``rl.max_sampling_logp_diff`` the round fails in one line that names the fix.
"""

from __future__ import annotations

import logging

from seed_core.config import SeedConfig
from seed_core.registries import BACKENDS
from seed_core.runtime.io import KnownError

log = logging.getLogger("seed_core.stages.rl")


class StaleEngineWeightsError(KnownError, RuntimeError):
    """The generation engine sampled from other weights than the ones being trained (``check_weight_sync``); its
    one-line message names the fix (a known error: the stage CLI and the flows print it without a traceback)."""


DIFF_MEAN, DIFF_MAX = "rollout/sampling_logp_diff_mean", "rollout/sampling_logp_diff_max"
"""The weight-sync monitor (``seed_core.trainer.rl_step.sampling_logp_diff``), in curve.csv and MLflow."""


def check_weight_sync(cfg: SeedConfig, metrics: dict[str, float], round_idx: int) -> None:
    """Raise ``StaleEngineWeightsError`` when the round's mean |engine log-prob - trainer log-prob under
    theta_old| exceeds ``rl.max_sampling_logp_diff`` (0: off; non-finite fails too). Checked only where the engine
    reports the trainer's distribution: rollout temperature 1, no top-k / top-p (its log-probs come after them)."""
    limit, gen = cfg.rl.max_sampling_logp_diff, cfg.generation
    value = metrics.get(DIFF_MEAN)
    if limit <= 0 or value is None or value <= limit:
        return
    if gen.temperature != 1.0 or gen.top_p < 1.0 or gen.top_k > 0:
        log.warning("rl round %d: %s = %.4g not checked (rollouts at temperature %s, top_p %s, top_k %s: the "
                    "engine's log-probs are not the trainer's)", round_idx, DIFF_MEAN, value, gen.temperature,
                    gen.top_p, gen.top_k)
        return
    fix = ("the vLLM engine did not load the policy's current weights: check the reload in its log (a "
           "generation.vllm.base_url server must run with VLLM_SERVER_DEV_MODE=1) or restart it"
           if BACKENDS.entry(gen.backend).reloads_weights
           else f"the {gen.backend} backend does not generate with the policy being trained")
    raise StaleEngineWeightsError(
        f"round {round_idx}: stale engine weights: the {gen.backend} engine's log-probs of its sampled tokens differ "
        f"from the trainer's under theta_old by {value:.4g} per token (max {metrics.get(DIFF_MAX, value):.4g}; "
        f"{DIFF_MEAN} > rl.max_sampling_logp_diff = {limit:g}); {fix}; for a lower-precision engine alone, raise "
        "rl.max_sampling_logp_diff")
