"""How far the shared-prefix paths (issue 42) move the numbers, against the unshared ones, on real models and prompts.

    python benchmarks/shared_prefix_exactness.py --testbed DIR [--smollm2 DIR] [--group 8] [--prompts 2]
        [--out benchmarks/results/shared_prefix_exactness.json]

Per model (the testbed of ``params.yaml``, its prompts from the default environment; SmolLM2-135M-Instruct on
Sokoban first-step prompts), ``--prompts`` prompts x ``--group`` responses sampled at temperature 1 by the ``hf``
backend (unshared), then, unshared against ``rl.share_prefix`` / ``generation.share_prefix``:

* ``logprob_max_abs``: max |l_shared - l_unshared| over the response tokens (no-grad scoring, ``score_in_chunks``);
* ``grad_max_abs`` / ``grad_scale``: one GRPO update (k3 KL 0.01 to the starting weights, token-mean, clip 1) with
  SGD of lr 1, so the weights move by the clipped gradient itself: max |delta_shared - delta_unshared| and max |delta|;
* ``adamw_weight_max_abs``: the same update with AdamW at the config's ``rl.lr``: max |w_shared - w_unshared|;
* ``rollout``: the same prompts generated with ``generation.share_prefix`` from the same seed: the share of rows with
  identical tokens and the max |engine log-prob difference| over the identical ones.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
from pathlib import Path
from typing import Any

import torch

from seed_core.algorithms import ALGORITHMS
from seed_core.config import GenerationConfig, ModelConfig
from seed_core.envs import make_env
from seed_core.loader import load_config
from seed_core.modeling.models import load_policy
from seed_core.rollout.backends import HFBackend
from seed_core.trainer.logprobs import score_in_chunks
from seed_core.trainer.rl_step import RLSamples, rl_update

ROOT = Path(__file__).resolve().parents[1]


def _prompts(env_cfg: Any, n: int) -> list[str]:
    env = make_env(env_cfg)
    return [env.build_prompt(env.reset(task), [], 0) for task in env.make_tasks("train", n, seed=0)]


def _update(model: torch.nn.Module, samples: RLSamples, rl: Any, share: bool, optimizer: str,
            pad_id: int) -> list[torch.Tensor]:
    """The weights after one GRPO update of a copy of ``model``."""
    model = copy.deepcopy(model)
    ref = copy.deepcopy(model).eval()
    opt = torch.optim.SGD(model.parameters(), lr=1.0) if optimizer == "sgd" else \
        torch.optim.AdamW(model.parameters(), lr=rl.lr, weight_decay=0.0)
    cfg = rl.model_copy(update={"algorithm": "grpo", "kl_coef": 0.01, "entropy_coef": 0.0, "ppo_epochs": 1,
                                "mini_batch_size": len(samples), "share_prefix": share})
    rl_update(model, opt, samples, cfg=cfg, algorithm=ALGORITHMS.get("grpo"), pad_id=pad_id, ref_model=ref, seed=0)
    return [p.detach().clone() for p in model.parameters()]


def measure(name: str, model_dir: str, env_cfg: Any, rl: Any, gen: GenerationConfig, prompts_n: int,
            group: int) -> dict[str, Any]:
    policy = load_policy(ModelConfig(path=model_dir, device="cpu"))
    pad = policy.tokenizer.pad_token_id
    prompts = [p for p in _prompts(env_cfg, prompts_n) for _ in range(group)]
    runs = [HFBackend(policy, gen.model_copy(update={"share_prefix": share})).generate(
        prompts, temperature=1.0, max_new_tokens=gen.max_new_tokens, seed=0) for share in (False, True)]
    same = [a.token_ids == b.token_ids for a, b in zip(*runs)]
    engine_diff = max((abs(x - y) for a, b, s in zip(*runs, same) if s for x, y in zip(a.logprobs, b.logprobs)),
                      default=0.0)
    encoder = HFBackend(policy, gen)
    prompt_ids = [encoder.encode(p) for p in prompts]
    responses = [c.token_ids or [pad] for c in runs[0]]
    scored = [score_in_chunks(policy.model, prompt_ids, responses, pad, rl.micro_batch_size, share_prefix=share)
              for share in (False, True)]
    logprob_diff = max(float((a - b).abs().max()) for a, b in zip(*scored))
    g = torch.Generator().manual_seed(0)
    samples = RLSamples(prompt_ids=prompt_ids, response_ids=responses, teacher_prompt_ids=[None] * len(prompts),
                        group_ids=[str(i // group) for i in range(len(prompts))],
                        scores=torch.randint(0, 2, (len(prompts),), generator=g).float())
    start = [p.detach().clone() for p in policy.model.parameters()]
    sgd = [_update(policy.model, samples, rl, share, "sgd", pad) for share in (False, True)]
    adamw = [_update(policy.model, samples, rl, share, "adamw", pad) for share in (False, True)]
    return {
        "model": name, "prompts": prompts_n, "group": group,
        "prompt_tokens": sorted({len(p) for p in prompt_ids}),
        "response_tokens": sum(len(r) for r in responses),
        "logprob_max_abs": logprob_diff,
        "grad_max_abs": max(float((a - b).abs().max()) for a, b in zip(*sgd)),
        "grad_scale": max(float((a - s).abs().max()) for a, s in zip(sgd[0], start)),
        "adamw_weight_max_abs": max(float((a - b).abs().max()) for a, b in zip(*adamw)),
        "adamw_weight_step_max": max(float((a - s).abs().max()) for a, s in zip(adamw[0], start)),
        "rollout": {"identical_rows": sum(same), "rows": len(same), "engine_logprob_max_abs": engine_diff},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--testbed", required=True, help="the testbed model directory (prepare_model of params.yaml)")
    parser.add_argument("--smollm2", default=str(ROOT / "models" / "smollm2-135m-instruct"))
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "shared_prefix_exactness.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_config(ROOT / "params.yaml")
    smol = load_config(ROOT / "presets" / "smollm2-sokoban.yaml")
    # a group's shared pass needs its prompt + G responses under the budget (455 + 8 x 48 tokens); unshared: 2 rows
    smol_rl = smol.rl.model_copy(update={"micro_batch_size": 8, "micro_batch_tokens": 1024})
    results = [measure("testbed (params.yaml)", args.testbed, cfg.env, cfg.rl, cfg.generation, args.prompts,
                       args.group),
               measure("smollm2-135m-instruct (presets/smollm2-sokoban.yaml, micro-batches of 1,024 tokens)",
                       args.smollm2, smol.env, smol_rl, smol.generation, args.prompts, args.group)]
    out = {"results": results, "threads": args.threads, "machine": platform.processor() or platform.machine(),
           "torch": torch.__version__}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
