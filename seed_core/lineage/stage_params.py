"""The ``params.yaml`` keys each DVC stage reads: the source of truth for each stage's params dependency
``data/params/<stage>.yaml`` (their values, written by dvc.yaml's ``code`` stage, whose ``params:`` list is every
key here: ``python scripts/dvc_deps.py --write``) and for the RL resume fingerprint.

A key is a leaf (``rl.lr``) or a whole section (``env.sokoban``: the environment that runs reads its own
sub-section; DVC cannot say "only the chosen one"). ``tests/unit/test_stage_params.py`` runs each stage's engine
on a tiny config under a recording config (every leaf read, on any copy) and scans its flow and task modules,
and checks that the stage reads no key outside its list and ``NOT_RESULTS``; ``tests/unit/test_stage_params.py``
also checks the params files and the code stage's list against these. So changing a key reruns exactly the stages that read it.

Whole-config records are not reads. Every stage writes the whole resolved config to ``resolved_config.json``
and logs it as MLflow params: a record of the values in force when it ran (no stage reads another's), which a
change to a key the stage does not read leaves as it was, like the stage's outputs. What decides whether
finished RL rounds are reused, ``rl_fingerprint``, hashes only the keys its algorithm reads
(``seed_core.lineage.resume.resume_keys``: ``algorithm_keys`` less ``rl.rounds``), the keys of its params
file ``data/params/rl/<algorithm>.yaml``, so the engine and DVC agree on what makes a round stale.

Declared once: the keys of a variant part are declared by its registry entry (``seed_core.registries``: an analyzer
client's, a governance mode's, a loss's coefficient and arguments, a shaping's) and gathered per algorithm by
``Algorithm.keys``; an environment's section is ``env.<name>`` for every registered name. The tables below hold only
what every run of a stage reads.
"""

from __future__ import annotations

import functools
from typing import Any

from seed_core.algorithms import ALGORITHMS
from seed_core.config import EnvConfig, SeedConfig, flatten
from seed_core.registries import ANNOTATOR_KEYS, CLIENTS, ENVS

NOT_RESULTS = ("tracking", "project.data_dir", "project.preset", "sweep", "rl.save_every", "annotate.concurrency",
               "annotate.fail_fast_after", "annotate.min_ok_fraction", "rl.max_sampling_logp_diff")
"""Keys stages read that change no output: where runs are logged (``tracking``), the output root (fixed by
dvc.yaml's paths), the preset label (MLflow tag; the report, which prints it, lists it), the sweep (its own
DAG: sweep/dvc.yaml), how often RL writes resume points, how Stage 1 paces or gives up on its calls
(parallelism; stop early / fail below a share: a run that passes wrote the same outputs), and the RL
weight-sync check's limit (it fails a round; a round that passes is the same)."""

_RUN_MODEL = ("model.dtype", "model.device", "model.chat_template_kwargs")
_TRAIN_MODEL = (*_RUN_MODEL, "model.gradient_checkpointing", "model.mixed_precision", "model.lora_rank",
                "model.lora_alpha", "model.lora_dropout", "model.lora_target_modules", "project.accelerate_config")


def env_sections() -> tuple[str, ...]:
    """``env.<name>`` for every registered environment (``seed_core.registries.ENVS``), in params.yaml's order
    (``EnvConfig``'s fields; a name without a section goes last, and ``side_tables`` says what it lacks). Every
    stage that plays or describes an environment reads all of them, so a new environment's settings are an input
    of each such stage by construction (annotate's list was typed by hand and checked by nothing)."""
    fields = list(EnvConfig.model_fields)
    return tuple(f"env.{name}" for name in sorted(ENVS.names(), key=lambda n: fields.index(n) if n in fields
                                                  else len(fields)))


_ENV_SECTIONS = env_sections()
_ENV = ("env.name", "env.max_steps", "env.history_length", "env.invalid_action_penalty", *_ENV_SECTIONS)
_GENERATE = ("generation.backend", "generation.top_p", "generation.top_k", "generation.max_new_tokens",
             "generation.max_prompt_tokens", "generation.batch_size", "generation.share_prefix", "generation.vllm")
_SELF_ANALYZER = CLIENTS.entry("policy").keys


@functools.cache
def _schema_rank() -> dict[str, int]:
    """Dotted key or section -> the position of its first leaf in ``SeedConfig`` (params.yaml's order)."""
    first: dict[str, int] = {}
    for i, leaf in enumerate(flatten(SeedConfig())):
        parts = leaf.split(".")
        for depth in range(1, len(parts) + 1):
            first.setdefault(".".join(parts[:depth]), i)
    return first


