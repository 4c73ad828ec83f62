"""Peer benchmark: one GRPO iteration with seed and with TRL's ``GRPOTrainer`` on the same work.

    python benchmarks/peer_trl.py [--model models/smollm2-135m-instruct] [--prompts 1] [--group 8]
        [--max-new-tokens 48] [--prompt-tokens N] [--seed-rl JSON] [--seed-generation JSON] [--repeats 3]
        [--concurrent] [--trl-python PYTHON] [--out FILE.json]
    python benchmarks/peer_trl.py --combine A.json B.json --out FILE.json   # runs of separate invocations

The work: ``--prompts`` Sokoban prompts (train split, seeded; first-step prompts, or with ``--prompt-tokens N`` each
task's multi-turn prompt after enough steps of history to reach N tokens), ``--group`` completions each,
at most ``--max-new-tokens`` new tokens at temperature 1, fp32 on CPU; reward = the environment's step
reward minus the invalid-format penalty; GRPO advantages (group mean and std), token-mean clipped
surrogate, k3 KL to the frozen starting model with weight ``--beta``, one AdamW step of ``--lr`` with
gradient clipping at 1. Each repetition of each trainer runs in a fresh process (``--worker``), seed and
TRL interleaved; the parent reads that process's wall time, CPU time and peak RSS from ``os.wait4``.

TRL is an optional extra (``pip install -e .[peer]``, it co-installs with this project's pins); when the
running interpreter lacks it, pass ``--trl-python`` (an interpreter that has it). Top-level keys
``wall_ratio`` and ``memory_ratio`` are seed over TRL, medians of the iteration wall time and of the
process peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
PENALTY = 0.1
DIFFERENCES = [
    "same: model and weights (fp32, CPU, 2 torch threads), prompt texts and chat template, group size, "
    "max new tokens, temperature 1 / top_p 1 / top_k off, reward function, GRPO group mean/std advantages, "
    "token-mean clipped surrogate (TRL loss_type dapo), k3 KL weight beta, lr, grad clip 1, one optimizer step",
    "completions differ: each trainer samples with its own RNG stream, so lengths and rewards differ per run",
    "scoring: both skip the old-logprob pass (on-policy, one step) and run one no-grad reference pass",
    "memory tactics: TRL defaults to gradient checkpointing and its fused chunked LM head; seed runs its selective "
    "LM head, with gradient checkpointing when the workload's seed_grad_ckpt is true and the micro-batching of "
    "seed_micro_batching",
    "prompt sharing: TRL runs every row's prompt (transformers generate, and its scoring and update forwards); seed "
    "computes a group's prompt once where the workload's seed_rl / seed_generation set share_prefix",
    "optimizer: TRL adamw_torch_fused with a constant schedule; seed the workload's seed_rl optim (rl.optim, "
    "default adamw_torch) from its rl stage's builder, host memory released before the step; weight decay 0 both",
    "advantage eps: TRL std + 1e-4, seed std + 1e-6; seed's PPO loss also has the dual clip c = 3 (inactive "
    "at ratio 1)",
    "iteration wall: TRL = trainer.train() (includes Trainer's loop setup: dataloader, optimizer, callbacks); "
    "seed = generate + reward + rl_update (model and optimizer built before); process wall includes imports "
    "and model loading for both",
    "TRL runs from an interpreter that adds trl + datasets to the same site-packages (same torch, "
    "transformers and accelerate versions)",
]


def _max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


WALK = ("left", "right", "up", "down")
"""The moves that lengthen a prompt to ``--prompt-tokens``: each step adds its observation and action to the history."""


def workload_prompts(w: dict[str, Any]) -> tuple[list[str], Callable[[int, str], float]]:
    """The prompt texts and ``reward(prompt_index, completion_text)`` (step reward - penalty if invalid).

    ``w["prompt_tokens"]`` = 0: each task's first-step prompt. N > 0: each task walked with ``WALK``'s moves and
    the environment's own multi-turn prompt (history of every earlier step) until its chat-templated prompt has at
    least N tokens (or the episode ends); the reward replays those moves before scoring the completion."""
    from seed_core.config import EnvConfig
    from seed_core.envs import make_env
    from seed_core.types import HistoryItem

    target = w.get("prompt_tokens", 0)
    env_cfg = EnvConfig(name="sokoban", max_steps=4) if not target else \
        EnvConfig(name="sokoban", max_steps=200, history_length=200)
    env = make_env(env_cfg)
    tasks = env.make_tasks("train", w["prompts"], seed=w["seed"])
    count = _token_counter(w["model"]) if target else None
    prompts, walks = [], []
    for task in tasks:
        obs, history, moves = env.reset(task), [], []
        prompt = env.build_prompt(obs, history, 0)
        while count is not None and count(prompt) < target:
            move = WALK[len(moves) % len(WALK)]
            result = env.step(move)
            if result.done:
                break
            history.append(HistoryItem(len(moves), obs, move))
            moves.append(move)
            obs = result.observation
            prompt = env.build_prompt(obs, history, len(moves))
        prompts.append(prompt)
        walks.append(moves)

    def reward(i: int, text: str) -> float:
        game = make_env(env_cfg)
        game.reset(tasks[i])
        for move in walks[i]:
            game.step(move)
        parsed = game.parse_action(text)
        return float(game.step(parsed.action).reward) - (0.0 if parsed.valid else PENALTY)

    return prompts, reward


def _token_counter(model: str) -> Callable[[str], int]:
    """Tokens of a user message under ``model``'s chat template (what both trainers feed the model)."""
    from transformers import AutoTokenizer

    from seed_core.modeling.models import encode_prompt

    tok = AutoTokenizer.from_pretrained(model)
    return lambda text: len(encode_prompt(tok, text))


