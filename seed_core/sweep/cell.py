"""The seed sweep: the paper's table in miniature, one cell per seed, then statistics over seeds.

``run_seed_cell`` is one DVC ``foreach`` item (``sweep/dvc.yaml``): with ``project.seed = s`` it runs the
whole pipeline for that seed in one process (collect -> annotate -> SFT -> RL for every algorithm in the
methods -> evaluation of every method, "*" methods with the cell's own static skill library) under ``<out>/``,
and writes ``results.json``. Each seed varies
everything random: collected and RL tasks, held-out evaluation tasks, sampling, SFT shuffling and RL init.
Only the testbed backbone (``prepare_model``) is shared, as a pretrained LLM is shared by the seeds of a
paper's table. A cell is the unit of resumption: DVC skips finished cells and reruns a killed one from
its start (it removes the cell's outputs first), so a cell never mixes parts made under another config.

``summarize_sweep`` turns the cells' ``results.json`` into ``learning.json`` (``seed_core.stats``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

from seed_core.algorithms import ALGORITHMS
from seed_core.config import SeedConfig
from seed_core.runtime.io import write_json
from seed_core.loader import with_overrides
from seed_core.tracking import NullTracker, Tracker

MECHANISM_KEYS = ("analysis/parse_ok_rate", "analysis/skill_words_mean", "analysis/distinct_skills",
                  "rl/teacher_sample_ratio", "rl/teacher_gap_success", "rl/teacher_gap_failure", "rl/gate_mean",
                  "rl/gate_active_ratio")
"""Per-round SEED mechanism metrics carried into results.json (means over rounds)."""


def rl_methods(methods: Sequence[str]) -> list[str]:
    """The RL algorithms the methods evaluate, once each (``skill_grpo_star`` needs ``skill_grpo``)."""
    from seed_core.methods import METHODS

    return list(dict.fromkeys(METHODS.get(m).policy for m in methods if METHODS.get(m).trained))


def with_cell_library(cfg: SeedConfig, annotate_dir: Path) -> SeedConfig:
    """The cell's static skills are the library its own annotations aggregate to (``<cell>/annotate/
    static_skills``), not the root pipeline's ``data/annotate/static_skills`` (another seed's, maybe absent);
    a user library (``rl.static_skills_dir``) stays."""
    if cfg.rl.static_skills_dir:
        return cfg
    return with_overrides(cfg, {"rl.static_skills_dir": str(Path(annotate_dir) / "static_skills")})


def run_seed_cell(cfg: SeedConfig, base_model: Path, out_dir: Path, methods: Sequence[str],
                  tracker: Tracker | None = None) -> dict[str, Any]:
    """One seed of the sweep (see module docstring); returns and writes ``out_dir/results.json``."""
    import pandas as pd

    from seed_core.methods import METHODS
    from seed_core.stages.annotate import run_annotate
    from seed_core.stages.collect import run_collect
    from seed_core.stages.evaluate import run_evaluate
    from seed_core.stages.rl import run_rl
    from seed_core.stages.sft import run_sft

    tracker = tracker or NullTracker()
    out_dir = Path(out_dir)
    start = time.perf_counter()
    collect, annotate, sft = out_dir / "collect", out_dir / "annotate", out_dir / "sft"
    stage1: dict[str, float] = {}
    run_collect(cfg, base_model, collect)
    run_annotate(cfg, collect, annotate)
    cfg = with_cell_library(cfg, annotate)
    run_sft(cfg, base_model, annotate, sft, collect_dir=collect)
    for part in (collect, annotate, sft):
        stage1 |= json.loads((part / "metrics.json").read_text())
    checkpoints = {"vanilla": base_model, "base": base_model, "sft": sft / "checkpoint"}
    curves: dict[str, list[dict[str, float]]] = {}
    mechanism: dict[str, dict[str, float]] = {}
    for algorithm in rl_methods(methods):
        rl_dir = out_dir / "rl" / algorithm
        init = checkpoints[ALGORITHMS.get(algorithm).init]  # Algorithm.init: "base" or "sft"
        run_rl(with_overrides(cfg, {"rl.algorithm": algorithm}), init, rl_dir)
        checkpoints[algorithm] = rl_dir / "checkpoint"
        curve = pd.read_csv(rl_dir / "curve.csv")
        curves[algorithm] = curve.to_dict(orient="records")
        mechanism[algorithm] = {k: float(curve[k].mean()) for k in MECHANISM_KEYS if k in curve}
    success: dict[str, float] = {}
    for method in methods:
        eval_dir = out_dir / "eval" / method
        metrics = run_evaluate(cfg, checkpoints[METHODS.get(method).policy], eval_dir, method)
        success[method] = float(metrics["eval/success_rate"])
        tracker.log_metrics({f"{method}/eval_success_rate": success[method]})
    results = {"seed": cfg.project.seed, "methods": list(methods), "success": success,
               "episodes": cfg.eval.num_tasks * len(cfg.eval.splits), "stage1": stage1, "mechanism": mechanism,
               "curves": curves, "wall_s": time.perf_counter() - start}
    write_json(out_dir / "results.json", results)
    return results


def read_cells(cell_dirs: Sequence[Path]) -> list[dict[str, Any]]:
    """The ``results.json`` of every cell, in order; a missing one is an error naming the cell."""
    out = []
    for d in cell_dirs:
        path = Path(d) / "results.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: that sweep cell did not finish; rerun `seed sweep`")
        out.append(json.loads(path.read_text()))
    return out


COMPARISONS = (("grpo", "sft"), ("seed", "grpo"), ("seed", "sft"), ("seed_static", "grpo"), ("seed", "seed_static"),
               ("seed", "sdar"), ("seed", "opid"), ("skill_grpo_star", "skill_grpo"),
               ("seed", "seed_no_sft"), ("seed", "seed_no_opd"), ("seed", "seed_static_library"),
               ("seed", "skill_grpo_star"), ("seed", "vanilla_star"), ("seed", "seed_shuffled"), ("seed", "seed_empty"),
               ("seed", "seed_ungated"), ("seed_oracle", "seed"), ("opsd_oracle", "sft"))
"""Paired comparisons reported when both methods ran: the headline (``grpo - sft``, ``seed - grpo``), the paper's
ablation table (``seed`` against ``seed_static``, ``seed_no_sft``, ``seed_no_opd``, ``seed_static_library``), its
skill-prompted rows (Skill-GRPO*, Skill-Prompt* = ``vanilla_star``) and the mechanism lab's controls (issue 25:
shuffled and empty teacher skills, no gate, the oracle analyzer, oracle-skill OPSD against its SFT start)."""


def summarize_sweep(cells: Sequence[dict[str, Any]], setting: dict[str, Any]) -> dict[str, Any]:
    """learning.json: per method key (in the paper's order; ``labels`` = the paper's names) ``{per_seed, mean,
    ci95, iqm, n}``; per comparison ``a-b`` the paired mean difference with its CI and P(a > b) with its CI;
    the per-round curves' mean and CI; mechanism means."""
    from seed_core.methods import in_paper_order, label
    from seed_core.stats import paired_difference, probability_of_improvement, summarize

    if not cells:
        raise ValueError("summarize_sweep: no finished cells")

    methods = in_paper_order([m for m in cells[0]["methods"] if all(m in c["success"] for c in cells)])
    per_method = {m: [c["success"][m] for c in cells] for m in methods}
    out: dict[str, Any] = {
        "setting": {**setting, "seeds": [c["seed"] for c in cells]},
        "method_order": methods,
        "labels": {m: label(m) for m in methods},
        "methods": {m: summarize(v) for m, v in per_method.items()},
        "comparisons": {},
    }
    for a, b in COMPARISONS:
        if a in per_method and b in per_method:
            out["comparisons"][f"{a}-{b}"] = {**paired_difference(per_method[a], per_method[b]),
                                              **probability_of_improvement(per_method[a], per_method[b])}
    out["curves"] = _curve_stats(cells)
    out["mechanism"] = {alg: {k: summarize([c["mechanism"][alg][k] for c in cells])["mean"]
                              for k in cells[0]["mechanism"][alg]}
                        for alg in cells[0].get("mechanism", {})
                        if all(alg in c.get("mechanism", {}) for c in cells)}
    out["stage1"] = {k: summarize([float(c["stage1"][k]) for c in cells])["mean"]
                     for k in sorted(cells[0]["stage1"]) if all(k in c["stage1"] for c in cells)
                     and (k.startswith("skill/") or k in ("annotate/distinct_skills", "collect/success_rate",
                                                          "annotate/ok"))}
    out["cell_wall_s"] = [c["wall_s"] for c in cells]
    return out


