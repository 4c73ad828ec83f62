"""The testbed model: a small transformers causal LM pretrained on an environment's own text.

A *testbed*, not a language model: it exists so that RL and self-evolving distillation can be measured on
2 CPU cores, where SmolLM2-135M trains at ~80 tokens/s and a full run would take hours. It is built once
by ``prepare_model`` (model name ``testbed``) from text the environment itself generates:

* **agent turns** ``(prompt, response)`` of an epsilon-noisy expert: at every step the expert's action with
  probability ``1 - testbed.noise``, else a uniformly random action. The pretrained policy therefore knows
  the right move but is diluted, which is the regime RL improves: GRPO has to find and sharpen it.
* **skill-conditioned turns** ``(prompt + hindsight skill, expert response)``: the same states with the
  oracle's hindsight skill for that episode inserted by the SEED/OPID rule (``insert_episode_skill``) and
  the *noise-free* expert action as the target, a fraction ``testbed.skill_fraction`` of the steps. A skill
  in context can thus change the actions, as the paper assumes of a real LLM (the teacher context).
* with ``testbed.plain_policy: naive`` the agent turns are played by the environment's noisy *naive* player
  instead (``naive_action``), and a fraction ``testbed.mismatch_fraction`` of the skill turns carry *another*
  task's skill with that skill's plan as the target (``plan_action``): the mechanism lab's policy has a prior
  that is wrong where the task line is silent, and follows what a skill says, not merely that one is there.
* **analyses** ``(analysis prompt, oracle JSON)`` for a fraction ``testbed.analysis_fraction`` of the
  episodes, so the model has seen the analysis format before Stage 1 (whose job is to teach it) sharpens it.
  Analysis prompts hold a whole trajectory and cost ~6x an agent turn, so this fraction sets the budget.

Architecture: Qwen2 (``hidden``, ``layers``, 4 heads / 2 KV heads, tied embeddings) with a byte-level BPE
tokenizer trained on the same corpus (digits kept single, so numbers are copied token for token) and a
ChatML template. Every choice is in the ``testbed`` config
section; the corpus uses train-split tasks only, so held-out (test) levels stay unseen.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from seed_core.analyzer.annotate import annotate_trajectories, sft_examples
from seed_core.analyzer.clients import OracleClient
from seed_core.config import SeedConfig, SFTConfig
from seed_core.envs import make_env
from seed_core.modeling.builders import CHATML_TEMPLATE, TINY_SPECIAL_TOKENS, _build_atomically
from seed_core.modeling.models import make_encoder
from seed_core.registry import Registry
from seed_core.rollout.collector import group_by_trajectory
from seed_core.rollout.expert import play_expert
from seed_core.runtime.io import write_json
from seed_core.skills.insert import insert_episode_skill
from seed_core.trainer.sft import run_sft_loop, tokenize_examples

if TYPE_CHECKING:
    from seed_core.rollout.expert import RandomAction

RANDOM_ACTIONS: Registry[RandomAction] = Registry("testbed environment (random-action set)")
"""Per environment, the actions the noisy expert draws from: a fixed set, or ``(env, rng) -> action``."""
RANDOM_ACTIONS.register("sokoban")(("up", "down", "left", "right"))
RANDOM_ACTIONS.register("ezpoints")(lambda env, rng: env.random_action(rng))  # a token, or a formula of the cards

log = logging.getLogger(__name__)

PRETRAIN_LABEL = "testbed pretraining"
"""What the testbed's pretraining calls its progress lines (``testbed pretraining: step 3/710 ...``), so they are
not taken for Stage 1's SFT."""
PRETRAIN_SEED_OFFSET = 7_919
"""Task seeds of the pretraining corpus are drawn apart from collect/RL (still from the train split)."""


@dataclass
class Corpus:
    """Chat examples (user prompt, assistant target) by kind, and the texts the tokenizer is trained on."""

    agent: list[tuple[str, str]]
    skill: list[tuple[str, str]]
    analysis: list[tuple[str, str]]

    @property
    def examples(self) -> list[tuple[str, str]]:
        return self.agent + self.skill + self.analysis

    def stats(self) -> dict[str, float]:
        return {"testbed/agent_examples": float(len(self.agent)), "testbed/skill_examples": float(len(self.skill)),
                "testbed/analysis_examples": float(len(self.analysis))}


