"""How the trainers sit on devices: accelerate (1 process, DDP or FSDP), mixed precision, LoRA, checkpoints.

The launcher decides the layout (``accelerate launch --config_file configs/accelerate/<layout>.yaml``);
this module only adapts to it:

* ``make_accelerator``: ``model.mixed_precision`` (``no`` defers to the launch config), CPU when
  ``model.device`` is ``cpu``, or ``auto`` without CUDA (several CPU processes then talk over gloo; an FSDP2
  launch config stays FSDP2 there, ``configs/accelerate/cpu_2proc_fsdp.yaml``).
* ``apply_lora``: peft LoRA on the policy when ``model.lora_rank > 0``; resuming reloads the adapter, so
  optimizer moments stay attached to the same parameters.
* ``prepare_reference``: the frozen KL reference is sharded like the policy under FSDP (never trained,
  never wrapped in DDP), or just moved to the device.
* ``save_policy``: every rank takes part in gathering the full state dict (FSDP needs all of them); the
  main process writes a plain Hugging Face directory (LoRA merged in, its adapter kept in ``adapter/`` for
  resuming). Optimizer state: ``optimizer.pt``, or one ``optimizer.rank<r>.pt`` per rank under FSDP
  (sharded; resume with the same number of processes).
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import torch

from seed_core.config import ModelConfig
from seed_core.registries import BACKENDS
from seed_core.runtime.io import DataFileError, fsync_file, writing
from seed_core.runtime.parent_watch import watch_launcher
from seed_core.trainer.checkpoint import checkpoint_bytes, save_checkpoint


def make_accelerator(model_cfg: ModelConfig) -> Any:
    from accelerate import Accelerator

    watch_launcher()  # a rank of `accelerate launch` ends when its launcher does (seed_core.runtime.parent_watch)
    mixed = None if model_cfg.mixed_precision == "no" else model_cfg.mixed_precision
    cpu = model_cfg.device == "cpu" or (model_cfg.device == "auto" and not torch.cuda.is_available())
    accelerator = Accelerator(cpu=cpu, mixed_precision=mixed)
    _keep_fsdp_on_cpu(accelerator)
    return accelerator


def _keep_fsdp_on_cpu(accelerator: Any) -> None:
    """Run an FSDP launch config's FSDP2 layout on CPU processes (gloo) too.

    accelerate (1.15) turns FSDP on only for accelerator devices: with ``cpu=True`` an FSDP launch config
    (``ACCELERATE_USE_FSDP=true``) silently becomes MULTI_CPU, i.e. DDP with full replicas. torch's
    ``fully_shard`` runs on CPU over gloo, so the FSDP2 layout is kept there (FSDP1 is left to accelerate).
    """
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    state = accelerator.state
    fsdp_launch = os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true"
    if state.distributed_type != DistributedType.MULTI_CPU or not fsdp_launch:
        return
    plugin = FullyShardedDataParallelPlugin()  # the launch config's fsdp_* settings, from the environment
    if plugin.fsdp_version != 2:
        return
    if state.mixed_precision != "no":
        plugin.set_mixed_precision(state.mixed_precision)
    state.fsdp_plugin = plugin
    state.distributed_type = DistributedType.FSDP
    # as accelerate does for FSDP on GPUs: every later AcceleratorState() copies PartialState's type back in
    PartialState._shared_state["distributed_type"] = DistributedType.FSDP


def is_fsdp(accelerator: Any) -> bool:
    from accelerate.utils import DistributedType

    return accelerator.distributed_type == DistributedType.FSDP


def check_layout(accelerator: Any, cfg: Any, *, generates: bool) -> None:
    """Refuse combinations that cannot work, before any model is loaded."""
    if not is_fsdp(accelerator):
        return
    if cfg.model.lora_rank > 0:
        raise RuntimeError("LoRA (model.lora_rank > 0) is for 1 GPU or DDP layouts; with FSDP train all weights "
                           "(set model.lora_rank: 0) or use configs/accelerate/1gpu.yaml")
    if generates and BACKENDS.entry(cfg.generation.backend).in_process:
        raise RuntimeError(f"FSDP shards the policy, so the {cfg.generation.backend} backend, which generates in this "
                           "process from the policy's weights, cannot run on it; use generation.backend: vllm with "
                           f"FSDP, or a 1-GPU/DDP accelerate config with the {cfg.generation.backend} backend")


def apply_lora(model: Any, model_cfg: ModelConfig, resume_adapter: Path | None = None) -> Any:
    """Wrap ``model`` with LoRA adapters (rank ``lora_rank``) or, when ``resume_adapter`` exists, reload them."""
    if model_cfg.lora_rank == 0:
        return model
    try:
        from peft import LoraConfig, PeftModel, get_peft_model
    except ImportError as err:
        raise RuntimeError("model.lora_rank > 0 needs peft: pip install -e .[gpu] (or pip install peft)") from err
    if resume_adapter is not None and (resume_adapter / "adapter_config.json").is_file():
        return PeftModel.from_pretrained(model, resume_adapter, is_trainable=True)
    targets = model_cfg.lora_target_modules
    config = LoraConfig(
        r=model_cfg.lora_rank, lora_alpha=model_cfg.lora_alpha, lora_dropout=model_cfg.lora_dropout,
        target_modules=targets if targets == "all-linear" else [t.strip() for t in targets.split(",") if t.strip()],
        task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def prepare_reference(accelerator: Any, model: torch.nn.Module) -> torch.nn.Module:
    """The frozen reference: FSDP-sharded with the policy's plugin settings, else placed on the device."""
    if not is_fsdp(accelerator):
        return accelerator.prepare_model(model, evaluation_mode=True)
    if accelerator.is_fsdp2:
        from torch.distributed.fsdp import fully_shard

        # reshard_after_forward=True on the root too: FSDP2's default keeps the root's parameters (embeddings,
        # final norm) unsharded after forward for the backward, which a frozen reference never runs
        for module in model.modules():
            if type(module).__name__ in set(model._no_split_modules or []):
                fully_shard(module, reshard_after_forward=True)
        fully_shard(model, reshard_after_forward=True)
        return model
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    plugin = accelerator.state.fsdp_plugin
    plugin.set_auto_wrap_policy(model)
    return FSDP(model, sharding_strategy=plugin.sharding_strategy, cpu_offload=plugin.cpu_offload,
                auto_wrap_policy=plugin.auto_wrap_policy, mixed_precision=plugin.mixed_precision_policy,
                use_orig_params=plugin.use_orig_params, limit_all_gathers=plugin.limit_all_gathers,
                device_id=accelerator.device)


