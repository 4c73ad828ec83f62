"""Cost of one GRPO vs one SEED iteration on the same model, batch and seeds, split by phase.

    python benchmarks/iteration_cost.py [--model tiny|PATH] [--env sokoban] [--repeats 2] [--out FILE.json]
        [--algorithms grpo,seed[,opid]] [--tasks 2] [--group 4] [--max-steps 4]

Phases: rollout, analysis (SEED's self-analysis), log-prob passes (old [+ teacher] [+ ref]) and the
PPO update. A model that has not learned the analyzer format (SmolLM2 before Stage 1) never parses its own
analysis, so SEED's teacher pass does not run on it; ``--algorithms grpo,seed,opid`` adds OPID, whose oracle
skills make the teacher pass and distillation run on every sample, and an estimate of a SEED round with a
working analyzer (OPID's round without its analysis, plus SEED's analysis). Both algorithms run interleaved (grpo, seed, grpo, seed, ...) so machine load affects them
alike; the JSON reports per-phase medians and the SEED/GRPO ratio of the total.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from seed_core.loader import with_overrides

PHASES = ("time/rollout_s", "time/analysis_s", "time/logprob_passes_s", "time/update_s", "time/round_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="tiny",
                        help="'tiny' (a tiny model warmed up on the analyzer format, so self-analysis parses and the "
                             "teacher pass covers the batch) or an HF model directory")
    parser.add_argument("--env", default="sokoban")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=2, help="tasks per round")
    parser.add_argument("--group", type=int, default=4, help="GRPO group size")
    parser.add_argument("--max-steps", type=int, default=4, help="environment steps per episode")
    parser.add_argument("--algorithms", default="grpo,seed",
                        help="comma-separated, grpo first; e.g. grpo,seed,opid: OPID has SEED's teacher pass and "
                             "distillation with skills from the offline oracle, so it runs them on any model")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import torch

    from seed_core.config import SeedConfig
    from seed_core.stages.rl import run_rl_round
    from seed_core.model_builders import build_tiny_analyzer_model

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="seed-bench-"))
    model = build_tiny_analyzer_model(tmp / "tiny") if args.model == "tiny" else Path(args.model)
    base = with_overrides(SeedConfig(), {
        "model.path": str(model), "model.device": "cpu", "env.name": args.env, "env.max_steps": args.max_steps,
        "rl.tasks_per_round": args.tasks, "rl.group_size": args.group, "rl.mini_batch_size": 64,
        "rl.micro_batch_size": 8,
        "generation.max_new_tokens": 32, "rl.analyzer_max_new_tokens": 16, "generation.max_prompt_tokens": 256,
    })
    runs: dict[str, list[dict[str, float]]] = {a: [] for a in args.algorithms.split(",")}
    if next(iter(runs)) != "grpo" or "seed" not in runs:
        raise SystemExit("iteration_cost: --algorithms must start with grpo and include seed")
    for r in range(args.repeats):
        for algo in runs:
            cfg = with_overrides(base, {"rl.algorithm": algo})
            t0 = time.perf_counter()
            metrics = run_rl_round(cfg, 0, model, tmp / f"{algo}-{r}")
            metrics["time/wall_s"] = time.perf_counter() - t0
            runs[algo].append(metrics)
            print(f"{algo} repeat {r}: round {metrics['time/round_s']:.2f}s", file=sys.stderr)

    def med(algo: str, key: str) -> float:
        return statistics.median(m.get(key, 0.0) for m in runs[algo])

    result = {
        "model": str(model), "env": args.env, "repeats": args.repeats, "threads": args.threads,
        "batch": {"tasks": args.tasks, "group_size": args.group, "max_steps": args.max_steps, "max_new_tokens": 32,
                  "analyzer_max_new_tokens": 16, "max_prompt_tokens": 256,
                  "micro_batch_tokens": base.rl.micro_batch_tokens},
        "samples": {a: med(a, "rl/samples") for a in runs},
        "seed_teacher_sample_ratio": med("seed", "rl/teacher_sample_ratio"),
        "seed_parse_ok_rate": med("seed", "analysis/parse_ok_rate"),
        "phases_s": {a: {k.removeprefix("time/"): med(a, k) for k in PHASES} for a in runs},
        "seed_over_grpo": med("seed", "time/round_s") / max(med("grpo", "time/round_s"), 1e-9),
        "seed_over_grpo_excluding_analysis": (med("seed", "time/round_s") - med("seed", "time/analysis_s"))
        / max(med("grpo", "time/round_s"), 1e-9),
        **{f"{a}_over_grpo": med(a, "time/round_s") / max(med("grpo", "time/round_s"), 1e-9)
           for a in runs if a not in ("grpo", "seed")},
        **{f"{a}_teacher_sample_ratio": med(a, "rl/teacher_sample_ratio") for a in runs if a not in ("grpo", "seed")},
    }
    if "opid" in runs:  # SEED with a working analyzer = OPID's round (teacher pass + distillation) + SEED's analysis
        result["seed_with_teacher_estimate_over_grpo"] = (med("opid", "time/round_s") - med("opid", "time/analysis_s")
                                                          + med("seed", "time/analysis_s")) / max(
            med("grpo", "time/round_s"), 1e-9)
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