def run_seed(w: dict[str, Any]) -> dict[str, Any]:
    import torch

    from seed_core.algorithms import ALGORITHMS
    from seed_core.config import GenerationConfig, ModelConfig, RLConfig
    from seed_core.modeling.models import load_policy
    from seed_core.rollout.backends import HFBackend
    from seed_core.trainer.optim import build_optimizer
    from seed_core.trainer.rl_step import RLSamples, rl_update

    torch.set_num_threads(w["threads"])
    torch.manual_seed(w["seed"])
    t0 = time.perf_counter()
    model_cfg = ModelConfig(path=w["model"], device="cpu", gradient_checkpointing=w["seed_grad_ckpt"])
    policy = load_policy(model_cfg)
    ref = load_policy(model_cfg, trainable=False).model if w["beta"] > 0 else None
    n = w["prompts"] * w["group"]
    cfg = RLConfig(algorithm="grpo", advantage="grpo", policy_loss="ppo_clip", kl_coef=w["beta"],
                   entropy_coef=0.0, lr=w["lr"], weight_decay=0.0, grad_clip=1.0, mini_batch_size=n,
                   ppo_epochs=1, **w["seed_rl"])
    optimizer = build_optimizer(policy.model.parameters(), cfg)  # seed's rl stage's builder (rl.optim)
    backend = HFBackend(policy, GenerationConfig(batch_size=n, max_prompt_tokens=4096, top_p=1.0, top_k=0,
                                                 **w.get("seed_generation", {})))
    prompts, reward = workload_prompts(w)
    rss = {"load": _max_rss_mb()}
    setup_s = time.perf_counter() - t0

    t_iter = time.perf_counter()
    rows = [i for i in range(len(prompts)) for _ in range(w["group"])]
    completions = backend.generate([prompts[i] for i in rows], temperature=1.0,
                                   max_new_tokens=w["max_new_tokens"], seed=w["seed"])
    rollout_s = time.perf_counter() - t_iter
    rss["rollout"] = _max_rss_mb()
    t1 = time.perf_counter()
    scores = torch.tensor([reward(i, c.text) for i, c in zip(rows, completions)])
    samples = RLSamples(prompt_ids=[backend.encode(prompts[i]) for i in rows],
                        response_ids=[c.token_ids for c in completions], teacher_prompt_ids=[None] * n,
                        group_ids=[str(i) for i in rows], scores=scores)
    del completions
    reward_s = time.perf_counter() - t1
    metrics = rl_update(policy.model, optimizer, samples, cfg=cfg, algorithm=ALGORITHMS.get("grpo"),
                        pad_id=policy.tokenizer.pad_token_id, ref_model=ref, seed=w["seed"])
    iteration_s = time.perf_counter() - t_iter
    rss["update"] = _max_rss_mb()
    return {
        "setup_s": setup_s, "iteration_s": iteration_s, "rss_high_water_mb_after": rss,
        "phases_s": {"rollout": rollout_s, "reward": reward_s, "scoring_passes": metrics["time/logprob_passes_s"],
                     "update": metrics["time/update_s"]},
        "completion_tokens": sum(len(r) for r in samples.response_ids),
        "prompt_tokens": sum(len(p) for p in samples.prompt_ids),
        "loss": metrics["rl/total_loss"], "kl": metrics.get("rl/kl_loss", 0.0),
    }