def optimizer_file(accelerator: Any) -> str:
    return f"optimizer.rank{accelerator.process_index}.pt" if is_fsdp(accelerator) else "optimizer.pt"


def load_optimizer(accelerator: Any, optimizer: Any, checkpoint: Path) -> bool:
    """Restore this rank's optimizer state from ``checkpoint`` if it has one; returns whether it did."""
    path = Path(checkpoint) / optimizer_file(accelerator)
    if not path.is_file():
        return False
    try:  # weights_only: a crafted optimizer.pt (e.g. in an --init checkpoint) cannot run code
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise DataFileError(f"{path} holds more than tensors and plain values, so it was not loaded "
                            f"(weights_only; a foreign or crafted file?): {str(err).splitlines()[0]}. Delete it "
                            "to start the optimizer afresh, or rerun the stage that wrote it") from None
    optimizer.load_state_dict(state)
    return True


def save_policy(accelerator: Any, model: Any, tokenizer: Any, out_dir: Path, optimizer: Any = None,
                keep_adapter: bool = True) -> None:
    """Write ``out_dir`` as a plain HF checkpoint (call on every rank; only the main process writes weights).

    LoRA weights are merged in; ``keep_adapter`` also saves the adapter to ``adapter/`` for resuming.
    """
    state = accelerator.get_state_dict(model)  # collective under FSDP: every rank must call it
    sharded = is_fsdp(accelerator)
    if accelerator.is_main_process:  # one process: the optimizer state is part of the atomic swap
        save_checkpoint(accelerator.unwrap_model(model), tokenizer, out_dir, None if sharded else optimizer,
                        state_dict=state, keep_adapter=keep_adapter)
    accelerator.wait_for_everyone()
    if optimizer is not None and sharded:  # one file per rank, after the weights (the caller's dir is a temp one)
        path = Path(out_dir) / optimizer_file(accelerator)
        with writing(path, temp=path, needed_bytes=checkpoint_bytes(optimizer=optimizer)):
            torch.save(optimizer.state_dict(), path)
            fsync_file(path)
    accelerator.wait_for_everyone()
