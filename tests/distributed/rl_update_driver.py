"""One RL update on fixed samples, run under ``accelerate launch`` with 1 or N processes (CPU, gloo).

    accelerate launch --multi_gpu --num_processes 2 tests/distributed/rl_update_driver.py MODEL_DIR OUT.json

Rank 0 writes the update's metrics and a fingerprint of the updated weights to OUT.json, so the test can
compare a 1-process and a 2-process run on the same data.
"""

from __future__ import annotations

import json
import sys

import torch


def fixed_samples():
    from seed_core.trainer.rl_step import RLSamples

    prompts = [[10, 11, 12], [13, 14], [15, 16, 17, 18], [19, 20], [21, 22, 23], [24]]
    teacher = [[99, 98, 10, 11, 12], None, [97, 15, 16, 17, 18], [96, 19, 20], None, [95, 24]]
    return RLSamples(
        prompt_ids=prompts,
        response_ids=[[40, 41, 42], [43], [44, 45], [46, 47, 48, 49], [50, 51], [52, 53, 54]],
        teacher_prompt_ids=teacher,
        group_ids=["g0", "g0", "g0", "g1", "g1", "g1"],
        scores=torch.tensor([10.0, -0.1, 0.0, 0.0, 10.0, 10.0]),
    )


SAMPLING_OFFSETS = [0.0, 0.5, -0.25, 0.0, 0.1, 0.0]
"""The engine log-probs the driver hands in: theta_old's own plus these, per row (the weight-sync monitor)."""


def with_engine_logprobs(samples, model, pad_id: int):
    from dataclasses import replace

    from seed_core.trainer.logprobs import score_in_chunks

    exact = score_in_chunks(model, samples.prompt_ids, samples.response_ids, pad_id, 8)
    engine = [[float(x) + off for x in lp] for lp, off in zip(exact, SAMPLING_OFFSETS)]
    return replace(samples, sampling_logprobs=engine)


def main() -> None:
    from seed_core.algorithms import ALGORITHMS
    from seed_core.config import ModelConfig, RLConfig
    from seed_core.modeling.models import load_policy
    from seed_core.trainer.rl_step import rl_update
    from seed_core.trainer.scale import make_accelerator, prepare_reference

    torch.set_num_threads(1)
    model_dir, out = sys.argv[1], sys.argv[2]
    micro = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    model_cfg = ModelConfig(path=model_dir, device="cpu")
    accelerator = make_accelerator(model_cfg)
    policy = load_policy(model_cfg)
    ref = prepare_reference(accelerator, load_policy(model_cfg, trainable=False).model)
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(policy.model, optimizer)
    cfg = RLConfig(mini_batch_size=6, micro_batch_size=micro, kl_coef=0.01, entropy_coef=0.001, opd_coef=0.5)
    samples = with_engine_logprobs(fixed_samples(), policy.model, policy.tokenizer.pad_token_id)
    metrics = rl_update(model, optimizer, samples, cfg=cfg, algorithm=ALGORITHMS.get("seed"),
                        pad_id=policy.tokenizer.pad_token_id, ref_model=ref, accelerator=accelerator, seed=3)
    params = torch.cat([p.detach().flatten() for p in accelerator.unwrap_model(model).parameters()])
    if accelerator.is_main_process:
        with open(out, "w") as fh:
            json.dump({"metrics": metrics, "world": accelerator.num_processes,
                       "distributed_type": str(accelerator.distributed_type),
                       "param_sum": float(params.sum()), "param_abs_sum": float(params.abs().sum()),
                       "params_head": params[:2000].tolist()}, fh)
    accelerator.wait_for_everyone()


if __name__ == "__main__":
    main()