def run_trl(w: dict[str, Any]) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(w["threads"])
    prompts, reward = workload_prompts(w)
    timers: dict[str, float] = {"rollout": 0.0, "reward": 0.0, "generate_and_score": 0.0}
    rss: dict[str, float] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timers[name] += time.perf_counter() - t
                rss[name] = _max_rss_mb()
        return wrapper

    def sokoban_reward(completions: list[Any], prompt_index: list[int], **_: Any) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [reward(i, t) for i, t in zip(prompt_index, texts)]

    n = w["prompts"] * w["group"]
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": p}], "prompt_index": i}
                              for i, p in enumerate(prompts)])
    args = GRPOConfig(
        output_dir=str(Path(w["scratch"]) / "trl"), use_cpu=True, bf16=False, seed=w["seed"], max_steps=1,
        per_device_train_batch_size=n, num_generations=w["group"], max_completion_length=w["max_new_tokens"],
        temperature=1.0, top_p=1.0, beta=w["beta"], learning_rate=w["lr"], lr_scheduler_type="constant",
        weight_decay=0.0, max_grad_norm=1.0, loss_type="dapo", scale_rewards="group", epsilon=0.2,
        report_to=[], save_strategy="no", logging_steps=1, dataloader_num_workers=0, **w["trl_args"])
    t0 = time.perf_counter()
    trainer = GRPOTrainer(model=w["model"], reward_funcs=sokoban_reward, args=args, train_dataset=data)
    trainer._generate = timed("rollout", trainer._generate)
    trainer._calculate_rewards = timed("reward", trainer._calculate_rewards)
    trainer._generate_and_score_completions = timed("generate_and_score", trainer._generate_and_score_completions)
    rss["load"] = _max_rss_mb()
    setup_s = time.perf_counter() - t0
    t_iter = time.perf_counter()
    out = trainer.train()
    iteration_s = time.perf_counter() - t_iter
    rss["update"] = _max_rss_mb()
    return {
        "setup_s": setup_s, "iteration_s": iteration_s, "rss_high_water_mb_after": rss,
        "phases_s": {"rollout": timers["rollout"], "reward": timers["reward"],
                     "scoring_passes": timers["generate_and_score"] - timers["rollout"] - timers["reward"],
                     "update": iteration_s - timers["generate_and_score"]},
        "loss": float(out.training_loss),
        "gradient_checkpointing": bool(args.gradient_checkpointing),
    }


WORKERS = {"seed": run_seed, "trl": run_trl}


def _start(python: str, impl: str, w: dict[str, Any], tmp: Path, rep: int) -> tuple[subprocess.Popen, Path, float]:
    out = tmp / f"{impl}-{rep}.json"
    cmd = [python, str(Path(__file__).resolve()), "--worker", impl, "--workload", json.dumps(w), "--result", str(out)]
    proc = subprocess.Popen(cmd, env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    return proc, out, time.perf_counter()


def _run_together(started: dict[str, tuple[subprocess.Popen, Path, float]]) -> dict[str, dict[str, Any]]:
    """Wait for the worker processes; wall, CPU time and peak RSS of each process alone (``os.wait4``)."""
    by_pid = {proc.pid: impl for impl, (proc, _, _) in started.items()}
    results: dict[str, dict[str, Any]] = {}
    while by_pid:
        pid, status, usage = os.wait4(-1, 0)
        if pid not in by_pid:
            continue
        impl = by_pid.pop(pid)
        proc, out, t0 = started[impl]
        wall = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{impl} worker failed with status {status}: {' '.join(map(str, proc.args))}")
        proc.returncode = os.waitstatus_to_exitcode(status)
        result = json.loads(out.read_text())
        result.update(process_wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime,
                      peak_rss_mb=usage.ru_maxrss / 1024)
        results[impl] = result
    return results


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _summary(rs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "iteration_wall_s": _stats([r["iteration_s"] for r in rs]),
        "process_wall_s": _stats([r["process_wall_s"] for r in rs]),
        "cpu_s": _stats([r["cpu_s"] for r in rs]),
        "peak_rss_mb": _stats([r["peak_rss_mb"] for r in rs]),
        "phases_s_median": {k: statistics.median(r["phases_s"][k] for r in rs) for k in rs[0]["phases_s"]},
        "runs": rs,
    }


def _report(workload: dict[str, Any], runs: dict[str, list[dict[str, Any]]], schedule: str) -> dict[str, Any]:
    """The JSON: per-trainer min/median/max and runs; ratios seed / TRL of the medians when both ran."""
    result: dict[str, Any] = {"workload": workload, "differences": DIFFERENCES, "loadavg_at_report": os.getloadavg(),
                              "repeats": min(len(rs) for rs in runs.values()), "schedule": schedule,
                              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                                                       capture_output=True).stdout.strip()}
    result.update({impl: _summary(rs) for impl, rs in runs.items()})
    if set(runs) == {"seed", "trl"}:
        for key, name in (("iteration_wall_s", "wall_ratio"), ("peak_rss_mb", "memory_ratio"),
                          ("process_wall_s", "process_wall_ratio"), ("cpu_s", "cpu_ratio")):
            result[name] = result["seed"][key]["median"] / result["trl"][key]["median"]
    return result


