"""Where policy models come from: path resolution, loading and prompt encoding (building model directories on
disk is ``seed_core.model_builders``).

* ``resolve_model_path`` / ``load_policy``: any Hugging Face causal-LM directory on disk (never the Hub),
  relative paths resolved against ``models_root()`` ($MODELS_ROOT or ``<project>/models``).
* ``encode_prompt``: one user message through the tokenizer's chat template -> ``list[int]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from seed_core.config import ModelConfig, models_root
from seed_core.io import recover_dir

PREPARE_HINT = ("run `python -m seed_core.stages.prepare_model --config params.yaml` to build smollm2-135m-instruct "
                "(or tiny-qwen2), or set model.path / $MODELS_ROOT to an existing Hugging Face model directory")


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


def make_encoder(tokenizer: Any, chat_template_kwargs: dict[str, Any], max_prompt_tokens: int) -> Callable[[str], list[int]]:
    """text -> chat-templated prompt ids, cut from the left to ``max_prompt_tokens`` (OPID truncation=left)."""
    def encode(text: str) -> list[int]:
        ids = encode_prompt(tokenizer, text, chat_template_kwargs)
        return ids[-max_prompt_tokens:] if len(ids) > max_prompt_tokens else ids

    return encode
