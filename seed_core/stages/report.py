"""The last stage: paper-style success tables and RL learning curves from the evaluation and RL outputs.

Inputs are the evaluation episodes (``episodes.parquet``, one ``EvalRecord`` per episode) of every
method and the RL ``curve.csv`` (one row per round) of every algorithm. Outputs, all in ``out_dir``:

- ``table.csv``: long format, one row per method x env x split x task type (plus an ``all`` row):
  ``method`` (the machine-readable key, ``skill_grpo_star``), ``label`` (the paper's name, ``Skill-GRPO*``),
  success_rate, score, episodes, seeds, mean_return, format_valid_rate. ``score`` is the mean partial task
  score in [0, 1] of the episodes that have one (WebShop's purchase score) and empty for environments
  without one (success-only: ALFWorld, Search-QA, Sokoban, EZPoints). ``format_valid_rate`` is the mean
  over episodes of their share of well-formed responses (empty for files written before it was recorded).
- ``table.md``: per (env, split) the layout of the OPID/SDAR main table (seed-algorithm.md §5.1):
  rows = methods in the paper's order with the paper's labels (``seed_core.methods``), columns = task types
  and ``Avg`` in percent, then ``format-valid`` (%, beside success: a "*" row whose skill text breaks the
  answer format shows it here), ``from``, episodes and seeds, headed by
  an honest note saying which preset produced it and that small runs are not the paper's numbers.
  An (env, split) whose episodes carry a score (WebShop) gets the paper's two WebShop columns instead
  of ``Avg``: ``Score`` (mean score x 100) and ``Succ`` (success rate x 100).
- ``curve_success.png`` / ``curve_losses.png``: training success and the loss terms per RL round (the
  ``rollout/...`` and ``rl/...`` columns of ``curve.csv``), one line per method.

pandas + matplotlib (Agg) only; no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from seed_core.config import SeedConfig  # noqa: E402
from seed_core.runtime.io import DataFileError, atomic_write_text, read_frame  # noqa: E402
from seed_core.algorithms import ABLATIONS  # noqa: E402
from seed_core.methods import METHODS, label, sort_key  # noqa: E402
from seed_core.tracking import NullTracker, Tracker  # noqa: E402
from seed_core.types import EvalRecord  # noqa: E402

TASK_TYPE_LABELS = {
    "pick_and_place": "Pick", "look_at_obj_in_light": "Look", "pick_clean_then_place_in_recep": "Clean",
    "pick_heat_then_place_in_recep": "Heat", "pick_cool_then_place_in_recep": "Cool",
    "pick_two_obj_and_place": "Pick2",
}
"""Column names of the paper's ALFWorld table; other task types keep their own label."""

SCORE_NOTE = ("Score = mean task score (0-1, WebShop's purchase score) x 100; Succ and the task-type "
              "columns = success rate (%), success = score 1.")
"""Line above a table with a Score column (the paper's "WS Score" / "WS Succ")."""

ABLATION_NOTE = ("Drop = the row's success minus SEED's, in points, the paper's sign (negative: removing the part "
                 "hurt SEED). "
                 "from = the checkpoint a row was trained from: base = the base model, SFT = the Stage-1 "
                 "hindsight-skill checkpoint (the paper's baselines start from the base model, SEED from SFT).")
"""Line above the ablation table."""

FORMAT_NOTE = ("format-valid = share (%) of the steps whose response parsed as one valid action (mean over "
               "episodes); a \"*\" row plays with its task type's static skill library in the prompt, so a low "
               "value there means the skill text broke the answer format.")
"""Paragraph under the header of ``table.md`` (``EvalRecord.format_valid_rate``)."""

SUCCESS_COLUMN = "rollout/success_rate"
"""Curve column drawn in ``curve_success.png``: training success of each round's on-policy rollouts."""
LOSS_COLUMNS = ("rl/pg_loss", "rl/kl_loss", "rl/opd_loss", "rl/entropy", "rl/gate_mean", "rl/gate_active_ratio",
                "rl/clip_frac")
"""Curve columns (the RL round metrics of seed_core.stages.rl) drawn in ``curve_losses.png`` when present."""


def load_episodes(eval_dirs: dict[str, Path]) -> pd.DataFrame:
    """All evaluation episodes. The ``method`` of a directory's own episodes is its key in ``eval_dirs`` (the
    DVC matrix name); the extra episodes an evaluation may add keep the key their record names
    (``eval.with_skills``: ``<method>_star``, ``eval.skill_prompt``: ``<method>_replay``), so they get rows
    of their own instead of being averaged into the method's."""
    frames = [read_frame(Path(d) / "episodes.parquet", EvalRecord) for d in eval_dirs.values()]
    if not frames:
        raise ValueError("report needs at least one evaluation directory")
    for (name, d), frame in zip(eval_dirs.items(), frames):
        if frame.empty:
            raise DataFileError(f"{Path(d) / 'episodes.parquet'} has 0 rows; rerun the evaluate@{name} stage")
        starred = name in METHODS and METHODS.get(name).with_skills
        own = frame["skill_prompt"] == starred
        frame.loc[own, "method"] = name
    return pd.concat(frames, ignore_index=True)


