"""Learning over seeds: run `seed sweep` and record its statistics with the wall time and the machine.

    python benchmarks/learning.py [--project DIR] [--seeds 5] [--out benchmarks/results/learning.json]

Runs ``python -m seed_app.cli sweep --seeds N`` in ``--project`` (a checkout; default this one), which is the
DVC sweep (``sweep/dvc.yaml``: one cell per seed, then the report), and copies its ``learning.json`` with
``wall_s`` (the whole command, including a ``prepare_model`` that was not cached yet) and ``machine``
added. Shape: ``{"setting", "wall_s", "methods": {m: {per_seed, mean, ci95, iqm, n}}, "comparisons":
{"grpo-sft": {mean_diff, ci95, ...}, "seed-grpo": {..., prob_improvement, prob_improvement_ci95}}, ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=ROOT)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "learning.json")
    args = parser.parse_args()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "seed_app.cli", "sweep", "--seeds", str(args.seeds)], cwd=args.project,
                   check=True)
    wall = time.perf_counter() - start
    summary = json.loads((args.project / "reports" / "sweep" / "learning.json").read_text())
    machine = {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}
    out = {"setting": summary.pop("setting"), "wall_s": wall, "machine": machine, **summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out} ({wall:.0f} s)")


if __name__ == "__main__":
    main()
