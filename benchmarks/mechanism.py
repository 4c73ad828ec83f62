"""The mechanism study (issue 25): both settings' pre-flight and the mechanism setting's sweep in one JSON.

    python benchmarks/mechanism.py --default-preflight benchmarks/results/preflight_default.json \\
        --mechanism-preflight benchmarks/results/preflight_mechanism.json \\
        --sweep <clone>/reports/sweep/learning.json [--lambda 0.01=<learning.json> --lambda 1=<learning.json>] \\
        [--out benchmarks/results/mechanism.json]

Inputs are what the project's own commands write: ``seed preflight --json`` (the ``"preflight"`` blocks) and
``seed sweep`` (``learning.json``: per method ``{per_seed, mean, ci95, iqm, n}``, per comparison the paired
difference and P(a > b), both with 95% bootstrap CIs, ``seed_core.stats``). ``--cells`` summarizes the committed cell results instead (``seed_core.sweep_committed``: a study still running,
``n`` says how many seeds), with ``seed_core.sweep.summarize_sweep``, the same function as the sweep's report.
Nothing else is recomputed here but the re-keying: ``comparisons`` carries every comparison of the sweep under its own name (``seed-grpo``) and the
issue's short names for the three findings and the control (``seed-shuffled`` = ``seed-seed_shuffled``); a
``--lambda`` sweep adds ``lambda`` = {value: {"seed": ..., "seed-grpo": ...}} (the same seeds, only
``rl.opd_coef`` changed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ALIASES = {"seed-shuffled": "seed-seed_shuffled"}
"""The issue's short names of comparisons (issue 25 "What must be true") -> the sweep's ``a-b`` names."""
PREFLIGHT_KEYS = ("perf_gap", "p_expert", "skill_correct", "grad_ratio", "zero_adv_groups", "success", "decision",
                  "thresholds", "passed", "failed", "setting")


def preflight_block(path: Path) -> dict[str, Any]:
    """The issue's ``preflight`` shape from a ``seed preflight --json`` file (``zero_adv_groups`` etc. as written)."""
    block = json.loads(Path(path).read_text())
    missing = [k for k in ("perf_gap", "p_expert", "skill_correct", "grad_ratio", "zero_adv_groups") if k not in block]
    if missing:
        raise SystemExit(f"{path}: not a `seed preflight --json` block (missing {', '.join(missing)}); rerun it")
    return {k: block[k] for k in PREFLIGHT_KEYS if k in block}


def comparisons(learning: dict[str, Any]) -> dict[str, Any]:
    out = dict(learning.get("comparisons", {}))
    for short, name in ALIASES.items():
        if name in out:
            out[short] = out[name]
    return out


def lambda_block(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        value, sep, path = item.partition("=")
        if not sep:
            raise SystemExit(f"--lambda {item!r}: expected VALUE=PATH to a learning.json")
        learning = json.loads(Path(path).read_text())
        out[value] = {"methods": learning["methods"], "comparisons": comparisons(learning),
                      "opd_coef": learning["setting"]["rl"]["opd_coef"]}
    return out


def summarize_cells(cells: Path, preset: Path) -> dict[str, Any]:
    """``learning.json`` of the committed cells under ``cells`` (one per seed, the newest file of a seed), in the
    setting of ``preset``."""
    from seed_core.loader import load_config
    from seed_core.sweep import setting_of, summarize_sweep

    newest: dict[int, dict[str, Any]] = {}
    for path in sorted(Path(cells).glob("seed_*-*.json"), key=lambda p: p.stat().st_mtime):
        result = json.loads(path.read_text())
        newest[int(result["seed"])] = result
    if not newest:
        raise SystemExit(f"{cells}: no committed cell results (seed_<s>-<key>.json); run seed sweep first")
    learning = summarize_sweep([newest[s] for s in sorted(newest)], setting_of(load_config(preset)))
    learning["setting"]["cell_keys"] = {s: newest[s]["config_hash"] for s in sorted(newest)}  # one key per seed
    return learning


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--default-preflight", type=Path, required=True)
    parser.add_argument("--mechanism-preflight", type=Path, required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--sweep", type=Path, help="learning.json of the mechanism preset's sweep")
    source.add_argument("--cells", type=Path, help="a directory of committed cell results (sweep/cells)")
    parser.add_argument("--preset", type=Path, default=ROOT / "presets" / "testbed-mechanism.yaml",
                        help="with --cells: the setting the cells were run under")
    parser.add_argument("--lambda", dest="lambdas", action="append", default=[], metavar="VALUE=PATH")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "mechanism.json")
    args = parser.parse_args()
    learning = json.loads(args.sweep.read_text()) if args.sweep else summarize_cells(args.cells, args.preset)
    result = {
        "setting": learning["setting"],
        "preflight": preflight_block(args.mechanism_preflight),
        "default": {"preflight": preflight_block(args.default_preflight)},
        "methods": learning["methods"],
        "labels": learning.get("labels", {}),
        "comparisons": comparisons(learning),
        "curves": learning.get("curves", {}),
        "mechanism": learning.get("mechanism", {}),
        "stage1": learning.get("stage1", {}),
        "cell_wall_s": learning.get("cell_wall_s", []),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "loadavg_at_write": os.getloadavg()},
    }
    if args.lambdas:
        result["lambda"] = lambda_block(args.lambdas)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}: {len(result['methods'])} methods over {len(learning['setting'].get('seeds', []))} seeds")


if __name__ == "__main__":
    main()