def summarize(episodes: pd.DataFrame) -> pd.DataFrame:
    """Long table: method x env x split x task_type (plus task_type ``all``) -> success, episodes, seeds."""
    keys = ["method", "env", "split"]
    by_type = episodes.groupby(keys + ["task_type"], sort=False)
    overall = episodes.assign(task_type="all").groupby(keys + ["task_type"], sort=False)
    rows = pd.concat([_aggregate(by_type), _aggregate(overall)], ignore_index=True)
    rows.insert(1, "label", rows["method"].map(label))
    rows["_rank"] = rows["method"].map(lambda m: sort_key(m)[0])
    rows["_all"] = rows["task_type"] == "all"
    rows = rows.sort_values(["env", "split", "_rank", "method", "_all", "task_type"], kind="stable")
    return rows.drop(columns=["_rank", "_all"]).reset_index(drop=True)


def _aggregate(groups: Any) -> pd.DataFrame:
    """success_rate, score (mean over the episodes with one; NaN when none has), episodes, seeds, mean_return,
    format_valid_rate (mean over the episodes that recorded it of their share of well-formed responses)."""
    return groups.agg(success_rate=("success", "mean"), score=("score", "mean"), episodes=("success", "size"),
                      seeds=("seed", "nunique"), mean_return=("episode_return", "mean"),
                      format_valid_rate=("format_valid_rate", "mean")).reset_index()


def _percent(value: float) -> str:
    return "-" if pd.isna(value) else f"{100 * value:.1f}"


def paper_table(table: pd.DataFrame, env: str, split: str) -> str:
    """Markdown of one (env, split): rows = methods (their labels, in the table's order), columns = task types
    (when more than one) + Avg (success %), episodes, seeds; ``Score`` (mean score x 100) + ``Succ``
    (success %) instead of Avg when the episodes carry a partial task score (WebShop)."""
    part = table[(table["env"] == env) & (table["split"] == split)]
    paper_order = list(TASK_TYPE_LABELS)
    types = sorted(set(part["task_type"]) - {"all"},
                   key=lambda t: (paper_order.index(t) if t in paper_order else len(paper_order), t))
    if len(types) == 1:  # one task type (Sokoban, EZPoints): its column would repeat Avg
        types = []
    scored = bool(part["score"].notna().any())
    overall_columns = ["Score", "Succ"] if scored else ["Avg"]
    header = (["Method"] + [TASK_TYPE_LABELS.get(t, t or "-") for t in types] + overall_columns
              + ["format-valid", "from", "episodes", "seeds"])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, rows in part.groupby("method", sort=False):
        cell = dict(zip(rows["task_type"], rows["success_rate"]))
        overall = rows[rows["task_type"] == "all"].iloc[0]
        values = [_percent(cell.get(t, float("nan"))) for t in types]
        values += [_percent(overall["score"])] if scored else []
        values += [_percent(overall["success_rate"]), _percent(overall["format_valid_rate"])]
        lines.append("| " + " | ".join([str(rows["label"].iloc[0]), *values, _start(str(rows["method"].iloc[0])),
                                         str(overall["episodes"]), str(overall["seeds"])]) + " |")
    return "\n".join(lines)


def _start(method: str) -> str:
    return METHODS.get(method).start if method in METHODS else "?"


def ablation_table(table: pd.DataFrame, env: str, split: str) -> str | None:
    """The paper's Table 2 for one (env, split): SEED and each of its ablations (``ABLATIONS``) that was evaluated,
    with success (%) and its drop against SEED in points, the paper's sign: Drop = success(row) - success(SEED);
    None without SEED or without any ablation."""
    part = table[(table["env"] == env) & (table["split"] == split) & (table["task_type"] == "all")]
    success = dict(zip(part["method"], part["success_rate"]))
    rows = [m for m in ABLATIONS if m in success]
    if ABLATIONS[0] not in success or len(rows) < 2:
        return None
    lines = ["| Row | Success | Drop (row - SEED) | from |", "|---|---|---|---|"]
    for method in rows:
        drop = "-" if method == ABLATIONS[0] else f"{100 * (success[method] - success[ABLATIONS[0]]):+.1f}"
        lines.append(f"| {label(method)} | {_percent(success[method])} | {drop} | {_start(method)} |")
    return "\n".join(lines)


