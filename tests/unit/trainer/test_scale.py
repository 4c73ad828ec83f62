"""LoRA training keeps checkpoints plain HF directories and resumes from its adapter; device/launch adapters."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from seed_core.config import ModelConfig, SeedConfig
from seed_core.loader import with_overrides
from seed_core.stages.rl import run_rl_round
from seed_core.trainer.checkpoint import ADAPTER_DIR
from seed_core.trainer.scale import apply_lora, make_accelerator


def _cfg(model: Path, **extra) -> SeedConfig:
    return with_overrides(SeedConfig(), {
        "model.path": str(model), "model.device": "cpu", "env.name": "sokoban", "env.max_steps": 2,
        "rl.algorithm": "grpo", "rl.tasks_per_round": 2, "rl.group_size": 2, "rl.lr": 1e-2, "rl.kl_coef": 0.0,
        "rl.mini_batch_size": 8, "rl.micro_batch_size": 8, "generation.max_new_tokens": 8,
        "generation.max_prompt_tokens": 256, "model.lora_rank": 4, "model.lora_alpha": 8, **extra,
    })


def test_lora_rounds_write_merged_plain_checkpoints_and_resume_from_the_adapter(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    cfg = _cfg(tiny_model_dir)
    run_rl_round(cfg, 0, tiny_model_dir, tmp_path / "rl")
    ckpt0 = tmp_path / "rl" / "round_000" / "checkpoint"
    weights0 = load_file(ckpt0 / "model.safetensors")
    base = load_file(tiny_model_dir / "model.safetensors")
    assert set(weights0) == set(base), "merged checkpoint: the base model's tensor names, no lora_ keys"
    assert any(not torch.equal(weights0[k], base[k]) for k in base), "the merged LoRA update must show"
    assert (ckpt0 / ADAPTER_DIR / "adapter_config.json").is_file() and (ckpt0 / "optimizer.pt").is_file()
    AutoModelForCausalLM.from_pretrained(ckpt0)  # loads as a plain HF model, no merge step
    a0 = load_file(ckpt0 / ADAPTER_DIR / "adapter_model.safetensors")

    run_rl_round(cfg, 1, tiny_model_dir, tmp_path / "rl")  # (prunes round 0's checkpoint: save_every 0)
    ckpt1 = tmp_path / "rl" / "round_001" / "checkpoint"
    a1 = load_file(ckpt1 / ADAPTER_DIR / "adapter_model.safetensors")
    lora_b = [k for k in a0 if "lora_B" in k]
    assert lora_b and all(torch.count_nonzero(a0[k]) > 0 for k in lora_b), "round 0 trained B away from zero"
    # round 1 continued the same adapter (a fresh one would restart lora_B at zero and re-draw lora_A)
    lora_a = [k for k in a0 if "lora_A" in k]
    assert all(torch.allclose(a0[k], a1[k], atol=0.1) for k in lora_a)
    assert any(not torch.equal(a0[k], a1[k]) for k in a0)


def test_lora_rank_zero_leaves_the_model_alone_and_targets_are_parsed(tiny_policy):
    model = tiny_policy.model
    assert apply_lora(model, ModelConfig(lora_rank=0)) is model
    wrapped = apply_lora(model, ModelConfig(lora_rank=2, lora_target_modules="q_proj, v_proj"))
    names = [n for n, p in wrapped.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n and ("q_proj" in n or "v_proj" in n) for n in names)


@pytest.mark.parametrize(("setting", "expected"), [("no", "no"), ("bf16", "bf16")])
def test_mixed_precision_setting_reaches_accelerate(setting, expected):
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)  # a process-wide singleton: one setting per process
    try:
        acc = make_accelerator(ModelConfig(device="cpu", mixed_precision=setting))
        assert str(acc.mixed_precision) == expected and acc.device.type == "cpu"
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)


def test_a_gathered_state_dict_stores_a_tied_weight_once(tiny_policy, tmp_path):
    """FSDP's full state dict holds the tied embedding / LM head as separate copies; the checkpoint stores it once."""
    from transformers import AutoModelForCausalLM

    from seed_core.trainer.checkpoint import save_checkpoint

    model = tiny_policy.model
    assert model.lm_head.weight is model.get_input_embeddings().weight
    gathered = {k: v.detach().clone() for k, v in model.state_dict().items()}  # no shared storage, as gathered
    save_checkpoint(model, tiny_policy.tokenizer, tmp_path / "ckpt", state_dict=gathered)
    stored = load_file(tmp_path / "ckpt" / "model.safetensors")
    assert "lm_head.weight" not in stored and set(stored) == set(load_file(tiny_policy.source / "model.safetensors"))
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "ckpt")
    assert torch.equal(reloaded.lm_head.weight, model.lm_head.weight)
