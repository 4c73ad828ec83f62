"""GPU health and throughput check: rollout tokens/s (hf vs vllm), trainer tokens/s and MFU, peak memory,
and the SEED/GRPO cost ratio of one RL iteration, all on one model in one run, written as JSON.

    python benchmarks/gpu_check.py --model PATH [--backends hf,vllm] [--out benchmarks/results/gpu_check.json]

``scripts/gpu_check.sh`` runs it after the ``gpu`` tests. It also runs on CPU (``--device cpu --model tiny``)
so the script itself is tested without a GPU; MFU is then null (no known peak).

* rollout: the same ``--prompts`` Sokoban prompts, ``--new-tokens`` each, temperature 1, through every backend.
* trainer: forward + backward of ``response_logprobs`` on ``--train-batch`` x ``--train-len`` token rows (bf16
  autocast on GPU); MFU = 6 * N_params * tokens/s / peak bf16 FLOP/s of the device (dense, no sparsity).
* iteration: one ``grpo`` and one ``seed`` round of ``run_rl_round`` on Sokoban (after one warm-up round), with
  each round's weight-sync monitor ``rollout/sampling_logp_diff_mean`` / ``_max``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from seed_core.loader import with_overrides

ROOT = Path(__file__).resolve().parents[1]

PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "H800": 989e12, "A100": 312e12, "A800": 312e12,
                   "L40S": 362e12, "A10": 125e12, "4090": 165e12}
"""Dense bf16 tensor-core peaks from the vendors' data sheets, matched against ``torch.cuda.get_device_name``."""


def peak_flops(device_name: str) -> float | None:
    return next((v for k, v in PEAK_BF16_FLOPS.items() if k in device_name), None)


def vllm_python() -> str | None:
    """The interpreter the vllm backend launches its engines from: ``$SEED_VLLM_PYTHON``, else ``.venv-vllm``, else
    this one when it imports vllm; None when there is none (the lent machine's image: no vLLM)."""
    import importlib.util

    if os.environ.get("SEED_VLLM_PYTHON"):
        return os.environ["SEED_VLLM_PYTHON"]  # as given: a wrong path is reported as the backend's error
    if (ROOT / ".venv-vllm" / "bin" / "python").is_file():
        return str(ROOT / ".venv-vllm" / "bin" / "python")
    return sys.executable if importlib.util.find_spec("vllm") is not None else None


def rollout_throughput(cfg: Any, policy: Any, backend_name: str, prompts: list[str], new_tokens: int) -> dict[str, Any]:
    from seed_core.rollout.backends import make_backend

    backend = make_backend(policy, cfg.generation.model_copy(update={"backend": backend_name}))
    backend.generate(prompts[:2], temperature=1.0, max_new_tokens=8, seed=0)  # warm-up (engine start, kernels)
    t0 = time.perf_counter()
    outs = backend.generate(prompts, temperature=1.0, max_new_tokens=new_tokens, seed=1)
    elapsed = time.perf_counter() - t0
    tokens = sum(len(o.token_ids) for o in outs)
    return {"generated_tokens": tokens, "seconds": elapsed, "tokens_per_s": tokens / elapsed}


def trainer_throughput(policy: Any, batch: int, length: int, steps: int) -> dict[str, Any]:
    import torch

    from seed_core.trainer.logprobs import pack_sequences, response_logprobs

    model = policy.model.train()
    n_params = sum(p.numel() for p in model.parameters())
    vocab = min(model.config.vocab_size, 30000)
    gen = torch.Generator().manual_seed(0)
    rows = torch.randint(10, vocab, (batch, length), generator=gen).tolist()
    half = length // 2
    packed = pack_sequences([r[:half] for r in rows], [r[half:] for r in rows], policy.tokenizer.pad_token_id)
    cuda = policy.device.type == "cuda"
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else torch.autocast("cpu", enabled=False)
    if cuda:
        torch.cuda.reset_peak_memory_stats()

    def step() -> None:
        with autocast:
            logprobs, _ = response_logprobs(model, packed)
        (-logprobs.sum() / logprobs.numel()).backward()
        model.zero_grad(set_to_none=True)

    step()  # warm-up
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - t0
    tokens_per_s = batch * length * steps / elapsed
    peak = peak_flops(torch.cuda.get_device_name()) if cuda else None
    return {"params": n_params, "tokens_per_s": tokens_per_s, "seconds": elapsed,
            "mfu": 6 * n_params * tokens_per_s / peak if peak else None,
            "peak_memory_gb": torch.cuda.max_memory_allocated() / 2**30 if cuda else None}


