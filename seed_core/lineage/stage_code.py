"""Which entries of the name tables (``seed_core.registries``) each DVC stage can select under a config: the
``select`` of its code fingerprint (``seed_core.lineage.code_closure``), so a stage depends on the implementation files its
config can run and on no other. ``scripts/dvc_deps.py`` writes ``data/code/<stage>.sha256`` (the rl stage: one
``data/code/rl/<algorithm>.sha256`` per algorithm) with it; ``seed_core.lineage.resume.rl_code`` hashes the same lines.

| table | every stage | ``annotate`` | ``rl@<algorithm>`` |
|---|---|---|---|
| ``ENVS`` | ``env.name`` | | |
| ``BACKENDS`` | ``generation.backend`` | | |
| ``RETRIEVAL_METHODS`` | ``env.search_qa.retrieval_method`` | | |
| ``CLIENTS`` | none | ``annotate.client`` | the algorithm's analyzer (``annotate``: ``annotate.client``) |
| ``ADVANTAGES``, ``POLICY_LOSSES`` | none | | ``rl.advantage``, ``rl.policy_loss`` |
| ``DISTILL_LOSSES`` | none | | the effective ``rl.distill_loss`` if the algorithm distills |
| ``SHAPINGS`` | none | | ``Algorithm.shaping`` |
| ``GOVERNANCE`` | none | | ``Algorithm.analyzer_governance`` |

A lookup with a literal name (``CLIENTS.get("policy")`` in the evaluate stage) always reaches its entry. Every key
read here is a param of dvc.yaml's code stage, so changing one rewrites the fingerprints (tests/unit/test_stage_code.py;
tests/unit/test_stage_params.py runs each stage on a tiny config and checks that every entry it looks up is in its
fingerprint).
"""

from __future__ import annotations

from seed_core.algorithms import ALGORITHMS, effective_rl
from seed_core.config import SeedConfig

RL_STAGE = "rl"
"""The stage whose selection depends on its algorithm (``cfg.rl.algorithm``: the foreach item)."""


def selection(stage: str, cfg: SeedConfig) -> dict[str, frozenset[str]]:
    """Table name -> the entries ``stage`` can select under ``cfg`` (``cfg.rl.algorithm`` for the rl stage)."""
    select = {"ENVS": frozenset({cfg.env.name}), "BACKENDS": frozenset({cfg.generation.backend}),
              "RETRIEVAL_METHODS": frozenset({cfg.env.search_qa.retrieval_method}),
              "CLIENTS": frozenset({cfg.annotate.client}) if stage == "annotate" else frozenset(),
              "ADVANTAGES": frozenset(), "POLICY_LOSSES": frozenset(), "DISTILL_LOSSES": frozenset(),
              "SHAPINGS": frozenset(), "GOVERNANCE": frozenset()}
    if stage == RL_STAGE:
        algorithm = ALGORITHMS.get(cfg.rl.algorithm)
        rl = effective_rl(cfg.rl, algorithm)
        analyzer = cfg.annotate.client if algorithm.analyzer == "annotate" else algorithm.analyzer
        select |= {"ADVANTAGES": frozenset({rl.advantage}), "POLICY_LOSSES": frozenset({rl.policy_loss}),
                   "DISTILL_LOSSES": frozenset({rl.distill_loss} if algorithm.distill else ()),
                   "SHAPINGS": frozenset({algorithm.shaping} if algorithm.shaping else ()),
                   "CLIENTS": frozenset({analyzer} if analyzer else ()),
                   "GOVERNANCE": frozenset({algorithm.analyzer_governance} if algorithm.analyzer_governance else ())}
    return select


def for_algorithm(cfg: SeedConfig, algorithm: str) -> SeedConfig:
    """``cfg`` as ``rl@<algorithm>`` runs it (``flows/rl.py --algorithm``: ``rl.algorithm`` is the foreach item)."""
    ALGORITHMS.get(algorithm)  # an unknown name fails here, listing the known ones
    return cfg.model_copy(update={"rl": cfg.rl.model_copy(update={"algorithm": algorithm})})
