"""The mechanism study (issue 25): both settings' pre-flight and the mechanism setting's sweep in one JSON.

    python benchmarks/mechanism.py --default-preflight benchmarks/results/preflight_default.json \\
        --mechanism-preflight benchmarks/results/preflight_mechanism.json \\
        --sweep <clone>/reports/sweep/learning.json [--lambda 0.01=<learning.json> --lambda 1=<learning.json>] \\
        [--out benchmarks/results/mechanism.json]

Inputs are what the project's own commands write: ``seed preflight --json`` (the ``"preflight"`` blocks) and
``seed sweep`` (``learning.json``: per method ``{per_seed, mean, ci95, iqm, n}``, per comparison the paired
difference and P(a > b), both with 95% bootstrap CIs, ``seed_core.stats``). ``--cells`` summarizes the committed cell results instead (``seed_core.sweep.committed``: a study still running,
``n`` says how many seeds), with ``seed_core.sweep.cell.summarize_sweep``, the same function as the sweep's report;
cells of the same seeds and Stage 1 with other methods (the controls, a sweep of their own) join their seeds' rows
(``summarize_cells``).
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
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/confirmatory.py, imported as benchmarks.confirmatory
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


LAB_COMPARISONS = (("seed_static", "seed_no_opd"), ("seed_static", "seed_shuffled"), ("seed_static", "seed_empty"),
                   ("seed_oracle", "seed_static"), ("seed_static", "skill_grpo_star"))
"""Paired comparisons the lab adds to the sweep's (``seed_core.sweep.cell.COMPARISONS``): SEED-static against the controls
that share its start (GRPO from SFT; shuffled and empty teacher skills), the oracle analyzer against the frozen one,
and SEED-static against Skill-GRPO*. Kept here, not in seed_core: an edit there is another cell key."""


def paired(a: list[float], b: list[float]) -> dict[str, Any]:
    """A comparison of paired per-seed scores: the mean difference and its CI, paired wins, the exact sign-flip p
    and the unpaired P(a > b) (``benchmarks/confirmatory.compare``; ``p_holm`` comes with its family)."""
    from benchmarks.confirmatory import compare

    return compare(a, b)


def comparisons(learning: dict[str, Any]) -> dict[str, Any]:
    """Every comparison of the sweep and ``LAB_COMPARISONS`` recomputed from the per-seed held-out success
    (fractions), Holm-corrected over all of them as one family (the exploratory lab's 18 did not correct)."""
    from benchmarks.confirmatory import family_block

    methods = learning.get("methods", {})
    names = list(dict.fromkeys([*learning.get("comparisons", {}), *(f"{a}-{b}" for a, b in LAB_COMPARISONS)]))
    out = family_block({m: s["per_seed"] for m, s in methods.items()}, names)
    for short, name in ALIASES.items():
        if name in out:
            out[short] = out[name]
    return out


def lambda_block(items: list[str], preset: Path, main: dict[str, Any] | None) -> dict[str, Any]:
    """``{value: {"methods", "comparisons", "opd_coef"}}`` per ``VALUE=PATH``; PATH is a learning.json or a directory
    of that lambda's committed cells. A lambda study that ran only ``seed`` is paired with the main study's ``grpo``
    and ``seed`` of the same seeds (``seed-grpo``, ``seed-seed_main``: same Stage 1, only ``rl.opd_coef`` differs)."""
    out: dict[str, Any] = {}
    for item in items:
        value, sep, path = item.partition("=")
        if not sep:
            raise SystemExit(f"--lambda {item!r}: expected VALUE=PATH to a learning.json or a cells directory")
        source = Path(path)
        learning = (summarize_cells(source, preset, {"rl.opd_coef": float(value)}, require_methods=False)
                    if source.is_dir() else json.loads(source.read_text()))
        block = {"methods": learning["methods"], "comparisons": comparisons(learning),
                 "opd_coef": learning["setting"]["rl"]["opd_coef"], "seeds": learning["setting"]["seeds"]}
        if main is not None and "seed" in learning["methods"]:
            seeds = learning["setting"]["seeds"]
            index = {s: i for i, s in enumerate(main["setting"]["seeds"])}
            here = learning["methods"]["seed"]["per_seed"]
            for other, name in (("grpo", "seed-grpo"), ("seed", "seed-seed_main")):
                if other in main["methods"] and all(s in index for s in seeds) and name not in block["comparisons"]:
                    there = [main["methods"][other]["per_seed"][index[s]] for s in seeds]
                    block["comparisons"][name] = paired(here, there)
        out[value] = block
    return out


def _cells_by_seed(cells: Path) -> dict[int, list[dict[str, Any]]]:
    by_seed: dict[int, list[dict[str, Any]]] = {}
    for path in sorted(Path(cells).glob("seed_*-*.json")):
        result = json.loads(path.read_text())
        by_seed.setdefault(int(result["seed"]), []).append(result)
    return by_seed


def _stage1_of(cell: dict[str, Any]) -> dict[str, Any]:
    """What identifies a cell's Stage 1: its stage1 metrics less wall times and latencies, and SFT's held-out
    success (equal for the same seed, config and code; the times differ run to run)."""
    keep = {k: v for k, v in cell["stage1"].items()
            if not k.startswith("time/") and "latency" not in k and not k.endswith("per_s")}
    return {**keep, "sft_success": cell["success"].get("sft")}


def summarize_cells(cells: Path, preset: Path, overrides: dict[str, Any] | None = None,
                    require_methods: bool = True) -> dict[str, Any]:
    """``learning.json`` of the committed cells under ``cells`` in the setting of ``preset`` (``study_cells``)."""
    return summarize_merged(study_cells(cells, preset, overrides, require_methods), preset, overrides)


def summarize_merged(merged: list[dict[str, Any]], preset: Path,
                     overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """``learning.json`` of ``study_cells``' result, in the setting of ``preset``."""
    from seed_core.loader import load_config
    from seed_core.sweep.cell import setting_of, summarize_sweep

    learning = summarize_sweep(merged, setting_of(load_config(preset, overrides or {})))
    learning["setting"]["cell_keys"] = {c["seed"]: [c["config_hash"], *c.get("control_keys", [])] for c in merged}
    return learning


def study_cells(cells: Path, preset: Path, overrides: dict[str, Any] | None = None,
                require_methods: bool = True) -> list[dict[str, Any]]:
    """The study's cells under ``cells``, one per seed in seed order, with their controls merged in.

    The study is, per seed, the cell whose method list is the preset's ``sweep.methods`` (cells of other studies in
    the same directory, e.g. an earlier method list, are left out; two cells of the study for one seed are an
    error). A cell of the same seed with other methods whose Stage 1 is the study's (``_stage1_of``: the same SFT
    checkpoint) adds those methods to that seed (the controls, run as a sweep of their own), so
    they are paired with the study's rows seed by seed. ``require_methods=False`` takes whatever method list the
    directory's cells share (a lambda study of ``seed`` alone)."""
    from seed_core.loader import load_config

    cfg = load_config(preset, overrides or {})
    by_seed = _cells_by_seed(cells)
    if not by_seed:
        raise SystemExit(f"{cells}: no committed cell results (seed_<s>-<key>.json); run seed sweep first")
    study = list(cfg.sweep.methods) if require_methods else next(iter(by_seed.values()))[0]["methods"]
    merged: list[dict[str, Any]] = []
    for seed in sorted(by_seed):
        mains = [c for c in by_seed[seed] if list(c["methods"]) == study]
        if len(mains) > 1:
            raise SystemExit(f"{cells}: {len(mains)} cells of seed {seed} ran {study}; keep one (their keys: "
                             f"{', '.join(c['config_hash'] for c in mains)})")
        if not mains:
            continue
        cell = json.loads(json.dumps(mains[0]))
        for extra in (c for c in by_seed[seed] if c is not mains[0] and _stage1_of(c) == _stage1_of(cell)):
            new = [m for m in extra["methods"] if m not in cell["methods"]]
            cell["methods"] = [*cell["methods"], *new]
            cell["success"].update({m: extra["success"][m] for m in new})
            cell["curves"].update({m: extra["curves"][m] for m in new if m in extra.get("curves", {})})
            cell.setdefault("mechanism", {}).update({m: v for m, v in extra.get("mechanism", {}).items() if m in new})
            cell.setdefault("control_keys", []).append(extra["config_hash"])
        merged.append(cell)
    if not merged:
        raise SystemExit(f"{cells}: no cell ran the preset's sweep.methods {study}")
    return merged


OUTCOMES = {"learned": (0.9, 1.01), "naive": (0.4, 0.6), "collapsed": (0.0, 0.2)}
"""Held-out success bands of one seed in the lab: the rule learned (>= 90%), the naive always-add player's level
(40-60%: right on red cards only), and a policy that lost the answer format or the rule (< 20%)."""


def outcomes(methods: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per method, how many seeds ended in each band of ``OUTCOMES`` (``other``: none of them)."""
    out: dict[str, dict[str, int]] = {}
    for method, summary in methods.items():
        counts = {band: sum(lo <= v < hi for v in summary["per_seed"]) for band, (lo, hi) in OUTCOMES.items()}
        out[method] = {**counts, "other": len(summary["per_seed"]) - sum(counts.values())}
    return out


ROUND_KEYS = ("analysis/skill_correct", "analysis/parse_ok_rate", "analysis/fail_truncated", "analysis/fail_invalid_json",
              "analysis/fail_missing_field", "analysis/fail_empty_skill", "analysis/fail_call", "audit/parse_ok_rate",
              "audit/skill_correct", "audit/candidate_parse_ok_rate", "audit/refreshed", "rl/teacher_coverage",
              "rl/grad_ratio", "rl/teacher_gap_decision", "rollout/format_valid_rate", "rollout/success_rate")
"""The per-round audit of every analyzing row (``seed_core.analyzer.audit``; ``audit/*``: the gated panel) and the
round's learning signals."""


def per_round(cells: list[dict[str, Any]], keys: tuple[str, ...] = ROUND_KEYS) -> dict[str, dict[str, list]]:
    """Per RL method and key, the mean over seeds of each round's value (NaN and missing rounds left out): how the
    self-written skills' correctness, the gradient ratio and the decision-token gap move during RL."""
    import math

    out: dict[str, dict[str, list]] = {}
    for method in cells[0]["curves"]:
        rows = [c["curves"][method] for c in cells if method in c["curves"]]
        if len(rows) != len(cells) or not any(k in rows[0][0] for k in keys):
            continue
        rounds = min(len(r) for r in rows)
        out[method] = {}
        for key in (k for k in keys if k in rows[0][0]):
            values = [[float(r[i][key]) for r in rows if key in r[i] and not math.isnan(float(r[i][key]))]
                      for i in range(rounds)]
            out[method][key] = [round(sum(v) / len(v), 4) if v else None for v in values]
    return out


def confirmatory_blocks(merged: list[dict[str, Any]], learning: dict[str, Any], plan_path: Path) -> dict[str, Any]:
    """The plan, the positive control's verdict (judged first, on held-out success) and, where the cells have the
    family's rows, the family on the primary outcome (the training-success AUC) with Holm over it."""
    from seed_core.stats import mean_ci

    from benchmarks.confirmatory import (decisions, family_block, heldout_scores, late_analyzer, plan_block,
                                         positive_control, primary_scores, rounds_to)

    plan = plan_block(plan_path)
    names = [c["name"] for c in plan["family"]["comparisons"]]
    primary = primary_scores(merged) if merged else {}
    seeds = list(learning["setting"].get("seeds", []))
    study = [*plan["seeds"]["study"], *plan["seeds"]["extension"]]
    if seeds and set(seeds) <= set(study):
        status = "confirmatory" if len(seeds) >= len(plan["seeds"]["study"]) else \
            f"confirmatory, incomplete: {len(seeds)} of the plan's {len(plan['seeds']['study'])} study seeds " \
            f"({seeds}); the decision rules apply only to all of them"
    else:
        status = f"exploratory: seeds {seeds} are not the plan's study seeds; these numbers test nothing it registered"
    control = positive_control(heldout_scores(learning["methods"]), plan)
    if status.startswith("confirmatory, incomplete") and "mean_diff" in control:  # judged on all study seeds only
        control["verdict"] = f"not judged yet: {len(seeds)} of {len(plan['seeds']['study'])} study seeds " \
                             f"(the smallest sign-flip p at n = {len(seeds)} is {2 / 2 ** len(seeds):g})"
    family = family_block(primary, names)
    parse_late = late_analyzer(merged, "analysis/parse_ok_rate")
    correct_late = late_analyzer(merged, "analysis/skill_correct")
    to_90 = {m: [rounds_to(c["curves"][m]) for c in merged] for m in primary}
    return {"plan": plan, "status": status, "positive_control": control,
            "primary": {m: {"per_seed": v, "mean": sum(v) / len(v), "ci95": list(mean_ci(v)[1])}
                        for m, v in primary.items()},
            "family": family,
            "secondary": {"rounds_to_90": to_90, "analyzer_parse_late": parse_late,
                          "analyzer_correct_late": correct_late},
            "decisions": decisions(family, control, parse_late, correct_late, plan,
                                   complete=status == "confirmatory")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--default-preflight", type=Path, required=True)
    parser.add_argument("--mechanism-preflight", type=Path, required=True)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--sweep", type=Path, help="learning.json of the mechanism preset's sweep")
    source.add_argument("--cells", type=Path, help="a directory of committed cell results (sweep/cells)")
    parser.add_argument("--preset", type=Path, default=ROOT / "presets" / "testbed-mechanism.yaml",
                        help="with --cells: the setting the cells were run under")
    parser.add_argument("--lambda", dest="lambdas", action="append", default=[], metavar="VALUE=PATH",
                        help="a lambda study: its learning.json or its directory of committed cells")
    parser.add_argument("--plan", type=Path, default=ROOT / "benchmarks" / "mechanism_plan.yaml",
                        help="the registered plan of the confirmatory study (benchmarks/confirmatory.py)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "mechanism.json")
    args = parser.parse_args()
    merged = study_cells(args.cells, args.preset) if args.cells else []
    learning = summarize_merged(merged, args.preset) if merged else json.loads(args.sweep.read_text())
    rounds = per_round(merged) if merged else {}
    result = {
        "setting": learning["setting"],
        "preflight": preflight_block(args.mechanism_preflight),
        "default": {"preflight": preflight_block(args.default_preflight)},
        "methods": learning["methods"],
        "labels": learning.get("labels", {}),
        "comparisons": comparisons(learning),
        "outcomes": outcomes(learning["methods"]),
        "curves": learning.get("curves", {}),
        "per_round": rounds,
        "mechanism": learning.get("mechanism", {}),
        "stage1": learning.get("stage1", {}),
        "cell_wall_s": learning.get("cell_wall_s", []),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "loadavg_at_write": os.getloadavg()},
    }
    result.update(confirmatory_blocks(merged, learning, args.plan))
    if args.lambdas:
        result["lambda"] = lambda_block(args.lambdas, args.preset, learning)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}: {len(result['methods'])} methods over {len(learning['setting'].get('seeds', []))} seeds")


if __name__ == "__main__":
    main()