def iteration_ratio(cfg: Any, model: Path, work: Path) -> dict[str, Any]:
    from seed_core.stages.rl import run_rl_round

    run_rl_round(with_overrides(cfg, {"rl.algorithm": "grpo"}), 0, model, work / "warmup")
    rounds = {a: run_rl_round(with_overrides(cfg, {"rl.algorithm": a}), 0, model, work / a) for a in ("grpo", "seed")}
    times = {a: m["time/round_s"] for a, m in rounds.items()}
    return {"round_s": times, "seed_over_grpo": times["seed"] / times["grpo"],
            "seed_teacher_sample_ratio": rounds["seed"].get("rl/teacher_sample_ratio"),
            "seed_parse_ok_rate": rounds["seed"].get("analysis/parse_ok_rate"),
            # the weight-sync monitor on this backend and dtype (rl.max_sampling_logp_diff is checked on the mean)
            "sampling_logp_diff": {a: {k: m.get(f"rollout/sampling_logp_diff_{k}") for k in ("mean", "max")}
                                   for a, m in rounds.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.environ.get("SEED_GPU_MODEL", "smollm2-135m-instruct"),
                        help="HF model directory (or a name under models/); 'tiny' = a tiny analyzer-warmed model")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--backends", default="hf,vllm")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--train-batch", type=int, default=8)
    parser.add_argument("--train-len", type=int, default=1024)
    parser.add_argument("--train-steps", type=int, default=5)
    parser.add_argument("--rounds-tasks", type=int, default=8, help="tasks per RL round (x group 4) for the ratio")
    parser.add_argument("--skip-iteration", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import torch
    import transformers

    from seed_core.config import SeedConfig
    from seed_core.envs import make_env
    from seed_core.modeling.models import load_policy

    work = Path(tempfile.mkdtemp(prefix="seed-gpu-check-"))
    if args.model == "tiny":
        from seed_core.modeling.builders import build_tiny_analyzer_model

        model = build_tiny_analyzer_model(work / "tiny")
    else:
        model = Path(args.model)
    cuda = torch.cuda.is_available() and args.device != "cpu"
    vllm = vllm_python()
    cfg = with_overrides(SeedConfig(), {
        "model.path": str(model), "model.device": args.device, "model.dtype": "bfloat16" if cuda else "float32",
        "env.name": "sokoban", "env.max_steps": 4, "generation.max_new_tokens": args.new_tokens,
        "generation.batch_size": args.prompts, "generation.max_prompt_tokens": 1024,
        "generation.vllm.python": vllm or "", "generation.vllm.max_model_len": 4096,
        "generation.vllm.extra_args": [] if cuda else ["--enforce-eager"],
        "rl.tasks_per_round": args.rounds_tasks, "rl.group_size": 4,
        "rl.mini_batch_size": 1024, "rl.micro_batch_size": 16, "rl.analyzer_max_new_tokens": 128,
        "tracking.enabled": False,
    })
    env = make_env(cfg.env)
    prompts = [env.build_prompt(env.reset(t), [], 0) for t in env.make_tasks("train", args.prompts, seed=0)]
    result: dict[str, Any] = {
        "model": str(model), "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__, "transformers": transformers.__version__, "settings": vars(args), "rollout": {}}
    policy = load_policy(cfg.model)  # one load, shared by every backend and the trainer pass
    for name in [b for b in args.backends.split(",") if b]:
        if name == "vllm" and vllm is None:
            why = "no vLLM here (no SEED_VLLM_PYTHON, no .venv-vllm, vllm not importable)"
            result["rollout"][name] = {"skipped": why}
            print(f"gpu_check: skipped rollout vllm: {why}", file=sys.stderr)
            continue
        try:
            result["rollout"][name] = rollout_throughput(cfg, policy, name, prompts, args.new_tokens)
        except Exception as err:  # a missing vLLM env is reported, the rest of the check still runs
            result["rollout"][name] = {"error": f"{type(err).__name__}: {err}"}
        print(f"rollout {name}: {result['rollout'][name]}", file=sys.stderr)
    rates = {k: v["tokens_per_s"] for k, v in result["rollout"].items() if "tokens_per_s" in v}
    if "hf" in rates and "vllm" in rates:
        result["rollout"]["vllm_over_hf"] = rates["vllm"] / rates["hf"]
    result["trainer"] = trainer_throughput(policy, args.train_batch, args.train_len, args.train_steps)
    print(f"trainer: {result['trainer']}", file=sys.stderr)
    if not args.skip_iteration:
        result["iteration"] = iteration_ratio(cfg, model, work)
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
