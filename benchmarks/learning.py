"""Learning over seeds: run `seed sweep` and record its statistics with the wall time and the machine.

    python benchmarks/learning.py [--project DIR] [--seeds 5] [--methods LIST] [--out benchmarks/results/learning.json]

Runs ``python -m seed_app.cli sweep --seeds N [--methods LIST]`` in ``--project`` (a checkout; default this one),
which is the DVC sweep (``sweep/dvc.yaml``: one cell per seed, then the report), and copies its ``learning.json``
with ``wall_s`` (the whole command, including a ``prepare_model`` that was not cached yet), ``machine``, ``command``,
``commit`` (the project's ``git describe``) and ``from`` (each method's starting checkpoint, the report's column:
``Method.start``) added. Shape: ``{"setting", "wall_s", "methods": {m: {per_seed, mean, ci95, iqm, n}}, "comparisons":
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
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=ROOT)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--methods", default=None, help="comma-separated methods (default: the params' sweep.methods)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "learning.json")
    args = parser.parse_args()
    command = ["sweep", "--seeds", str(args.seeds), *(["--methods", args.methods] if args.methods else [])]
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "seed_app.cli", *command], cwd=args.project, check=True)
    wall = time.perf_counter() - start
    summary = json.loads((args.project / "reports" / "sweep" / "learning.json").read_text())
    from seed_core.methods import METHODS
    from seed_core.repro.numerics import cpu

    machine = {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
               "cpu_model": cpu()["cpu_model"], "load_avg_after": os.getloadavg()}
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=args.project, capture_output=True,
                            text=True, check=False).stdout.strip()
    starts = {m: METHODS.get(m).start for m in summary["methods"] if m in METHODS}
    out = {"setting": summary.pop("setting"), "wall_s": wall, "machine": machine,
           "command": "seed " + " ".join(command), "commit": commit, "from": starts, **summary}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out} ({wall:.0f} s)")


if __name__ == "__main__":
    main()
