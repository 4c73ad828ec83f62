"""The positive-control gate of the registered mechanism study (``benchmarks/mechanism_plan.yaml``), on its tuning seeds.

    python benchmarks/positive_control_gate.py --lab <clone> --revision as_registered [--out ...mechanism_gate.json]

The plan's rule, judged before any study seed runs and never by SEED's rows: on the tuning seeds, OPSD with oracle
skills minus SFT (held-out success, points) must have a mean of at least +10 with at least 3 of 4 seeds improving
(``GATE_MEAN``, ``GATE_WINS``), and held-out format-valid must be at least 0.9 for GRPO and GRPO from SFT on every
tuning seed (``FORMAT_VALID``). The first revision in the plan's order that passes is the lab; when none does, the
study is not run. ``<clone>`` is the lab clone whose ``sweep/cells`` hold the tuning cells (``python -m flows.sweep
--seed S`` with the revision's overrides) and whose ``data/sweep/seed_<s>/eval/<method>/episodes.parquet`` hold the
held-out episodes. Each run adds or replaces its revision in the output's ``revisions``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GATE_MEAN, GATE_WINS, FORMAT_VALID = 10.0, 3, 0.9
GATE_METHODS = ["sft", "grpo", "seed_no_opd", "opsd_oracle"]


def tuning_cells(lab: Path, seeds: list[int]) -> dict[int, dict[str, Any]]:
    """The gate's cell of each tuning seed (its method list is ``GATE_METHODS``; the newest file if several)."""
    out: dict[int, dict[str, Any]] = {}
    for seed in seeds:
        files = sorted((lab / "sweep" / "cells").glob(f"seed_{seed}-*.json"), key=lambda p: p.stat().st_mtime)
        cells = [json.loads(p.read_text()) for p in files]
        cells = [c for c in cells if c["methods"] == GATE_METHODS]
        if cells:
            out[seed] = cells[-1]
    return out


def format_valid(lab: Path, seed: int, method: str) -> float:
    """Held-out format-valid rate of ``method`` on tuning seed ``seed`` (mean over its evaluation episodes)."""
    return float(pd.read_parquet(lab / "data" / "sweep" / f"seed_{seed}" / "eval" / method /
                                 "episodes.parquet")["format_valid_rate"].mean())


def judge(lab: Path, seeds: list[int]) -> dict[str, Any]:
    """The gate's numbers and verdict on the cells found (module docstring)."""
    from seed_core.stats import paired_test

    cells = tuning_cells(lab, seeds)
    if sorted(cells) != sorted(seeds):
        missing = sorted(set(seeds) - set(cells))
        return {"verdict": "incomplete", "missing_seeds": missing}
    opsd = [100.0 * cells[s]["success"]["opsd_oracle"] for s in seeds]
    sft = [100.0 * cells[s]["success"]["sft"] for s in seeds]
    diffs = [a - b for a, b in zip(opsd, sft)]
    valid = {m: [format_valid(lab, s, m) for s in seeds] for m in ("grpo", "seed_no_opd")}
    test = paired_test(opsd, sft)
    passed = (sum(diffs) / len(diffs) >= GATE_MEAN and test["paired_wins"][0] >= GATE_WINS
              and all(v >= FORMAT_VALID for vs in valid.values() for v in vs))
    return {"seeds": seeds, "opsd_oracle": opsd, "sft": sft, "diff": diffs, "mean_diff": sum(diffs) / len(diffs),
            **test, "heldout_format_valid": valid, "cell_keys": {s: cells[s]["config_hash"] for s in seeds},
            "cell_wall_s": {s: cells[s]["wall_s"] for s in seeds},
            "rule": f"mean opsd_oracle - sft >= {GATE_MEAN} points, >= {GATE_WINS} seeds improving, held-out "
                    f"format-valid >= {FORMAT_VALID} for grpo and seed_no_opd",
            "verdict": "passes" if passed else "fails"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", type=Path, required=True)
    parser.add_argument("--revision", required=True, help="a name of the plan's positive_control.revisions_in_order")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "mechanism_gate.json")
    args = parser.parse_args()
    plan = yaml.safe_load((ROOT / "benchmarks" / "mechanism_plan.yaml").read_text())
    names = [r["name"] for r in plan["positive_control"]["revisions_in_order"]]
    if args.revision not in names:
        raise SystemExit(f"--revision {args.revision!r}: the plan's revisions are {', '.join(names)}")
    result = judge(args.lab, plan["seeds"]["tuning"])
    lock = yaml.safe_load((args.lab / "dvc.lock").read_text())
    base = next(o["md5"] for o in lock["stages"]["prepare_model"]["outs"] if o["path"] == "data/models/base")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=args.lab, capture_output=True, text=True).stdout.strip()
    out = json.loads(args.out.read_text()) if args.out.is_file() else {"plan": "benchmarks/mechanism_plan.yaml"}
    out.setdefault("revisions", {})[args.revision] = {
        **result, "overrides": dict(plan["positive_control"]["revisions_in_order"][names.index(args.revision)]
                                    ["overrides"]),
        "base_model_md5": base, "lab_commit": commit, "loadavg_at_write": os.getloadavg()}
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"{args.revision}: {result['verdict']}" + (f" (mean {result['mean_diff']:+.1f} points, wins "
                                                    f"{result['paired_wins']})" if "mean_diff" in result else ""))


if __name__ == "__main__":
    main()
