"""Does the length-sorted analysis keep the results? Every round of RL runs with and without it, hashed.

    python benchmarks/sorted_analysis_identity.py --base DIR --sft DIR [--cell ALGORITHM:SEED ...]
        [--rounds N] [--threads 1] [--workspace DIR] [--out benchmarks/results/sorted_analysis_identity.json]

``BackendClient(sort_by_length=True)`` (the default) batches the greedy analysis prompts by length instead of in
request order, so each prompt is padded to another width. On CPU fp32 that moves logits by ~1e-5
(docs/experiments.md "Why no exact change meets the targets"); the results stay the same only while no greedy
near-tie flips. This runs each cell (an algorithm that analyzes its own trajectories, and ``project.seed``) twice
with ``run_rl`` from its registry start (``--base`` or ``--sft``): in request order, then sorted, and compares
round by round the hashes of ``iteration_cost.round_hashes`` (metrics less time keys, weights, annotations less
``latency_s``, trajectories). ``identical`` per cell and overall. One run answers for its cells, not for others.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from iteration_cost import ROOT, round_hashes, sorted_analysis  # noqa: E402

DEFAULT_CELLS = ("seed:1", "seed:2", "seed:3", "seed:4")
"""SEED on the reference sweep's other seeds. Seed 0 of seed, seed_static and seed_no_sft is checked by a whole
default run against the committed dvc.lock, and grpo and seed on seed 0 by iteration_cost_sorted_analysis.json."""


def run_cell(cfg: Any, start: Path, out: Path, sort: bool) -> list[dict[str, str]]:
    """All rounds of one RL run, sorted analysis on or off; each round's hashes."""
    from seed_core.stages.rl import round_dir, run_rl

    with sorted_analysis(sort):
        run_rl(cfg, start, out)
    return [round_hashes(round_dir(out, i)) for i in range(cfg.rl.rounds)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="params.yaml")
    parser.add_argument("--base", type=Path, required=True, help="the base model (starts seed_no_sft, grpo)")
    parser.add_argument("--sft", type=Path, required=True, help="the Stage-1 checkpoint (starts seed, ...)")
    parser.add_argument("--cell", action="append", default=None, metavar="ALGORITHM:SEED",
                        help=f"default: {' '.join(DEFAULT_CELLS)}")
    parser.add_argument("--rounds", type=int, default=None, help="default: the config's rl.rounds")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--workspace", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sorted_analysis_identity.json")
    args = parser.parse_args()

    import seed_core.stages  # noqa: F401  (the stage numerics, before torch loads)
    import torch

    from seed_core.algorithms import ALGORITHMS
    from seed_core.loader import load_config, with_overrides
    from seed_core.repro.numerics import cpu
    from seed_core.tracking import git_commit

    if args.threads:
        torch.set_num_threads(args.threads)
    ws = args.workspace or Path(tempfile.mkdtemp(prefix="seed-sorted-identity-"))
    base_cfg = load_config(ROOT / args.config)
    starts = {"base": args.base, "sft": args.sft}
    out: dict[str, Any] = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "commit": git_commit(ROOT)[:7],
        "method": "round by round, iteration_cost.round_hashes of the request-order run against the sorted run",
        "identical": True, "cells": [], "cells_asked": list(args.cell or DEFAULT_CELLS),
        "machine": {"cpus": os.cpu_count(), "cpu_model": cpu()["cpu_model"], "torch_threads": torch.get_num_threads(),
                    "loadavg_start": os.getloadavg()}}
    t_all = time.perf_counter()
    for cell in out["cells_asked"]:
        algorithm, _, seed = cell.partition(":")
        overrides: dict[str, Any] = {"rl.algorithm": algorithm, "project.seed": int(seed or 0)}
        if args.rounds:
            overrides["rl.rounds"] = args.rounds
        cfg = with_overrides(base_cfg, overrides)
        start = starts[ALGORITHMS.get(algorithm).init]
        t0 = time.perf_counter()
        plain = run_cell(cfg, start, ws / cell.replace(":", "_") / "request_order", sort=False)
        t1 = time.perf_counter()
        ordered = run_cell(cfg, start, ws / cell.replace(":", "_") / "sorted", sort=True)
        t2 = time.perf_counter()
        mismatches = [f"round {i} {k}" for i, (a, b) in enumerate(zip(plain, ordered)) for k in a if a[k] != b.get(k)]
        out["cells"].append({"cell": cell, "start": str(start), "rounds": cfg.rl.rounds, "identical": not mismatches,
                             "mismatches": mismatches, "request_order_s": t1 - t0, "sorted_s": t2 - t1})
        out["identical"] = all(c["identical"] for c in out["cells"])
        out["wall_s"], out["machine"]["loadavg_end"] = time.perf_counter() - t_all, os.getloadavg()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2) + "\n")  # after every cell: a cut run keeps what it did
        print(f"{cell}: identical={not mismatches} {mismatches[:3]} ({t1 - t0:.0f} s, {t2 - t1:.0f} s)",
              file=sys.stderr, flush=True)
    print(json.dumps({k: out[k] for k in ("identical", "wall_s")}))


if __name__ == "__main__":
    main()