def render_markdown(table: pd.DataFrame, cfg: SeedConfig) -> str:
    """The whole ``table.md``: an honest header, then one paper-layout table per (env, split)."""
    out = [
        f"# Success rate (%) by method, environment and task type: preset `{cfg.project.preset}`",
        "",
        f"Small-scale run of this repository (model `{cfg.model.path}`, {cfg.rl.rounds} RL rounds x "
        f"{cfg.rl.tasks_per_round} tasks x group {cfg.rl.group_size}, annotator `{cfg.annotate.client}`). "
        "These numbers show the pipeline works end to end; they are not the paper's results, which need "
        "the paper presets (presets/) on GPUs. Column `from`: the checkpoint a row was trained from (base = the "
        "base model, SFT = the Stage-1 checkpoint), as in the paper.",
        "",
        FORMAT_NOTE,
    ]
    for (env, split), part in table.groupby(["env", "split"], sort=False):
        out += ["", f"## {env} / {split}", ""]
        if part["score"].notna().any():
            out += [SCORE_NOTE, ""]
        out.append(paper_table(table, env, split))
        ablations = ablation_table(table, env, split)
        if ablations:
            out += ["", f"### Ablations (paper Table 2): {env} / {split}", "", ABLATION_NOTE, "", ablations]
    return "\n".join(out) + "\n"


def load_curves(rl_dirs: dict[str, Path]) -> pd.DataFrame:
    """All RL curves (``curve.csv``) stacked with a ``method`` column; empty when there are none."""
    frames = [pd.read_csv(Path(d) / "curve.csv").assign(method=name) for name, d in rl_dirs.items()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["method", "round"])


def plot_curves(curves: pd.DataFrame, out_dir: Path, tracker: Tracker | None = None) -> list[Path]:
    """``curve_success.png`` (success per round) and ``curve_losses.png`` (one panel per loss column);
    both are always written (empty axes without RL curves) so DVC can declare them as outputs. Each
    figure also goes to ``tracker.log_figure`` as ``curves/<name>.png``."""
    losses = [c for c in LOSS_COLUMNS if c in curves.columns and curves[c].notna().any()] or ["rl/pg_loss"]
    tracker = tracker or NullTracker()
    return [_plot(curves, [SUCCESS_COLUMN], out_dir / "curve_success.png", tracker),
            _plot(curves, losses, out_dir / "curve_losses.png", tracker)]


def _plot(curves: pd.DataFrame, columns: list[str], path: Path, tracker: Tracker) -> Path:
    from matplotlib.ticker import MaxNLocator

    colors = {m: f"C{i}" for i, m in enumerate(dict.fromkeys(curves["method"]))}  # one colour per method
    ncols = min(4, len(columns))
    nrows = -(-len(columns) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.5 * ncols, 3.4 * nrows), squeeze=False)
    for ax in axes.flat[len(columns):]:
        ax.set_visible(False)
    for ax, column in zip(axes.flat, columns):
        for method, rows in curves.groupby("method", sort=False):
            if column in rows and rows[column].notna().any():
                ax.plot(rows["round"], rows[column], marker="o", label=label(str(method)), color=colors[method])
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("RL round")
        ax.set_title(column)
        ax.grid(alpha=0.3)
    if axes[0][0].get_legend_handles_labels()[0]:
        axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=100)
    tracker.log_figure(fig, f"curves/{path.name}")
    plt.close(fig)
    tmp.replace(path)
    return path


TABLE_ARTIFACT = "results/table.json"
"""Where the long table goes in MLflow (``log_table``): on the report stage's run and on the pipeline run."""


def run_report(eval_dirs: dict[str, Path], rl_dirs: dict[str, Path], out_dir: Path,
               cfg: SeedConfig, tracker: Tracker | None = None) -> dict[str, float]:
    """Write table.csv, table.md and the curve PNGs (also to ``tracker``: the table with ``log_table``,
    the curves with ``log_figure``); return the ``headline_metrics`` of the table."""
    out_dir = Path(out_dir)
    tracker = tracker or NullTracker()
    table = summarize(load_episodes(eval_dirs))
    atomic_write_text(out_dir / "table.csv", table.to_csv(index=False, float_format="%.4f"))
    atomic_write_text(out_dir / "table.md", render_markdown(table, cfg))
    tracker.log_table(table, TABLE_ARTIFACT)
    plot_curves(load_curves(rl_dirs), out_dir, tracker)
    return headline_metrics(table)


def headline_metrics(table: pd.DataFrame) -> dict[str, float]:
    """``<method>/<env>/<split>/success_rate`` (the table's Avg / Succ column) and, where the episodes carry a
    task score, ``<method>/<env>/<split>/score``, from the ``task_type == "all"`` rows (also of a re-read
    ``table.csv``)."""
    metrics: dict[str, float] = {}
    for r in table[table["task_type"] == "all"].itertuples():
        metrics[f"{r.method}/{r.env}/{r.split}/success_rate"] = float(r.success_rate)
        if not pd.isna(r.score):
            metrics[f"{r.method}/{r.env}/{r.split}/score"] = float(r.score)
    return metrics