def build_corpus(cfg: SeedConfig) -> Corpus:
    """Noisy-expert episodes on ``testbed.episodes`` train tasks, their oracle analyses and skill turns."""
    tb = cfg.testbed
    actions = RANDOM_ACTIONS.get(cfg.env.name)
    env = make_env(cfg.env)
    seed = cfg.project.seed + PRETRAIN_SEED_OFFSET
    tasks = env.make_tasks("train", tb.episodes, seed=seed)
    records = play_expert(cfg.env, tasks, policy_version="testbed-corpus", noise=tb.noise, actions=actions, seed=seed,
                          player=tb.plain_policy)
    trajectories = group_by_trajectory(records)
    notes = annotate_trajectories(trajectories, {t.task_id: t for t in tasks}, OracleClient(env, cfg.env.name),
                                  parse_attempts=1, policy_version="testbed-corpus", env=env)
    skills = {a.traj_id: a.episode_skill for a in notes if a.ok}
    rng = random.Random(seed)
    agent, skill = [], []
    by_task = {t.task_id: t for t in tasks}
    others = sorted(skills.values())
    for traj_id, steps in trajectories.items():
        agent += [(r.prompt, r.response) for r in steps]
        env.reset(by_task[steps[0].task_id])
        for r in steps:  # replay the episode: the expert's move in every visited state
            if traj_id in skills and rng.random() < tb.skill_fraction:
                skill.append(skill_turn(env, r.prompt, skills[traj_id], others, rng, tb.mismatch_fraction))
            if not r.done:
                env.step(r.action)
    analyses = sft_examples(notes)
    keep = round(tb.analysis_fraction * len(analyses))
    return Corpus(agent=agent, skill=skill, analysis=rng.sample(analyses, keep) if keep < len(analyses) else analyses)


def skill_turn(env: Any, prompt: str, own: str, others: list[str], rng: random.Random,
               mismatch_fraction: float) -> tuple[str, str]:
    """A skill-conditioned example: the episode's own skill and the noise-free expert action, or (with probability
    ``mismatch_fraction``, drawn only when it is > 0 so the default corpus keeps its draws) another task's skill
    and the action *its* plan states (``env.plan_action``; the own skill when the drawn one states none)."""
    if mismatch_fraction > 0 and others and rng.random() < mismatch_fraction:
        other = rng.choice(others)
        plan = env.plan_action(other) if hasattr(env, "plan_action") else None
        if other != own and plan is not None:
            return insert_episode_skill(prompt, other), env.format_response(plan)
    return insert_episode_skill(prompt, own), env.format_response(env.expert_action())


def train_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """Byte-level BPE on ``texts`` with ChatML special tokens and template (deterministic)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    # every digit its own token, so a number in the observation and the same number in the answer are the
    # same token (copying it is a pure induction step, not a learned mapping between merged tokens)
    bpe.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False)])
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=TINY_SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(texts, trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                  pad_token="<|pad|>", unk_token=None)
    tok.chat_template = CHATML_TEMPLATE
    tok.padding_side = "left"
    return tok


def build_testbed_model(cfg: SeedConfig, out_dir: str | Path) -> Path:
    """Build (once, atomically) the testbed model of ``cfg`` into ``out_dir``; metrics go to
    ``out_dir/testbed_metrics.json``. Nothing in ``out_dir`` depends on the run's wall time (the stage's own metrics
    carry ``seconds``), so two builds of one config under the same numerics are the same bytes and one DVC hash:
    a cell key or a ``dvc.lock`` made on another run of the same machine class matches."""
    from transformers import AutoModelForCausalLM, Qwen2Config

    tb = cfg.testbed

    def write(tmp: Path) -> None:
        log.info("%s: building the corpus from %d %s episodes", PRETRAIN_LABEL, tb.episodes, cfg.env.name)
        corpus = build_corpus(cfg)
        tok = train_tokenizer([text for pair in corpus.examples for text in pair], tb.vocab_size)
        config = Qwen2Config(
            vocab_size=len(tok), hidden_size=tb.hidden_size, intermediate_size=3 * tb.hidden_size,
            num_hidden_layers=tb.layers, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=4096, tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        torch.manual_seed(cfg.project.seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.generation_config.pad_token_id = tok.pad_token_id
        encode = make_encoder(tok, {}, cfg.generation.max_prompt_tokens)
        data = tokenize_examples(corpus.examples, encode, tok, tb.max_length)
        sft = SFTConfig(epochs=tb.epochs, lr=tb.lr, batch_size=tb.batch_size, max_length=tb.max_length,
                        warmup_ratio=0.05, weight_decay=0.0, grad_clip=1.0)
        log.info("%s: %d examples (%s) on a %d-layer model, %d epochs", PRETRAIN_LABEL, len(data),
                 ", ".join(f"{len(part)} {kind}" for kind, part in (("agent", corpus.agent), ("skill", corpus.skill),
                                                                     ("analysis", corpus.analysis))),
                 tb.layers, tb.epochs)
        history = run_sft_loop(model, data, sft, tok.pad_token_id, seed=cfg.project.seed, label=PRETRAIN_LABEL)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        tokens = sum(len(p) + len(t) for p, t in data)
        write_json(tmp / "testbed_metrics.json", {
            **corpus.stats(), "testbed/parameters": float(sum(p.numel() for p in model.parameters())),
            "testbed/tokens_per_epoch": float(tokens), "testbed/steps": float(len(history)),
            "testbed/first_loss": history[0]["sft/loss"], "testbed/final_loss": history[-1]["sft/loss"]})

    return _build_atomically(Path(out_dir), write)
