"""What the pinned CPU numerics cost on a whole default run (issue 28): two fresh clones side by side, one pinned
(``seed_core.repro.numerics.PINNED``), one under ``SEED_NUMERICS=native``, each ``seed init && seed run`` at one torch
thread, so machine load falls on both alike.

    python benchmarks/numerics_run_cost.py [--workdir /tmp/numerics-run-cost] [--out benchmarks/results/numerics_run_cost.json]
    python benchmarks/numerics_run_cost.py --summarize PINNED_CLONE NATIVE_CLONE [--out ...]   # lanes already run

Records per lane: the wall time of ``seed init`` and ``seed run``, the testbed pretraining's wall time (the one stage whose work does not depend
on the numerics: the same 2,271 examples x 5 epochs in both lanes, so its ratio is the cost of the pins), each RL
stage's summed ``time/round_s`` with its samples and seconds per sample (the lanes' policies differ, so their RL
stages do different amounts of work: compare per sample), each evaluated method's success, and whether the lane's
``reports/table.md`` equals the committed one. The lanes' clones are left in ``--workdir``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LANES = {"pinned": {}, "native": {"SEED_NUMERICS": "native"}}
PRETRAINING = re.compile(r"testbed pretraining: step (\d+)/\1 done, (\d+)m(\d+)s elapsed")
TABLE_ROW = re.compile(r"^\| (?P<method>[^|]+?) \| (?P<avg>[\d.]+) \| (?P<valid>[\d.]+) \|")


def lane_env(clone: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{clone / '.venv' / 'bin'}:{os.environ['PATH']}", "PYTHONPATH": str(clone),
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PREFECT_HOME": str(clone / ".prefect-home"),
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "DO_NOT_TRACK": "true", "MLFLOW_DISABLE_TELEMETRY": "true",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DVC_NO_ANALYTICS": "1", **extra}
    from seed_core.repro.numerics import MARKER_VAR, PINNED, SWITCH_VAR

    for name in (SWITCH_VAR, MARKER_VAR, *PINNED):  # each lane starts from the pins' own defaults
        if name not in extra:
            env.pop(name, None)
    return env


def run_lanes(workdir: Path) -> dict[str, Path]:
    """Clone this checkout twice (the .venv linked in) and run both lanes at once; returns lane -> clone."""
    workdir.mkdir(parents=True, exist_ok=True)
    procs, clones = {}, {}
    for name, extra in LANES.items():
        clone = workdir / name
        subprocess.run(["rm", "-rf", str(clone)], check=True)
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        (clone / ".venv").symlink_to(ROOT / ".venv")
        script = "s=$(date +%s); python -m seed_app.cli init > init.log 2>&1 && python -m seed_app.cli run > run.log " \
                 "2>&1; rc=$?; echo \"rc=$rc wall=$(( $(date +%s) - s ))\" > lane_done.txt"
        procs[name] = subprocess.Popen(["bash", "-c", script], cwd=clone, env=lane_env(clone, extra))
        clones[name] = clone
    for proc in procs.values():
        proc.wait()
    return clones


def summarize_lane(clone: Path) -> dict[str, Any]:
    import pandas as pd

    done = dict(kv.split("=", 1) for kv in (clone / "lane_done.txt").read_text().split()[:2])
    log = (clone / "run.log").read_text()
    minutes, seconds = PRETRAINING.findall(log)[-1][1:]
    rl = {}
    for curve in sorted((clone / "data" / "rl").glob("*/curve.csv")):
        frame = pd.read_csv(curve)
        round_s, samples = float(frame["time/round_s"].sum()), float(frame["rl/samples"].sum())
        rl[curve.parent.name] = {"round_s": round(round_s, 1), "samples": samples,
                                 "s_per_sample": round(round_s / samples, 5)}
    table = (clone / "reports" / "table.md").read_text()
    committed = subprocess.run(["git", "show", "HEAD:reports/table.md"], cwd=clone, capture_output=True,
                               text=True).stdout
    rows = {m["method"]: float(m["avg"]) for line in table.splitlines() if (m := TABLE_ROW.match(line))}
    resolved = json.loads((clone / "data" / "sft" / "resolved_config.json").read_text()).get("numerics", {})
    return {"rc": int(done["rc"]), "wall_s": int(done["wall"]), "pretraining_s": int(minutes) * 60 + int(seconds),
            "rl": rl, "success": rows, "table_equals_committed": table == committed,
            "numerics": {k: resolved.get(k) for k in ("settings", "sources", "cpu_model", "cpu_capability")}}


def summarize(clones: dict[str, Path], command: str) -> dict[str, Any]:
    lanes = {name: summarize_lane(path) for name, path in clones.items()}
    pinned, native = lanes["pinned"], lanes["native"]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clones["pinned"], capture_output=True,
                            text=True).stdout.strip()
    return {
        "command": command, "commit": commit, "threads_per_lane": 1, "lanes_side_by_side": True,
        "loadavg_at_summary": os.getloadavg(), "lanes": lanes,
        "ratios_pinned_over_native": {
            "pretraining": round(pinned["pretraining_s"] / native["pretraining_s"], 3),
            "run_wall": round(pinned["wall_s"] / native["wall_s"], 3),
            "rl_s_per_sample": {k: round(v["s_per_sample"] / native["rl"][k]["s_per_sample"], 3)
                                for k, v in pinned["rl"].items() if k in native["rl"]}},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/numerics-run-cost"))
    parser.add_argument("--summarize", nargs=2, type=Path, metavar=("PINNED_CLONE", "NATIVE_CLONE"))
    parser.add_argument("--note", default="", help="a sentence recorded with the result (e.g. what else ran)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "numerics_run_cost.json")
    args = parser.parse_args()
    start = time.time()
    clones = dict(zip(LANES, args.summarize)) if args.summarize else run_lanes(args.workdir)
    result = summarize(clones, " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]))
    result["note"] = args.note
    result["bench_wall_s"] = round(time.time() - start, 1)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["ratios_pinned_over_native"], indent=2))


if __name__ == "__main__":
    main()
