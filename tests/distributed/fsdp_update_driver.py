"""One RL update + checkpoint through the trainer's own layout code, with 1 process or under FSDP2 on CPU.

    python tests/distributed/fsdp_update_driver.py MODEL_DIR REF_DIR OUT_DIR MICRO [TOKENS [SHARE]]  # 1 process
    accelerate launch --config_file configs/accelerate/cpu_2proc_fsdp.yaml \
        tests/distributed/fsdp_update_driver.py MODEL_DIR REF_DIR OUT_DIR MICRO [TOKENS [SHARE]]     # FSDP2, gloo

TOKENS: ``rl.micro_batch_tokens`` (default 0, no token budget per forward pass). SHARE = 1: ``rl.share_prefix`` on,
with rows 0-2 (rank 0's share on two ranks) repeating one prompt and rows 3-5 (rank 1's) all distinct, so the ranks'
scoring passes take different numbers of forwards (a shared pass is two).

The same steps as ``seed_core.stages.rl``: ``make_accelerator``, ``accelerator.prepare`` (policy), ``prepare_reference``
(KL reference, loaded from REF_DIR, another model, so the KL term is not 0), ``rl_update``, ``save_policy``
(full state dict gathered on rank 0 -> plain HF directory). Rank 0 writes ``OUT_DIR/result.json`` (metrics,
layout, how each rank's parameters are sharded) and ``OUT_DIR/checkpoint``.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from rl_update_driver import fixed_samples  # noqa: E402


def local_numel(model: torch.nn.Module) -> tuple[int, int, bool]:
    """(elements this rank holds, elements of the full model, every parameter a sharded DTensor)."""
    from torch.distributed.tensor import DTensor

    params = list(model.parameters())
    held = sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in params)
    full = sum(p.numel() for p in params)  # a DTensor's numel is its global size
    return held, full, bool(params) and all(isinstance(p, DTensor) for p in params)


def main() -> None:
    from seed_core.algorithms import ALGORITHMS
    from seed_core.config import ModelConfig, RLConfig
    from seed_core.modeling.models import load_policy
    from seed_core.trainer.distributed import Collective
    from seed_core.trainer.rl_step import rl_update
    from seed_core.trainer.scale import is_fsdp, make_accelerator, prepare_reference, save_policy

    torch.set_num_threads(1)
    # a collective that only some ranks reach hangs: print where every rank is and exit instead
    faulthandler.dump_traceback_later(float(os.environ.get("SEED_DRIVER_HANG_S", "240")), exit=True)
    model_dir, ref_dir, out, micro = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
    tokens = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    share = len(sys.argv) > 6 and sys.argv[6] == "1"
    model_cfg = ModelConfig(path=model_dir, device="cpu")
    accelerator = make_accelerator(model_cfg)
    policy = load_policy(model_cfg)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(policy.model, optimizer)  # the order of seed_core.stages.rl
    ref = prepare_reference(accelerator, load_policy(model_cfg, ref_dir, trainable=False).model)
    cfg = RLConfig(mini_batch_size=6, micro_batch_size=micro, micro_batch_tokens=tokens, kl_coef=0.01,
                   entropy_coef=0.001, opd_coef=0.5, share_prefix=share)
    samples = fixed_samples()
    if share:
        samples = replace(samples, prompt_ids=[samples.prompt_ids[0]] * 3 + samples.prompt_ids[3:],
                          teacher_prompt_ids=[samples.teacher_prompt_ids[0]] * 3 + samples.teacher_prompt_ids[3:])
    metrics = rl_update(model, optimizer, samples, cfg=cfg, algorithm=ALGORITHMS.get("seed"),
                        pad_id=policy.tokenizer.pad_token_id, ref_model=ref, accelerator=accelerator, seed=3)
    # after the update: the reference has run forward passes only, and must still be sharded
    shards = Collective(accelerator).gather_lists([{"policy": local_numel(model), "ref": local_numel(ref)}])
    save_policy(accelerator, model, policy.tokenizer, out / "checkpoint", optimizer)
    if accelerator.is_main_process:
        (out / "result.json").write_text(json.dumps({
            "metrics": metrics, "world": accelerator.num_processes, "fsdp": is_fsdp(accelerator),
            "fsdp2": bool(getattr(accelerator, "is_fsdp2", False)),
            "distributed_type": str(accelerator.distributed_type), "shards": shards}))
    accelerator.wait_for_everyone()


if __name__ == "__main__":
    main()
