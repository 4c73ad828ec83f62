"""Where policy models come from: path resolution, loading and prompt encoding (building model directories on
disk is ``seed_core.modeling.builders``).

* ``resolve_model_path`` / ``load_policy``: any Hugging Face causal-LM directory on disk (never the Hub),
  relative paths resolved against ``models_root()`` ($MODELS_ROOT or ``<project>/models``).
* ``encode_prompt``: one user message through the tokenizer's chat template -> ``list[int]``.
"""

from __future__ import annotations

import json
import pickle
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from seed_core.config import ModelConfig, models_root
from seed_core.runtime.io import KnownError, recover_dir

PREPARE_HINT = ("run `python -m seed_core.stages.prepare_model --config params.yaml` to build smollm2-135m-instruct "
                "(or tiny-qwen2), or set model.path / $MODELS_ROOT to an existing Hugging Face model directory")


class ModelNotFoundError(KnownError, FileNotFoundError):
    """``model.path`` does not name a usable model directory; the message names the path and the fix."""


class CorruptModelError(KnownError, RuntimeError):
    """A model directory exists but a file in it cannot be read (truncated or corrupted, e.g. a killed copy, or
    a pickle holding more than tensors, which is never run: weights load with ``weights_only``)."""


def rebuild_hint(model_dir: Path) -> str:
    """How to re-create a damaged checkpoint directory: the stages' final checkpoints are DVC outputs."""
    return (f"re-create it: `dvc checkout {model_dir}` restores a checkpoint DVC tracks, or delete {model_dir} and "
            "rerun the stage that wrote it")


WEIGHT_SUFFIXES = (".bin", ".pt", ".pth")
"""Pickled (``torch.save``) weight files a Hugging Face directory may hold instead of ``*.safetensors``."""


def _refused_pickle(err: Exception) -> str:
    """The line of torch's ``weights_only`` refusal that names what the pickle wanted (e.g. a GLOBAL)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return next((line for line in lines if "GLOBAL" in line or "Unsupported" in line), lines[0] if lines else "")


def check_weights_file(path: Path) -> None:
    """Raise ``CorruptModelError`` naming ``path`` unless it opens as weights: a safetensors header that parses and
    announces no more bytes than the file holds; a pickle that loads as plain tensors with ``weights_only=True``
    (so a crafted one is refused and nothing in it runs; a zip-format one is memory-mapped, not read)."""
    from safetensors import safe_open

    if path.suffix == ".safetensors":
        check_safetensors(path)
    try:
        if path.suffix == ".safetensors":
            with safe_open(path, "pt"):
                pass
        else:
            torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except pickle.UnpicklingError as err:
        raise CorruptModelError(
            f"{path} holds more than tensors, so it was not loaded and nothing in it ran (weights_only refused it: "
            f"{_refused_pickle(err)}); never load it with weights_only=False; {rebuild_hint(path.parent)}") from None
    except Exception as err:  # noqa: BLE001 - truncated zip (RuntimeError), garbage (KeyError), empty (EOFError)
        first = next((line for line in str(err).splitlines() if line.strip()), "").split(". ")[0][:200]
        cause = f"{type(err).__name__}: {first}" if first else type(err).__name__
        raise CorruptModelError(f"{path} is not a readable weights file ({cause}); {rebuild_hint(path.parent)}") \
            from None


def load_weights(model_dir: Path, load: Callable[[], PreTrainedModel]) -> PreTrainedModel:
    """``load()`` (``from_pretrained``); when it fails, the weight file that cannot be read is named
    (``CorruptModelError``, one line), and any other failure (out of memory included) keeps its own error."""
    try:
        return load()
    except (MemoryError, torch.OutOfMemoryError):
        raise
    except Exception:
        files = [f for f in sorted(model_dir.iterdir()) if f.suffix in (".safetensors", *WEIGHT_SUFFIXES)]
        for f in files:  # only on failure: find the file to blame
            check_weights_file(f)
        raise


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
        raise CorruptModelError(
            f"{path} is not a readable safetensors file (bad header); {rebuild_hint(path.parent)}") from None
    if size < 8 + n + end:
        raise CorruptModelError(
            f"{path} is truncated: {size} bytes, its header announces {8 + n + end}; {rebuild_hint(path.parent)}")


class MissingChatTemplateError(KnownError, ValueError):
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
    for candidate in candidates:  # a checkpoint swap killed half-way (seed_core.runtime.io.swap_dir): the complete one back
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
                                f"{rebuild_hint(model_dir)}") from err
    if not tokenizer.chat_template:
        raise MissingChatTemplateError(
            f"the tokenizer in {model_dir} has no chat template; use an instruct/chat model or add a "
            "chat_template (chat_template.jinja) to that directory")
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    device = pick_device(cfg.device)
    model = load_weights(model_dir, lambda: AutoModelForCausalLM.from_pretrained(
        model_dir, local_files_only=True, dtype=getattr(torch, cfg.dtype))).to(device)
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
