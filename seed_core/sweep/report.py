"""The sweep's report: ``table.md`` (mean ± 95% CI over seeds, IQM, paired comparisons, mechanism) and
``curve_success.png`` (training success per RL round, mean over seeds with a 95% CI band).

    python -m seed_core.sweep.report --config params.yaml --cells data/sweep/seed_0 data/sweep/seed_1 ... \
        --out reports/sweep
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from seed_core.algorithms import ABLATIONS
from seed_core.loader import load_config
from seed_core.methods import in_paper_order, label
from seed_core.runtime.io import atomic_write_text, write_json
from seed_core.sweep.cell import read_cells, setting_of, summarize_sweep

MECHANISM_LABELS = {
    "analysis/parse_ok_rate": "parse rate", "analysis/skill_words_mean": "skill words",
    "analysis/distinct_skills": "distinct skills", "rl/teacher_sample_ratio": "with teacher",
    "rl/teacher_gap_success": "gap l^T-l (succ)", "rl/teacher_gap_failure": "gap l^T-l (fail)",
    "rl/gate_mean": "gate mean", "rl/gate_active_ratio": "gate active",
}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def render_sweep_table(summary: dict[str, Any]) -> str:
    """Markdown: the methods table (the paper's order and labels, ``seed_core.methods``), the comparisons and
    the mechanism table, headed by the setting."""
    setting = summary["setting"]
    seeds = setting["seeds"]
    lines = [
        f"# Sweep: {len(seeds)} seeds ({', '.join(map(str, seeds))}), {setting.get('episodes', '?')} held-out "
        f"episodes per method and seed",
        "",
        f"Setting: {setting.get('description', '')}. Success in %, mean ± half-width of the 95% percentile-"
        "bootstrap CI over seeds (`scipy.stats.bootstrap`); IQM = interquartile mean over seeds. A small-scale "
        "testbed run, not the paper's numbers.",
        "",
        "| Method | Success (mean ± CI, n seeds) | 95% CI | IQM | per seed |",
        "|---|---|---|---|---|",
    ]
    for method in in_paper_order(list(summary["methods"])):
        s = summary["methods"][method]
        lo, hi = s["ci95"]
        half = max(s["mean"] - lo, hi - s["mean"])
        per_seed = " ".join(_pct(v) for v in s["per_seed"])
        lines.append(f"| {label(method)} | {_pct(s['mean'])} ± {_pct(half)} ({s['n']}) | [{_pct(lo)}, {_pct(hi)}] | "
                     f"{_pct(s['iqm'])} | {per_seed} |")
    lines += ["", "| Comparison | mean difference (points) | 95% CI | P(a > b) | 95% CI |", "|---|---|---|---|---|"]
    for name, c in summary["comparisons"].items():
        lo, hi = c["ci95"]
        plo, phi = c["prob_improvement_ci95"]
        a, b = name.split("-")
        lines.append(f"| {label(a)} - {label(b)} | {100 * c['mean_diff']:+.1f} | [{100 * lo:+.1f}, {100 * hi:+.1f}] | "
                     f"{c['prob_improvement']:.2f} | [{plo:.2f}, {phi:.2f}] |")
    lines += _ablation_lines(summary)
    mech = summary.get("mechanism", {})
    keys = [k for k in MECHANISM_LABELS if any(k in m for m in mech.values())]
    if keys:
        lines += ["", "Mechanism (means over rounds, then over seeds):", "",
                  "| RL method | " + " | ".join(MECHANISM_LABELS[k] for k in keys) + " |",
                  "|---|" + "---|" * len(keys)]
        for alg in in_paper_order(list(mech)):
            m = mech[alg]
            lines.append(f"| {label(alg)} | " + " | ".join(f"{m[k]:.3f}" if k in m else "-" for k in keys) + " |")
    stage1 = summary.get("stage1", {})
    if stage1:
        lines += ["", "Stage 1 (mean over seeds): " + ", ".join(f"{k} = {v:.4g}" for k, v in stage1.items())]
    return "\n".join(lines) + "\n"


def _ablation_lines(summary: dict[str, Any]) -> list[str]:
    """The paper's Table 2 over seeds: SEED and each ablation that ran, its mean success and its drop against SEED
    in the paper's sign, Drop = row - SEED (the paired ``seed-<row>`` comparison negated, its 95% CI mirrored);
    nothing without SEED and an ablation."""
    methods, comparisons = summary["methods"], summary["comparisons"]
    rows = [m for m in ABLATIONS[1:] if m in methods and f"{ABLATIONS[0]}-{m}" in comparisons]
    if ABLATIONS[0] not in methods or not rows:
        return []
    lines = ["", "Ablations (paper Table 2): Drop = the row minus SEED, paired over seeds (points, the paper's sign):",
             "", "| Row | Success (mean) | Drop (row - SEED) | 95% CI | P(SEED > row) |", "|---|---|---|---|---|",
             f"| {label(ABLATIONS[0])} | {_pct(methods[ABLATIONS[0]]['mean'])} | - | - | - |"]
    for method in rows:
        c = comparisons[f"{ABLATIONS[0]}-{method}"]
        lo, hi = c["ci95"]
        lines.append(f"| {label(method)} | {_pct(methods[method]['mean'])} | {-100 * c['mean_diff']:+.1f} | "
                     f"[{-100 * hi:+.1f}, {-100 * lo:+.1f}] | {c['prob_improvement']:.2f} |")
    return lines


def plot_sweep_curves(summary: dict[str, Any], path: Path) -> Path:
    """Training success per round: one line per RL method (mean over seeds) with its 95% CI band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 4))
    for alg in in_paper_order(list(summary["curves"])):
        rows = summary["curves"][alg]
        x = [r["round"] for r in rows]
        ax.plot(x, [r["mean"] for r in rows], marker="o", label=label(alg))
        ax.fill_between(x, [r["lo"] for r in rows], [r["hi"] for r in rows], alpha=0.2)
    ax.set_xlabel("RL round")
    ax.set_ylabel("training success rate")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"mean and 95% CI over {len(summary['setting']['seeds'])} seeds")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def run_sweep_report(cells: list[Path], out_dir: Path, setting: dict[str, Any]) -> dict[str, Any]:
    """Read the cells, write ``learning.json``, ``table.md`` and ``curve_success.png`` into ``out_dir``."""
    summary = summarize_sweep(read_cells(cells), setting)
    out_dir = Path(out_dir)
    write_json(out_dir / "learning.json", summary)
    atomic_write_text(out_dir / "table.md", render_sweep_table(summary))
    plot_sweep_curves(summary, out_dir / "curve_success.png")
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="params.yaml")
    parser.add_argument("--cells", nargs="+", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    summary = run_sweep_report(args.cells, args.out, setting_of(load_config(args.config)))
    print(render_sweep_table(summary))


if __name__ == "__main__":
    main()
