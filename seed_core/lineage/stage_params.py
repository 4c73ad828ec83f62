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
(``seed_core.lineage.resume.resume_keys``: ``seed_core.algorithms.algorithm_keys`` less ``rl.rounds``), the keys of its params
file ``data/params/rl/<algorithm>.yaml``, so the engine and DVC agree on what makes a round stale.
"""

from __future__ import annotations

from typing import Any

from seed_core.config import EnvConfig
from seed_core.registries import ENVS

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
_ANALYZER = ("annotate.client", "annotate.model", "annotate.temperature", "annotate.max_tokens",
             "annotate.parse_attempts", "annotate.timeout_s", "annotate.max_retries", "annotate.prompt_version")
"""What the Stage-1 analyzer's answers depend on (``openai``: model and sampling; the oracle: nothing more)."""
_SELF_ANALYZER = ("rl.analyzer_temperature", "rl.analyzer_max_new_tokens", "annotate.parse_attempts")

STAGE_PARAMS: dict[str, tuple[str, ...]] = {
    "prepare_model": ("model.path", "project.seed", *_ENV, "generation.max_prompt_tokens", "testbed"),
    "generate_alfworld": ("project.seed", "env.name", "env.alfworld"),
    "collect": ("project.seed", *_RUN_MODEL, *_ENV, *_GENERATE, "generation.temperature", "collect"),
    # the static skill library: its budget, counted with the policy's tokenizer (model.path when no base model)
    "annotate": ("env.name", "env.max_steps", *_ENV_SECTIONS, *_ANALYZER, "annotate.static_skill_tokens",
                 "model.path"),
    # model.path and env.name: the registered checkpoint's name and tags (flows/common.py model_name / model_tags)
    "sft": ("project.seed", "model.path", "env.name", *_TRAIN_MODEL, "generation.max_prompt_tokens", "sft"),
    # rl.algorithm is the foreach item (flows/rl.py --algorithm), never params.yaml's value
    "rl": ("project.seed", "model.path", *_TRAIN_MODEL, *_ENV, *_GENERATE, "generation.temperature", *_ANALYZER,
           "rl.rounds", "rl.tasks_per_round", "rl.group_size", "rl.advantage", "rl.policy_loss", "rl.distill_loss",
           "rl.clip_ratio_low", "rl.clip_ratio_high", "rl.clip_ratio_c", "rl.kl_coef", "rl.entropy_coef",
           "rl.opd_coef", "rl.gate_beta", "rl.opid_coef", "rl.pg_coef", "rl.rlsd_lambda0", "rl.rlsd_decay_steps",
           "rl.rlsd_clip", "rl.static_skills_dir", "rl.max_step_skills", "rl.lr", "rl.weight_decay", "rl.optim",
           "rl.grad_clip", "rl.mini_batch_size", "rl.micro_batch_size", "rl.micro_batch_tokens", "rl.share_prefix",
           "rl.ppo_epochs",
           "rl.analyzer_temperature", "rl.analyzer_max_new_tokens", "rl.analyzer_checkpoint", "rl.analyzer_ema_rate",
           "rl.audit_panel_tasks", "rl.audit_tolerance", "rl.anchor_coef", "rl.anchor_kl_coef"),
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


RL_PART_KEYS: dict[str, tuple[str, ...]] = {
    "distill": ("rl.distill_loss", "rl.opd_coef"),
    "gate": ("rl.gate_beta",),
    "opid": ("rl.opid_coef",),
    "rlsd": ("rl.rlsd_lambda0", "rl.rlsd_decay_steps", "rl.rlsd_clip"),
    "self_analyzer": _SELF_ANALYZER,
    "frozen_analyzer": ("rl.analyzer_checkpoint",),
    "ema_analyzer": ("rl.analyzer_ema_rate",),
    "gated_analyzer": ("rl.audit_panel_tasks", "rl.audit_tolerance"),
    "anchor": ("rl.anchor_coef", "rl.anchor_kl_coef"),
    "oracle_analyzer": ("annotate.parse_attempts",),
    "stage1_analyzer": _ANALYZER,
    "static_skills": ("rl.static_skills_dir",),
    "step_skills": ("rl.max_step_skills",),
}
"""Keys of the rl stage that only some algorithms read, by the part of an algorithm that reads them
(``seed_core.algorithms.algorithm_keys`` picks an algorithm's parts from its registry record): each
``rl@<algorithm>`` stage depends on ``data/params/rl/<algorithm>.yaml``, its own keys, so an ablation of
``rl.opd_coef`` never reruns GRPO."""

RL_COMMON = tuple(k for k in STAGE_PARAMS["rl"] if not any(k in keys for keys in RL_PART_KEYS.values()))
"""The rl stage's keys that every algorithm reads (model, environment, sampling, PPO, optimizer, batches)."""


def project(values: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The ``keys`` of a dumped config (``cfg.model_dump(mode="json")``), as ``{dotted key: value}``."""
    out: dict[str, Any] = {}
    for key in keys:
        node: Any = values
        for part in key.split("."):
            node = node[part]
        out[key] = node
    return out