def schema_order(keys: set[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``keys`` in params.yaml's order (``SeedConfig``'s fields; a section where its first leaf is)."""
    rank = _schema_rank()
    return tuple(sorted(keys, key=rank.__getitem__))


RL_OWN = ("rl.rounds", "rl.tasks_per_round", "rl.group_size", "rl.advantage", "rl.policy_loss", "rl.clip_ratio_low",
          "rl.clip_ratio_high", "rl.clip_ratio_c", "rl.kl_coef", "rl.entropy_coef", "rl.pg_coef", "rl.lr",
          "rl.weight_decay", "rl.optim", "rl.grad_clip", "rl.mini_batch_size", "rl.micro_batch_size",
          "rl.micro_batch_tokens", "rl.share_prefix", "rl.ppo_epochs")
"""The rl stage's own keys that every algorithm reads (rounds, groups, PPO, KL, optimizer, batches)."""
_RL_RUN = ("project.seed", "model.path", *_TRAIN_MODEL, *_ENV, *_GENERATE, "generation.temperature")
RL_COMMON = (*_RL_RUN, *RL_OWN)
"""The rl stage's keys that every algorithm reads; ``algorithm_keys`` adds the keys its parts declare."""


def algorithm_keys(name: str) -> tuple[str, ...]:
    """The params.yaml keys ``rl@<name>`` reads: ``RL_COMMON`` (in its order), then the keys its parts declare
    (``Algorithm.keys``), less the values it fixes (``Algorithm.fixed``), together with the rl stage's own in params.yaml's order. Its
    params dependency ``data/params/rl/<name>.yaml`` and its resume key hold exactly these."""
    algorithm = ALGORITHMS.get(name)
    return (*_RL_RUN, *schema_order({*RL_OWN, *algorithm.keys} - {f"rl.{field}" for field, _ in algorithm.fixed}))


STAGE_PARAMS: dict[str, tuple[str, ...]] = {
    "prepare_model": ("model.path", "project.seed", *_ENV, "generation.max_prompt_tokens", "testbed"),
    "generate_alfworld": ("project.seed", "env.name", "env.alfworld"),
    "collect": ("project.seed", *_RUN_MODEL, *_ENV, *_GENERATE, "generation.temperature", "collect"),
    # the static skill library: its budget, counted with the policy's tokenizer (model.path when no base model)
    "annotate": ("env.name", "env.max_steps", *_ENV_SECTIONS, *ANNOTATOR_KEYS, "annotate.static_skill_tokens",
                 "model.path"),
    # model.path and env.name: the registered checkpoint's name and tags (flows/common.py model_name / model_tags)
    "sft": ("project.seed", "model.path", "env.name", *_TRAIN_MODEL, "generation.max_prompt_tokens", "sft"),
    # every key some algorithm reads; rl.algorithm is the foreach item (flows/rl.py --algorithm), never params.yaml's
    "rl": (*_RL_RUN, *schema_order({*RL_OWN, *(k for name in ALGORITHMS.names() for k in ALGORITHMS.get(name).keys)})),
    "evaluate": ("project.seed", "model.path", *_RUN_MODEL, *_ENV, *_GENERATE, "generation.eval_temperature",
                 *_SELF_ANALYZER, "rl.static_skills_dir", "eval"),
    "report": ("project.preset", "model.path", "annotate.client", "rl.rounds", "rl.tasks_per_round",
               "rl.group_size"),
}


FOREACH_KEYS: dict[str, tuple[str, ...]] = {"rl": ("rl.algorithm",)}
"""Keys a foreach stage takes from its item (``python -m flows.rl --algorithm ${item}``), not from params.yaml."""


def covers(keys: tuple[str, ...] | list[str], key: str) -> bool:
    """Whether ``key`` is one of ``keys`` or inside a section among them (``env.sokoban`` covers
    ``env.sokoban.dim_room``)."""
    return any(key == k or key.startswith(k + ".") for k in keys)


def project(values: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The ``keys`` of a dumped config (``cfg.model_dump(mode="json")``), as ``{dotted key: value}``."""
    out: dict[str, Any] = {}
    for key in keys:
        node: Any = values
        for part in key.split("."):
            node = node[part]
        out[key] = node
    return out