def _curve_stats(cells: Sequence[dict[str, Any]], key: str = "rollout/success_rate") -> dict[str, list[dict]]:
    """Per algorithm and round: mean and 95% CI over seeds of the training success rate."""
    from seed_core.stats import mean_ci

    out: dict[str, list[dict]] = {}
    for alg in cells[0]["curves"]:
        if not all(alg in c["curves"] for c in cells):
            continue
        rounds = min(len(c["curves"][alg]) for c in cells)
        rows = []
        for i in range(rounds):
            mean, (lo, hi) = mean_ci([float(c["curves"][alg][i].get(key, 0.0)) for c in cells])
            rows.append({"round": i, "mean": mean, "lo": lo, "hi": hi})
        out[alg] = rows
    return out


def setting_of(cfg: SeedConfig) -> dict[str, Any]:
    """What a sweep result was measured on (recorded in learning.json next to the numbers)."""
    return {
        "description": f"{cfg.project.preset}: model {cfg.model.path}, env {cfg.env.name} "
                       f"(max_steps {cfg.env.max_steps}), {cfg.rl.rounds} RL rounds x {cfg.rl.tasks_per_round} "
                       f"tasks x group {cfg.rl.group_size}, lr {cfg.rl.lr}, opd_coef {cfg.rl.opd_coef}, "
                       f"gate_beta {cfg.rl.gate_beta}",
        "preset": cfg.project.preset, "model": cfg.model.path, "env": cfg.env.name,
        "episodes": cfg.eval.num_tasks * len(cfg.eval.splits), "eval_temperature": cfg.generation.eval_temperature,
        "rl": cfg.rl.model_dump(mode="json"), "testbed": cfg.testbed.model_dump(mode="json"),
    }
