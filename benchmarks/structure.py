"""Structure figures that a restructuring must not make worse: import time per stage process, lines of code,
files per stage code fingerprint.

    python benchmarks/structure.py [--repeats 5] [--root CHECKOUT] [--out benchmarks/results/structure.json]

* **Import time per stage process**: the wall time of a fresh ``python -c "import M"`` for each module that
  a DVC stage runs (``flows.<stage>``) and for the engine's stage modules, and of each with the config loaded
  after it (``M + load_config``: what a stage process does before its work), median (and min/max) of
  ``--repeats`` interleaved runs. Interpreter start-up alone (``python -c pass``) and ``load_config`` alone are
  reported beside them, with the seed_core modules each loads and whether it loads torch.
* **Lines of non-test Python** in ``seed_core/``, ``tasks/``, ``flows/``, ``seed_app/`` (blank lines in: ``wc -l``).
* **Files per stage code fingerprint**: the lines of each ``data/code/<stage>.sha256`` (``rl@<algorithm>``: one
  per algorithm where the checkout writes them) that the code stage's command writes for params.yaml.

``--root``: the checkout to measure (default this one), e.g. a ``git worktree`` of an older commit for a
before/after pair; its own ``scripts/dvc_deps.py`` writes its fingerprints. The load average is recorded.

The duplicate finder's pair count comes from the library's ``duplicates`` command and is noted by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
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


LOAD_CONFIG = "from seed_core.loader import load_config; load_config('params.yaml')"
CONFIGURED = " + load_config"
"""Suffix of a row that imports the module and then loads params.yaml (the config check included)."""


def code_of(row: str) -> str:
    """The ``python -c`` text of a row: ``-`` (start-up), ``load_config``, ``M`` or ``M + load_config``."""
    if row == "-":
        return "pass"
    if row == "load_config":
        return LOAD_CONFIG
    module = row.removesuffix(CONFIGURED)
    return f"import {module}" + (f"; {LOAD_CONFIG}" if row.endswith(CONFIGURED) else "")


def time_import(row: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code_of(row)], cwd=ROOT, check=True)
    return time.perf_counter() - t0


def loaded(row: str) -> dict[str, object]:
    """The seed_core modules ``row`` leaves in ``sys.modules``, and whether torch is among its imports."""
    code = (code_of(row) + "\nimport sys\n"
            "print(sum(m.split('.')[0] == 'seed_core' for m in sys.modules), 'torch' in sys.modules)")
    count, torch = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True,
                                  text=True).stdout.split()
    return {"seed_core_modules": int(count), "torch": torch == "True"}


def fingerprint_files() -> dict[str, int]:
    """Lines of each fingerprint the code stage's command writes for this checkout's params.yaml."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "scripts/dvc_deps.py", "--fingerprints", out], cwd=ROOT, check=True)
        files = sorted((Path(out) / "code").rglob("*.sha256"))
        return {f.relative_to(Path(out) / "code").with_suffix("").as_posix().replace("/", "@"):
                len(f.read_text().splitlines()) for f in files}


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
    parser.add_argument("--root", type=Path, default=None, help="the checkout to measure (default: this one)")
    args = parser.parse_args()
    if args.root is not None:
        global ROOT
        ROOT = args.root.resolve()

    stage_modules = [f"flows.{s}" for s in FLOW_STAGES] + engine_modules()
    modules = ["-", "load_config", *stage_modules, *(m + CONFIGURED for m in stage_modules)]
    load_before = os.getloadavg()
    samples: dict[str, list[float]] = {m: [] for m in modules}
    for _ in range(args.repeats):
        for module in modules:  # interleaved, so machine load affects every module alike
            samples[module].append(time_import(module))
    imports = {("python -c pass" if m == "-" else m): {"median_s": round(statistics.median(v), 3),
                                                       "min_s": round(min(v), 3), "max_s": round(max(v), 3)}
               for m, v in samples.items()}
    for row in modules[1:]:
        imports[row] |= loaded(row)
    result = {"import_time": imports, "lines_of_code": lines_of_code(), "fingerprint_files": fingerprint_files(),
              "load_average": {"before": load_before, "after": os.getloadavg()}, "repeats": args.repeats,
              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                       text=True).stdout.strip()}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
