"""Rollout generation throughput: the ``hf`` backend vs the ``vllm`` backend on one model and batch.

    python benchmarks/rollout_throughput.py --vllm-python .venv-vllm/bin/python \
        [--model smollm2-135m-instruct] [--prompts 16] [--new-tokens 64] [--dtype float32] [--out FILE.json]

Both backends get the same prompts (``--prompts`` distinct agent-style user messages), the same batch
(all prompts in one ``generate`` call; hf ``batch_size`` = the number of prompts), temperature 1.0 with
the same seed, and ``--new-tokens`` per answer. After one warm-up call each, they run ``--repeats`` times,
interleaved (a shared machine's load hits both alike); the JSON reports generated tokens (EOS included)
per second, median over the runs, the vLLM engine's start-up time and one weight sync (reload from a
hard-linked copy of the model directory + prefix-cache reset), which an RL round pays once. On CPU set ``VLLM_CPU_KVCACHE_SPACE`` (GiB) and keep ``--enforce-eager``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

TASKS = ["push the box onto the target", "put a clean mug in the cabinet", "make 12 from the cards",
         "find the red ball", "open the fridge and take the apple", "reach the exit without hitting walls",
         "cool a tomato and put it on the table", "buy a blue shirt under 20 dollars"]


def prompts(n: int) -> list[str]:
    return [f"You are an agent. Task {i}: {TASKS[i % len(TASKS)]}. Think briefly inside <think></think>, then "
            "give your next action inside <action></action>." for i in range(n)]


def run_once(backend: Any, batch: list[str], new_tokens: int, seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    out = backend.generate(batch, temperature=1.0, max_new_tokens=new_tokens, seed=seed)
    wall = time.perf_counter() - t0
    tokens = sum(len(c.token_ids) for c in out)
    return {"wall_s": round(wall, 3), "tokens": tokens, "tokens_per_s": round(tokens / wall, 1)}


def summary(runs: list[dict[str, Any]], batch: int) -> dict[str, Any]:
    return {"runs": runs, "median_tokens_per_s": statistics.median(run["tokens_per_s"] for run in runs),
            "mean_tokens_per_answer": round(statistics.mean(run["tokens"] for run in runs) / batch, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--vllm-python", required=True, help="the vLLM environment's python (scripts/setup_vllm.sh)")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", default="float32", help="both backends (vLLM --dtype, hf model.dtype)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the hf backend")
    parser.add_argument("--out", default="benchmarks/results/rollout_throughput_cpu.json")
    args = parser.parse_args()

    import torch

    from seed_core.config import GenerationConfig, ModelConfig, VLLMConfig
    from seed_core.modeling.models import load_policy
    from seed_core.rollout.backends import BACKENDS
    from seed_core.rollout.vllm_backend import VLLMBackend
    from seed_core.rollout.vllm_engine import EnginePool
    from seed_core.trainer.checkpoint import link_tree

    torch.set_num_threads(args.threads)
    cpu = not torch.cuda.is_available()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    policy = load_policy(ModelConfig(path=args.model, dtype=args.dtype))
    vllm_cfg = VLLMConfig(python=args.vllm_python, dtype=args.dtype, max_model_len=1024,
                          extra_args=["--enforce-eager"] if cpu else [])
    gen = GenerationConfig(backend="vllm", batch_size=args.prompts, max_prompt_tokens=512, vllm=vllm_cfg)
    batch = prompts(args.prompts)
    result: dict[str, Any] = {
        "model": str(policy.source), "dtype": args.dtype, "device": "cpu" if cpu else torch.cuda.get_device_name(),
        "cpu_count": os.cpu_count(), "machine": platform.processor() or platform.machine(),
        "prompts": args.prompts, "new_tokens": args.new_tokens, "repeats": args.repeats, "temperature": 1.0,
        "hf_threads": args.threads, "vllm_kv_cache_gib": os.environ.get("VLLM_CPU_KVCACHE_SPACE") if cpu else None,
    }
    hf = BACKENDS.get("hf")(policy, gen)
    pool = EnginePool()
    try:
        backend = VLLMBackend(policy, gen, pool=pool)
        t0 = time.perf_counter()
        backend.generate(batch[:1], temperature=0, max_new_tokens=1)
        result["vllm_startup_s"] = round(time.perf_counter() - t0, 1)
        runs: dict[str, list[dict[str, Any]]] = {"hf": [], "vllm": []}
        for name, b in (("hf", hf), ("vllm", backend)):  # warm-up
            run_once(b, batch, args.new_tokens, seed=0)
        for r in range(args.repeats):  # interleaved, so the load of a shared machine hits both alike
            for name, b in (("hf", hf), ("vllm", backend)):
                runs[name].append(run_once(b, batch, args.new_tokens, seed=1 + r))
                print(name, runs[name][-1], flush=True)
        result["hf"], result["vllm"] = summary(runs["hf"], len(batch)), summary(runs["vllm"], len(batch))
        with tempfile.TemporaryDirectory() as tmp:
            copy = link_tree(Path(policy.source), Path(tmp) / "same-weights")
            synced = VLLMBackend(replace(policy, source=copy), gen, pool=pool)
            with pool.get(synced.pool_key(), lambda: []).serving(copy.resolve()) as engines:
                result["vllm_weight_sync_s"] = round(engines[0].last_sync["seconds"], 2)
    finally:
        pool.stop_all()
    result["speedup_vllm_over_hf"] = round(result["vllm"]["median_tokens_per_s"] / result["hf"]["median_tokens_per_s"], 2)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
