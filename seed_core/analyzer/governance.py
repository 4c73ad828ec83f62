"""Analyzer governance: how the self-analyzer's weights follow the policy during RL (issue 39).

SEED's analyzer is the policy itself. Under RL its analysis can decay (the mechanism lab's live analyzer parsed
0.99 -> 0.21 of its analyses over 20 rounds) while a frozen one goes stale (its correctness 0.90 -> 0.60 as the
policy learned). Each mode below is one registered answer, named by ``Algorithm.governance``:

| mode | the analyzer of round r | source |
|---|---|---|
| ``live`` | the policy being trained (theta_r) | SEED's paper path: the fork analyzes with the current actor each step (``zhangdw156/SEED`` ``verl/trainer/ppo/ray_trainer.py``, ``analysis_backend`` ``policy_vllm``) |
| ``frozen`` | the Stage-1 checkpoint theta_0 | SEED-static; OPSD's frozen teacher "to stabilize training" (arXiv 2601.18734 §4.1) |
| ``ema`` | phi_r = (1 - a) phi_{r-1} + a theta_r after each update, phi_0 = theta_0 (``rl.analyzer_ema_rate`` = a) | EMA teachers (arXiv 2607.01763 compares frozen and EMA; a slow rate is our choice) |
| ``gated`` | phi <- theta_r only when the audit of theta_r on a fixed held-out panel is no worse than phi's (parse rate and correctness each within ``rl.audit_tolerance``); else phi stays | a refresh gated on checks, not the clock (CGTR, arXiv 2606.03532) |
| ``anchored`` | theta_r, plus a loss on the round's own analysis tokens (``seed_core.losses.anchor``) | SEED's opt-in skill-generation loss (fork ``verl/workers/actor/dp_actor.py`` ``backward_skill_gen_loss``, ``seed/skill_gen.py``) + a KL anchor to theta_0 (our extension) |

``ema`` and ``gated`` hold weights of their own (``AnalyzerWeights``): carried in memory from round to round,
written to ``round_XXX/analyzer/`` at resume points (with ``governance.json``: the snapshot's round and audit) and
read back from there when a run resumes. They need a policy whose full weights this process holds (no FSDP
sharding, no LoRA adapter): a ``GovernanceError`` says so.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from seed_core.modeling.models import load_policy
from seed_core.registries import GOVERNANCE  # noqa: F401  (the table of modes, by Algorithm.governance)
from seed_core.runtime.io import KnownError

ANALYZER_DIR, STATE_FILE = "analyzer", "governance.json"


class GovernanceError(KnownError, ValueError):
    """A governance mode cannot run with this setup; the message names the key and the fix."""


@dataclass(frozen=True)
class Governance:
    name: str
    source: str
    """Where the mode comes from (module docstring table)."""
    own_weights: bool = False
    """Keeps analyzer weights of its own across rounds (``AnalyzerWeights``)."""
    anchored: bool = False
    """Adds the anchor loss on the round's analysis tokens (``seed_core.trainer.anchor_step``)."""


LIVE = Governance("live", "SEED: the current policy analyzes every round")
FROZEN = Governance("frozen", "SEED-static / OPSD arXiv 2601.18734 §4.1: the Stage-1 checkpoint")
EMA = Governance("ema", "EMA teacher (arXiv 2607.01763), slow rate rl.analyzer_ema_rate", own_weights=True)
GATED = Governance("gated", "check-gated refresh (CGTR, arXiv 2606.03532) on a held-out audit panel",
                   own_weights=True)
ANCHORED = Governance("anchored", "SEED fork skill-generation loss + KL anchor to Stage-1 (ours)", anchored=True)
"""The modes, by name in ``seed_core.registries.GOVERNANCE`` (with the config keys each reads)."""


@torch.no_grad()
def ema_update(target: torch.nn.Module, source: torch.nn.Module, rate: float) -> None:
    """phi <- (1 - rate) phi + rate theta for every floating parameter and buffer (rate 1: a copy; 0: unchanged)."""
    if not 0.0 <= rate <= 1.0:
        raise GovernanceError(f"rl.analyzer_ema_rate = {rate}: must lie in [0, 1] (e.g. 0.1)")
    own = dict(target.named_parameters()) | dict(target.named_buffers())
    for name, value in [*source.named_parameters(), *source.named_buffers()]:
        if name in own and own[name].is_floating_point():
            own[name].mul_(1.0 - rate).add_(value.detach().to(own[name].dtype), alpha=rate)


def refresh_passes(candidate: dict[str, float], current: dict[str, float], tolerance: float) -> bool:
    """The gated rule: refresh to the candidate iff its panel parse rate and (where both have one) correctness are
    each at least the analyzer-in-use's minus ``tolerance``. A candidate without an audit never passes."""
    keys = [k for k in ("parse_ok_rate", "skill_correct") if k in candidate and k in current]
    if "parse_ok_rate" not in keys:
        return False
    return all(candidate[k] >= current[k] - tolerance for k in keys)


@dataclass
class AnalyzerWeights:
    """The own weights of an ``ema`` or ``gated`` analyzer: the module, the round its weights were last refreshed
    from (gated), and the audit they passed (gated: the bar the next candidate must meet)."""

    model: torch.nn.Module
    refreshed_round: int = -1
    audit: dict[str, float] = field(default_factory=dict)

    @classmethod
    def copy_of(cls, model: torch.nn.Module) -> "AnalyzerWeights":
        """A frozen deep copy of ``model`` (the round-0 policy = the Stage-1 checkpoint)."""
        twin = copy.deepcopy(model).eval()
        twin.requires_grad_(False)
        return cls(twin)

    def save(self, tokenizer: Any, out: Path) -> None:
        """``out/analyzer/`` (an HF checkpoint) and ``out/analyzer/governance.json``."""
        folder = Path(out) / ANALYZER_DIR
        self.model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        (folder / STATE_FILE).write_text(json.dumps({"refreshed_round": self.refreshed_round, "audit": self.audit},
                                                    sort_keys=True))

    @classmethod
    def load(cls, model_cfg: Any, folder: Path) -> "AnalyzerWeights":
        """What ``save`` wrote in ``folder`` (``round_XXX/analyzer``)."""
        state = json.loads((Path(folder) / STATE_FILE).read_text())
        model = load_policy(model_cfg, folder, trainable=False).model.eval()
        return cls(model, int(state["refreshed_round"]), {k: float(v) for k, v in state["audit"].items()})


def check_supported(mode: Governance, cfg: Any, sharded: bool) -> None:
    """Own-weights modes hold a full copy of the policy: refuse FSDP sharding and LoRA in one line."""
    if not mode.own_weights:
        return
    if sharded:
        raise GovernanceError(f"the {mode.name!r} analyzer keeps a full copy of the policy's weights, which a sharded "
                              f"(FSDP) policy does not have: run it with project.accelerate_config '' or a DDP config")
    if cfg.model.lora_rank > 0:
        raise GovernanceError(f"the {mode.name!r} analyzer averages or snapshots full weights: set model.lora_rank 0 "
                              f"(it is {cfg.model.lora_rank})")