def _combine(paths: list[str]) -> dict[str, Any]:
    """One report from the runs of several invocations on the same workload (e.g. repetitions run apart)."""
    parts = [json.loads(Path(p).read_text()) for p in paths]
    if any(part["workload"] != parts[0]["workload"] for part in parts):
        raise SystemExit(f"--combine: the workloads of {paths} differ; only runs of the same workload combine")
    runs = {impl: [r for part in parts for r in part[impl]["runs"]] for impl in ("seed", "trl") if impl in parts[0]}
    schedules = sorted({part["schedule"] for part in parts})
    return _report(parts[0]["workload"], runs, f"{len(parts)} invocations combined: " + "; ".join(schedules))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(ROOT / "models" / "smollm2-135m-instruct"))
    parser.add_argument("--prompts", type=int, default=1)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--beta", type=float, default=0.01)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seed-grad-ckpt", action="store_true", help="gradient checkpointing on the seed side")
    parser.add_argument("--seed-rl", default="{}", help="JSON overrides of seed's RLConfig (micro-batching)")
    parser.add_argument("--seed-generation", default="{}",
                        help="JSON overrides of seed's GenerationConfig (share_prefix)")
    parser.add_argument("--prompt-tokens", type=int, default=0,
                        help="lengthen each prompt with its episode's history to at least this many tokens (0: "
                             "first-step prompts, ~455 tokens)")
    parser.add_argument("--trl-args", default="{}", help="JSON overrides of TRL's GRPOConfig")
    parser.add_argument("--only", choices=sorted(WORKERS), default=None, help="run one side only")
    parser.add_argument("--trl-python", default=sys.executable)
    parser.add_argument("--concurrent", action="store_true",
                        help="run a repetition's seed and TRL workers at the same time (a shared, loaded machine)")
    parser.add_argument("--out", default=None, help="also write the JSON here (benchmarks/results/peer_trl.json)")
    parser.add_argument("--combine", nargs="+", metavar="JSON",
                        help="write one report from earlier result files of the same workload (runs nothing)")
    parser.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--workload", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        result = WORKERS[args.worker](json.loads(args.workload))
        Path(args.result).write_text(json.dumps(result))
        return
    if args.combine:
        text = json.dumps(_combine(args.combine), indent=2)
        if args.out:
            Path(args.out).write_text(text + "\n")
        print(text)
        return

    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="seed-peer-"))
    w = {"model": str(Path(args.model).resolve()), "prompts": args.prompts, "group": args.group,
         "max_new_tokens": args.max_new_tokens, "beta": args.beta, "lr": args.lr, "threads": args.threads,
         "seed": args.seed, "seed_grad_ckpt": args.seed_grad_ckpt, "seed_rl": json.loads(args.seed_rl),
         "seed_generation": json.loads(args.seed_generation), "prompt_tokens": args.prompt_tokens,
         "trl_args": json.loads(args.trl_args), "scratch": str(tmp)}
    from seed_core.config import RLConfig  # seed's micro-batching as run: the overrides, else the schema defaults

    w["seed_micro_batching"] = {k: w["seed_rl"].get(k, getattr(RLConfig(), k))
                                for k in ("micro_batch_size", "micro_batch_tokens", "optim")}
    impls = [args.only] if args.only else ["seed", "trl"]
    runs: dict[str, list[dict[str, Any]]] = {impl: [] for impl in impls}
    schedule = "seed and TRL workers of a repetition run at the same time (same machine load)" \
        if args.concurrent else "one worker at a time, seed and TRL interleaved"
    result: dict[str, Any] = {}
    for rep in range(args.repeats):
        order = impls if rep % 2 == 0 else impls[::-1]  # alternate which one goes (or starts) first
        batches = [order] if args.concurrent else [[impl] for impl in order]
        for batch in batches:
            started = {impl: _start(args.trl_python if impl == "trl" else sys.executable, impl, w, tmp, rep)
                       for impl in batch}
            for impl, r in _run_together(started).items():
                runs[impl].append(r)
                print(f"{impl} rep {rep}: iteration {r['iteration_s']:.1f}s, process {r['process_wall_s']:.1f}s, "
                      f"cpu {r['cpu_s']:.1f}s, peak {r['peak_rss_mb']:.0f} MB", file=sys.stderr, flush=True)
        result = _report({k: v for k, v in w.items() if k != "scratch"}, runs, schedule)
        if args.out:  # after every repetition, so an interrupted run keeps what it measured
            Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
