"""Structure figures that a restructuring must not make worse: import time per stage process, lines of code.

    python benchmarks/structure.py [--repeats 5] [--out benchmarks/results/structure.json]

* **Import time per stage process**: the wall time of a fresh ``python -c "import M"`` for each module that
  a DVC stage runs (``flows.<stage>``) and for the engine's stage modules, median (and min/max) of
  ``--repeats`` interleaved runs. Interpreter start-up alone (``python -c pass``) is reported beside them.
* **Lines of non-test Python** in ``seed_core/``, ``tasks/``, ``flows/``, ``seed_app/`` (blank lines in: ``wc -l``).

The duplicate finder's pair count comes from the library's ``duplicates`` command and is noted by hand.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOW_STAGES = ("prepare_model", "generate_alfworld", "collect", "annotate", "sft", "rl", "evaluate", "report")
PACKAGES = ("seed_core", "tasks", "flows", "seed_app")


def engine_modules() -> list[str]:
    """The engine module of each stage: ``seed_core.stages.<s>`` where it exists, else ``seed_core.<s>``."""
    names = []
    for stage in FLOW_STAGES:
        nested = ROOT / "seed_core" / "stages" / f"{stage}.py"
        names.append(f"seed_core.stages.{stage}" if nested.exists() else f"seed_core.{stage}")
    return names


def time_import(module: str) -> float:
    code = "pass" if module == "-" else f"import {module}"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    return time.perf_counter() - t0


def lines_of_code() -> dict[str, int]:
    counts = {}
    for pkg in PACKAGES:
        counts[pkg] = sum(len(p.read_text().splitlines()) for p in (ROOT / pkg).rglob("*.py"))
    counts["total"] = sum(counts.values())
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    modules = ["-"] + [f"flows.{s}" for s in FLOW_STAGES] + engine_modules()
    samples: dict[str, list[float]] = {m: [] for m in modules}
    for _ in range(args.repeats):
        for module in modules:  # interleaved, so machine load affects every module alike
            samples[module].append(time_import(module))
    imports = {("python -c pass" if m == "-" else m): {"median_s": round(statistics.median(v), 3),
                                                       "min_s": round(min(v), 3), "max_s": round(max(v), 3)}
               for m, v in samples.items()}
    result = {"import_time": imports, "lines_of_code": lines_of_code(), "repeats": args.repeats,
              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                       text=True).stdout.strip()}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
