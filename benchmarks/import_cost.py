"""What importing a module costs in a fresh interpreter: the measured reason an import stays inside a function.

    python benchmarks/import_cost.py [--repeats 5] [--out benchmarks/results/import_cost.json]

Each module is imported ``--repeats`` times, each time in a new ``python -c "import <module>"`` process, one torch
thread; the JSON holds every wall time, their median, and the load average before and after. The rows:

- ``seed_app.cli``: what ``seed --help`` imports; its commands import what they run inside the command.
- ``seed_core.modeling.testbed``: what ``seed_app.cli_doctor`` would load at the top if ``seed_core.repro.golden_build``
  imported its modules at its top (it pulls torch and transformers).
- ``flows.common``: a stage flow's glue, with the Prefect client imported at its top.
- ``python`` (``import sys``): the interpreter's own start, to subtract.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULES = ("sys", "seed_app.cli", "seed_core.modeling.testbed", "flows.common")


def measure(module: str, repeats: int) -> list[float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, env=env, check=True)
        times.append(round(time.perf_counter() - start, 3))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "import_cost.json")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    before = os.getloadavg()
    rows = {m: measure(m, args.repeats) for m in MODULES}
    report = {"commit": commit, "repeats": args.repeats, "load_average_before": [round(x, 2) for x in before],
              "load_average_after": [round(x, 2) for x in os.getloadavg()],
              "seconds": rows, "median_s": {m: statistics.median(t) for m, t in rows.items()}}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["median_s"], indent=2))


if __name__ == "__main__":
    main()
