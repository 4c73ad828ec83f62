"""FSDP2 (torch ``fully_shard``) on 2 CPU processes over gloo: the trainer's sharded path without a GPU.

``configs/accelerate/cpu_2proc_fsdp.yaml`` is the FSDP launch config of the GPU layouts with 2 processes and no
mixed precision. The driver runs the steps of ``seed_core.stages.rl``: sharded policy (``accelerator.prepare``), sharded
KL reference (``prepare_reference``), one ``rl_update``, ``save_policy`` (full state dict gathered on rank 0).
The result must equal a plain 1-process run: same loss, same updated weights, a plain HF checkpoint.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

DRIVER = Path(__file__).with_name("fsdp_update_driver.py")
FSDP_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "accelerate" / "cpu_2proc_fsdp.yaml"
ACCELERATE = Path(sys.executable).with_name("accelerate")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd: list[str]) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "SEED_DRIVER_HANG_S": "150"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-5000:]


def _stored_names(checkpoint: Path) -> set[str]:
    from safetensors import safe_open

    with safe_open(str(checkpoint / "model.safetensors"), framework="pt") as fh:
        return set(fh.keys())


def _weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The checkpoint loaded as any user would: a plain Hugging Face directory."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(checkpoint, local_files_only=True, dtype=torch.float32)
    return {k: v.detach() for k, v in model.state_dict().items()}


@pytest.mark.timeout(600)
def test_fsdp2_two_cpu_processes_match_one_process(tiny_model_dir: Path, tmp_path: Path):
    from seed_core.modeling.builders import build_tiny_model

    ref_dir = build_tiny_model(tmp_path / "ref", seed=1)  # a KL reference that differs from the policy
    args = [str(DRIVER), str(tiny_model_dir), str(ref_dir)]
    _run([sys.executable, *args, str(tmp_path / "one"), "6"])
    _run([str(ACCELERATE), "launch", "--config_file", str(FSDP_CONFIG), "--main_process_port", str(_free_port()),
          *args, str(tmp_path / "two"), "2"])
    one = json.loads((tmp_path / "one" / "result.json").read_text())
    two = json.loads((tmp_path / "two" / "result.json").read_text())

    # the layout: FSDP2 over 2 processes, not accelerate's silent CPU fallback to DDP (MULTI_CPU)
    assert (one["world"], one["fsdp"]) == (1, False)
    assert (two["world"], two["fsdp"], two["fsdp2"]) == (2, True, True), two["distributed_type"]
    # policy and reference are sharded: every parameter a DTensor, each rank holding about half of the elements,
    # the reference still so after its forward passes (FSDP2 keeps a root's parameters unsharded after forward
    # unless told otherwise, and a frozen reference never runs the backward that would reshard them)
    for rank in two["shards"]:
        for name in ("policy", "ref"):
            held, full, all_dtensors = rank[name]
            assert all_dtensors and held <= full // 2 + 1024, (name, held, full)
    assert sum(r["policy"][0] for r in two["shards"]) == two["shards"][0]["policy"][1]

    # the same update: global token-mean loss (with a non-zero KL to the sharded reference), gradient norm
    m1, m2 = one["metrics"], two["metrics"]
    assert m1["rl/kl_loss"] > 1e-4 and m2["rl/kl_loss"] > 1e-4
    assert m2["rl/total_loss"] == pytest.approx(m1["rl/total_loss"], abs=1e-5)
    assert m2["rl/grad_norm"] == pytest.approx(m1["rl/grad_norm"], rel=1e-4)
    assert m1["rl/optimizer_steps"] == m2["rl/optimizer_steps"] == 1.0

    # the full state dict gathered on rank 0 is a plain HF checkpoint with the same updated weights
    ckpt = tmp_path / "two" / "checkpoint"
    assert (ckpt / "model.safetensors").is_file() and not (ckpt / "adapter").exists()
    assert sorted(p.name for p in ckpt.glob("optimizer*.pt")) == ["optimizer.rank0.pt", "optimizer.rank1.pt"]
    assert _stored_names(ckpt) == _stored_names(tmp_path / "one" / "checkpoint"), "a tied weight is stored once"
    w0, w1, w2 = _weights(tiny_model_dir), _weights(tmp_path / "one" / "checkpoint"), _weights(ckpt)
    assert w1.keys() == w2.keys() == w0.keys()
    step1 = torch.cat([(w1[k] - w0[k]).flatten() for k in w0])  # the 1-process update
    step2 = torch.cat([(w2[k] - w0[k]).flatten() for k in w0])
    lr = 1e-3  # the driver's AdamW: a first step moves each weight by at most lr
    assert float(step1.abs().max()) > 0.5 * lr, "the update changed the weights"
    # AdamW's first step is lr * g / (|g| + eps): where |g| is near eps, float rounding differences between
    # 1 and 2 processes move a few weights by a fraction of lr; everywhere else the steps agree to ~1e-7
    rel = float((step2 - step1).norm() / step1.norm())
    diff = float((step2 - step1).abs().max())
    assert rel < 1e-3 and diff < 0.2 * lr, f"1 vs 2 processes: |dw| relative {rel:.3g}, max {diff:.3g}"


@pytest.mark.timeout(600)
def test_fsdp2_token_budget_gives_ranks_unequal_micro_batches_and_still_matches_one_process(
        tiny_model_dir: Path, tmp_path: Path):
    """``rl.micro_batch_tokens`` cuts each rank's rows by their lengths: with a budget of 10 tokens the reference
    pass scores rank 0's rows (lengths 3, 6, 6) in 3 forward passes and rank 1's (4, 5, 6) in 2. FSDP all-gathers
    in every forward, so without padding passes the ranks enter different collectives (gloo aborts or hangs: the
    ALFWorld rehearsal's defect). The 2-process update must run and equal the 1-process one."""
    from seed_core.modeling.builders import build_tiny_model
    from seed_core.trainer.distributed import rank_slice

    sys.path.insert(0, str(DRIVER.parent))
    from rl_update_driver import fixed_samples

    samples = fixed_samples()
    lengths = [len(p) + len(r) for p, r in zip(samples.prompt_ids, samples.response_ids)]
    assert [sorted(lengths[i] for i in rank_slice(range(6), r, 2).index) for r in (0, 1)] == [[3, 6, 6], [4, 5, 6]]

    ref_dir = build_tiny_model(tmp_path / "ref", seed=1)
    args = [str(DRIVER), str(tiny_model_dir), str(ref_dir)]
    _run([sys.executable, *args, str(tmp_path / "one"), "6", "10"])
    _run([str(ACCELERATE), "launch", "--config_file", str(FSDP_CONFIG), "--main_process_port", str(_free_port()),
          *args, str(tmp_path / "two"), "6", "10"])
    m1 = json.loads((tmp_path / "one" / "result.json").read_text())["metrics"]
    m2 = json.loads((tmp_path / "two" / "result.json").read_text())["metrics"]
    assert m1["rl/kl_loss"] > 1e-4
    assert m2["rl/total_loss"] == pytest.approx(m1["rl/total_loss"], abs=1e-5)
    assert m2["rl/kl_loss"] == pytest.approx(m1["rl/kl_loss"], abs=1e-6)
    assert m2["rl/grad_norm"] == pytest.approx(m1["rl/grad_norm"], rel=1e-4)


@pytest.mark.timeout(600)
def test_fsdp2_shared_prefix_scoring_pads_to_the_other_ranks_forward_count_and_matches_one_process(
        tiny_model_dir: Path, tmp_path: Path):
    """``rl.share_prefix`` on two FSDP2 ranks: rank 0's rows repeat one prompt (its scoring passes take a prefix and a
    continuation forward each), rank 1's are distinct (one forward each); the ranks agree on the count first and the
    update (unshared there: one forward per backward) equals the 1-process update, which shares in the update too."""
    from seed_core.modeling.builders import build_tiny_model

    ref_dir = build_tiny_model(tmp_path / "ref", seed=1)
    args = [str(DRIVER), str(tiny_model_dir), str(ref_dir)]
    _run([sys.executable, *args, str(tmp_path / "one"), "6", "0", "1"])
    _run([str(ACCELERATE), "launch", "--config_file", str(FSDP_CONFIG), "--main_process_port", str(_free_port()),
          *args, str(tmp_path / "two"), "6", "0", "1"])
    m1 = json.loads((tmp_path / "one" / "result.json").read_text())["metrics"]
    m2 = json.loads((tmp_path / "two" / "result.json").read_text())["metrics"]
    # the update's loss and gradient (rl/kl_loss is a mean over micro-batches: one here, one per rank there)
    assert m1["rl/kl_loss"] > 1e-4
    assert m2["rl/total_loss"] == pytest.approx(m1["rl/total_loss"], abs=1e-5)
    assert m2["rl/grad_norm"] == pytest.approx(m1["rl/grad_norm"], rel=1e-4)
