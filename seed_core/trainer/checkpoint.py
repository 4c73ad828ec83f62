"""Checkpoints are plain Hugging Face directories, written atomically and durably: built in a temp dir,
fsynced, then swapped in by ``seed_core.runtime.io.swap_dir`` (old aside -> new in -> old deleted; a killed swap is
recovered by the next one or by ``load_policy``), so some complete checkpoint exists at every moment. A write that
fails (a full disk, a read-only directory) removes its temp dir and raises one line naming the path and the fix
(``seed_core.runtime.io.writing``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch

from seed_core.runtime.io import recover_dir, swap_dir, writing


ADAPTER_DIR = "adapter"
"""A LoRA run's adapter inside its (merged) checkpoint, kept only to resume training."""


def save_checkpoint(model: Any, tokenizer: Any, out_dir: Path, optimizer: torch.optim.Optimizer | None = None,
                    *, state_dict: dict[str, Any] | None = None, keep_adapter: bool = True) -> Path:
    """``save_pretrained`` model + tokenizer (+ optimizer state) into ``out_dir`` atomically.

    ``state_dict``: the full weights when ``model``'s own are sharded (FSDP). A peft (LoRA) model is written
    merged, a plain HF directory, with its adapter in ``adapter/`` when ``keep_adapter``.
    """
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    with writing(out_dir, temp=tmp, needed_bytes=checkpoint_bytes(model, state_dict, optimizer)):
        shutil.rmtree(tmp, ignore_errors=True)
        recover_dir(out_dir)
        if hasattr(model, "peft_config"):
            if keep_adapter:
                model.save_pretrained(tmp / ADAPTER_DIR)
            model, state_dict = model.merge_and_unload(), None
        if state_dict is not None:
            state_dict = share_tied_weights(model, state_dict)
        model.save_pretrained(tmp, state_dict=state_dict, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        return swap_dir(tmp, out_dir)


def checkpoint_bytes(model: Any = None, state_dict: dict[str, Any] | None = None, optimizer: Any = None) -> int:
    """About how many bytes a checkpoint takes: the weights (``state_dict``, else ``model``'s; shared tensors once)
    and the ``optimizer`` state (for the disk-full message; nothing is copied)."""
    weights = state_dict if state_dict is not None else model.state_dict() if model is not None else {}
    tensors = list(weights.values())
    if optimizer is not None:
        tensors += [t for state in optimizer.state.values() for t in state.values()]
    sizes: dict[Any, int] = {}
    for i, t in enumerate(tensors):
        if isinstance(t, torch.Tensor):
            try:
                key: Any = (t.untyped_storage().data_ptr(), t.storage_offset(), t.numel())
            except (RuntimeError, NotImplementedError):  # a tensor without storage (meta, some subclasses)
                key = i
            sizes[key] = t.numel() * t.element_size()
    return sum(sizes.values())


def share_tied_weights(model: Any, state_dict: dict[str, Any]) -> dict[str, Any]:
    """One tensor for all the names of a tied parameter (embeddings and LM head).

    A state dict gathered from shards (FSDP) holds a separate copy per name, so ``save_pretrained`` would not see
    the tie and would store the tied weight twice; with one tensor it drops the duplicate, as it does for
    ``model.state_dict()``.
    """
    first: dict[int, str] = {}
    out = dict(state_dict)
    for name, param in model.named_parameters(remove_duplicate=False):
        primary = first.setdefault(id(param), name)
        if primary != name and primary in out and name in out:
            out[name] = out[primary]
    return out


def is_checkpoint(path: Path) -> bool:
    path = Path(path)
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def link_tree(src: Path, dst: Path) -> Path:
    """Copy a checkpoint directory's files (not optimizer state, not a LoRA ``adapter/``) by hard links (no
    extra disk), falling back to copies across devices."""
    src, dst = Path(src), Path(dst)
    tmp = dst.with_name(f".{dst.name}.tmp-{os.getpid()}")
    files = [f for f in src.iterdir() if f.is_file() and not (f.name.startswith("optimizer") and f.suffix == ".pt")]
    with writing(dst, temp=tmp, needed_bytes=sum(f.stat().st_size for f in files)):
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for f in files:
            try:
                os.link(f, tmp / f.name)
            except OSError:
                shutil.copy2(f, tmp / f.name)
        return swap_dir(tmp, dst)
