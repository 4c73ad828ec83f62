"""Render README.md and docs/results.md from their templates and the committed measurements.

Why: a number typed into a guide goes stale the day its result is re-measured. Every result number in these
pages is therefore read here from where it was measured, ``benchmarks/results/*.json`` and the committed
reference run's ``reports/table.csv``, and the pages are written from ``docs/templates/*.j2`` (Jinja2). The
templates hold prose and no measured number; ``tests/unit/test_docs_render.py`` fails when a committed page
differs from a fresh render or when a template's text holds a number the render does not fill.

    .venv/bin/python scripts/render_docs.py           # rewrite the pages
    .venv/bin/python scripts/render_docs.py --check   # exit 1, naming each page that differs (no writing)

Table 2's column follows the paper's convention: Drop = the row's success minus SEED's, in points (negative
when removing the part hurt SEED), named so in the column header.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

import jinja2
import yaml

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "docs" / "templates"
PAGES = {"README.md.j2": "README.md", "results.md.j2": "docs/results.md", "rehearsals.md.j2": "docs/rehearsals.md"}
"""Template (under docs/templates/) -> the page it renders, relative to the repository root."""
RESULTS = ROOT / "benchmarks" / "results"
ABLATIONS = ("seed", "seed_no_sft", "seed_no_opd", "seed_static_library", "seed_static")
"""Paper Table 2's rows: SEED first (seed_core/algorithms.py ABLATIONS; repeated so the script imports no torch)."""


def _json(name: str) -> dict[str, Any]:
    """One committed measurement, ``benchmarks/results/<name>``."""
    return json.loads((RESULTS / name).read_text())


def pct(x: float) -> str:
    """A rate in [0, 1] as percent with one decimal, the tables' format (0.3281 -> '32.8')."""
    return f"{100 * x:.1f}"


def signed(x: float) -> str:
    """A difference of rates in [0, 1] as signed points with one decimal (-0.055 -> '-5.5')."""
    return f"{100 * x:+.1f}"


def thousands(x: float) -> str:
    """Seconds as a whole number with a thousands separator (2172.4 -> '2,172')."""
    return f"{round(x):,}"


def reference_rows() -> list[dict[str, Any]]:
    """The committed reference run's rows, in the table's order: the method keys from ``reports/table.csv`` (its
    all-task-types rows), the figures as ``reports/table.md`` prints them (the CSV rounds rates to 4 decimals, so a
    percent recomputed from it can differ from the printed one in the last digit)."""
    with (ROOT / "reports" / "table.csv").open() as f:
        keys = {r["label"]: (r["method"], float(r["success_rate"])) for r in csv.DictReader(f)
                if r["task_type"] == "all"}
    rows = []
    for line in (ROOT / "reports" / "table.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] in keys and not any(r["label"] == cells[0] for r in rows):
            method, rate = keys[cells[0]]
            rows.append({"method": method, "label": cells[0], "success_rate": rate, "success": cells[1],
                         "valid": cells[2], "episodes": int(cells[4])})
    return rows


def table2(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Paper Table 2 from the reference rows: SEED, then each ablation with Drop = row - SEED (the paper's sign)."""
    by = {r["method"]: r for r in rows}
    seed = by[ABLATIONS[0]]["success_rate"]
    return [{"label": by[m]["label"], "success": by[m]["success"],
             "drop": "-" if m == ABLATIONS[0] else signed(by[m]["success_rate"] - seed)}
            for m in ABLATIONS if m in by]


def verdict_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each reference row against the committed sweep (``learning.json``) by ``seed run``'s own rule."""
    sys.path.insert(0, str(ROOT))
    from seed_core.repro.reference import judge  # the rule seed run applies; scipy only, no torch

    out = []
    for v in judge(rows, _json("learning.json")):
        missing = v.status == "missing"
        out.append({"label": v.label, "success": pct(v.value),
                    "range": "not in the reference" if missing else f"[{pct(v.low)}, {pct(v.high)}]",
                    "status": "-" if missing else v.status})
    return out


def preflight(name: str) -> dict[str, Any]:
    """The pre-flight measures of one ``seed preflight --json`` record, formatted for the side-by-side table."""
    d = _json(name)
    p, s, th = d["p_expert"], d["success"], d["thresholds"]
    return {"plain": f"{p['plain']:.3f}", "matched": f"{p['matched']:.3f}", "mismatched": f"{p['mismatched']:.3f}",
            "lift": f"{p['matched'] - p['plain']:+.3f}", "control": f"{p['mismatched'] - p['plain']:+.3f}",
            "gap": signed(d["perf_gap"]), "student": pct(s["student"]), "teacher": pct(s["teacher"]),
            "skill_correct": f"{100 * d['skill_correct']:.0f}", "grad_ratio": f"{d['grad_ratio']:.3f}",
            "zero_adv": f"{100 * d['zero_adv_groups']:.1f}".removesuffix(".0"),
            "failed": sum(not t["passed"] for t in th.values()), "measures": len(th),
            "verdict": "go" if d["passed"] else "no-go", "states": p["states"],
            "thresholds": {k: f"{t['op']} {_scaled(k, t['value'])}" for k, t in th.items()}}


PERCENT_THRESHOLDS = {"perf_gap": " points", "skill_correct": "%", "zero_adv_groups": "%"}
"""Pre-flight thresholds on rates shown in the table's units: points of success, percent of skills or groups."""


def _scaled(key: str, value: float) -> str:
    """One pre-flight threshold as the table shows it (0.3 on perf_gap -> '30 points'; other ratios as they are)."""
    return f"{100 * value:g}{PERCENT_THRESHOLDS[key]}" if key in PERCENT_THRESHOLDS else f"{value:g}"


def numerics() -> dict[str, Any]:
    """The pinned-numerics cost and the native lane's GRPO (``numerics_run_cost.json``)."""
    d = _json("numerics_run_cost.json")
    pinned, native = d["lanes"]["pinned"], d["lanes"]["native"]
    return {"pinned_pretrain_s": pinned["pretraining_s"], "native_pretrain_s": native["pretraining_s"],
            "pretrain_cost": f"{100 * (d['ratios_pinned_over_native']['pretraining'] - 1):.0f}",
            "native_grpo": f"{native['success']['GRPO']:.1f}", "pinned_equal": pinned["table_equals_committed"],
            "threads": d["threads_per_lane"]}


def timings() -> dict[str, Any]:
    """The two commands' measured times: set-up and CI (``two_commands.json``), ``seed run`` of the current
    default (the pinned lane of ``numerics_run_cost.json``: every RL row of today's default, one torch thread)."""
    t, lane = _json("two_commands.json"), _json("numerics_run_cost.json")
    return {"setup_s": thousands(t["setup_fresh_clone_s"]), "ci_s": thousands(t["ci_total_s"]),
            "ci_commit": t["ci_total_recorded_at"],
            "run_s": thousands(lane["lanes"]["pinned"]["wall_s"]), "run_threads": lane["threads_per_lane"],
            "run_commit": lane["commit"][:7], "run_rl_rows": len(lane["lanes"]["pinned"]["rl"])}


def sweep() -> dict[str, Any]:
    """The committed 5-seed sweep (``learning.json``) and the pool's scaling (``sweep_scaling.json``)."""
    learn, scale = _json("learning.json"), _json("sweep_scaling.json")
    counts = {(c["workers"], c["torch_threads_per_cell"]): c["cells_per_hour"] for c in scale["counts"]}
    two, one = counts[(2, 1)], counts[(1, 2)]
    return {"seeds": len(next(iter(learn["methods"].values()))["per_seed"]), "commit": learn["commit"],
            "methods": ", ".join(learn["labels"][m] for m in learn["method_order"]),
            "two_workers": f"{two:.1f}", "one_worker": f"{one:.1f}", "speedup": f"{two / one:.2f}"}


def learning(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The committed multi-seed sweep (``learning.json``): per method and per comparison, the testbed's mechanism
    figures, and whether its seed 0 equals the committed single run (``rows``, rates rounded as in table.csv)."""
    d = _json("learning.json")
    methods = [{"key": m, "label": d["labels"][m], "mean": pct(v["mean"]), "lo": pct(v["ci95"][0]),
                "hi": pct(v["ci95"][1]), "iqm": pct(v["iqm"]), "per_seed": " ".join(pct(x) for x in v["per_seed"])}
               for m in d["method_order"] for v in [d["methods"][m]]]
    comps = {k: {"diff": signed(c["mean_diff"]), "lo": signed(c["ci95"][0]), "hi": signed(c["ci95"][1]),
                 "p": f"{c['prob_improvement']:.2f}", "p_lo": f"{c['prob_improvement_ci95'][0]:.2f}",
                 "p_hi": f"{c['prob_improvement_ci95'][1]:.2f}",
                 "every_seed": all(a > b for a, b in zip(*(d["methods"][m]["per_seed"] for m in k.split("-"))))}
             for k, c in d["comparisons"].items()}
    single = {r["method"]: r["success_rate"] for r in rows}
    mech, rl = d["mechanism"]["seed"], d["setting"]["rl"]
    return {"methods": methods, "comparisons": comps, "by": {m["key"]: m for m in methods},
            "seeds": len(d["setting"]["seeds"]), "episodes": d["setting"]["episodes"], "commit": d["commit"],
            "wall_s": thousands(d["wall_s"]), "cell_min_s": thousands(min(d["cell_wall_s"])),
            "cell_max_s": thousands(max(d["cell_wall_s"])), "threads": d["machine"]["torch_threads"],
            "command": d["command"],
            "seed0_equal": all(round(d["methods"][m]["per_seed"][0], 4) == single.get(m) for m in d["methods"]),
            "cpus": d["machine"]["cpus"], "batch": rl["tasks_per_round"] * rl["group_size"],
            "delta_matched": f"{d['stage1']['skill/delta_matched']:+.4f}",
            "delta_mismatched": f"{d['stage1']['skill/delta_mismatched']:+.4f}",
            "parse": f"{100 * mech['analysis/parse_ok_rate']:.0f}", "distinct": f"{mech['analysis/distinct_skills']:.0f}",
            "teacher": f"{100 * mech['rl/teacher_sample_ratio']:.0f}",
            "gap_success": f"{mech['rl/teacher_gap_success']:.3f}", "gap_failure": f"{mech['rl/teacher_gap_failure']:.3f}",
            "gate_mean": f"{mech['rl/gate_mean']:.2f}", "gate_beta": f"{rl['gate_beta']:g}",
            "opd_coef": f"{rl['opd_coef']:g}"}


def peer_trl() -> dict[str, Any]:
    """One GRPO iteration against TRL's ``GRPOTrainer`` (``benchmarks/peer_trl.py``): its workload and one row per
    prompt length."""
    w = _json("peer_trl.json")["workload"]
    workload = {"model": Path(w["model"]).name, "threads": w["threads"], "prompts": w["prompts"], "group": w["group"],
                "new_tokens": w["max_new_tokens"]}
    rows = []
    for name in ("peer_trl.json", "peer_trl_1024.json"):
        d = _json(name)
        seed, trl = d["seed"], d["trl"]
        rows_per_run = d["workload"]["prompts"] * d["workload"]["group"]
        rows.append({"file": name, "prompt_tokens": thousands(seed["runs"][0]["prompt_tokens"] / rows_per_run),
                     "repeats": d["repeats"], "commit": d["commit"],
                     "seed_s": f"{seed['iteration_wall_s']['median']:.1f}", "trl_s": f"{trl['iteration_wall_s']['median']:.1f}",
                     "wall": f"{d['wall_ratio']:.2f}", "memory": f"{d['memory_ratio']:.2f}",
                     "seed_gb": f"{seed['peak_rss_mb']['median'] / 1024:.2f}",
                     "trl_gb": f"{trl['peak_rss_mb']['median'] / 1024:.2f}",
                     "phases": [f"{seed['phases_s_median'][k]:.1f} / {trl['phases_s_median'][k]:.1f}"
                                for k in ("rollout", "scoring_passes", "update")]})
    return {"workload": workload, "rows": rows}


def _span(values: list[float], fmt: str) -> str:
    """The range of ``values`` in ``fmt`` ('0.5-1.0'; one value alone; '-' when none)."""
    if not values:
        return "-"
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo}-{hi}"


def rehearsals() -> dict[str, Any]:
    """The paper presets' CPU rehearsals (``preset_rehearsal.json``, written by ``seed run --rehearse`` and
    ``scripts/rehearse_campaign.py``): one row per preset, the campaign's commit (``campaign.commit``, written by the
    campaign script) with how many presets passed there, and
    the defects the rehearsals found with their fixes. A row's analysis parse rate and teacher coverage span the
    RL rows that analyse; the log-prob difference is the largest per-token mean over its RL rows."""
    d = _json("preset_rehearsal.json")
    rows = []
    for name, r in sorted(d["presets"].items()):
        rl = r.get("rl_rows", {}).values()
        gaps = sorted(v["rollout/sampling_logp_diff_mean"] for v in rl if "rollout/sampling_logp_diff_mean" in v)
        rows.append({"preset": name, "commit": r["commit"], "outcome": r["outcome"],
                     "minutes": f"{r['seconds'] / 60:.0f}", "stages": len(r.get("stages", {})),
                     "parse": _span([v["analysis/parse_ok_rate"] for v in rl if "analysis/parse_ok_rate" in v], ".2f"),
                     "copied": _span([v["analysis/placeholder_share"] for v in rl if "analysis/placeholder_share" in v],
                                     ".2f"),
                     "coverage": _span([v["rl/teacher_coverage"] for v in rl if "rl/teacher_coverage" in v], ".2f"),
                     "logp": _span(gaps[-1:], ".1e"),
                     "twin": ", ".join(r.get("same_settings_as", [])) or "-",
                     "earlier": len(r.get("earlier_runs", []))})
    campaign = d.get("campaign", {}).get("commit", "-")
    passed = [r["preset"] for r in rows if r["commit"] == campaign and r["outcome"] == "passed"]
    return {"rows": rows, "campaign": campaign, "passed": len(passed), "defects": d.get("defects", [])}


def paper_presets() -> int:
    """How many presets are paper presets (``generation.backend: vllm``: the ones a rehearsal is for)."""
    return sum(yaml.safe_load(p.read_text())["generation"]["backend"] == "vllm"
               for p in sorted((ROOT / "presets").glob("*.yaml")))


def context() -> dict[str, Any]:
    """Everything the templates read: the measurements above and the default's settings (params.yaml)."""
    rows = reference_rows()
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    return {"params": params, "reference": rows,
            "table2": table2(rows), "verdict": verdict_rows(rows), "episodes": rows[0]["episodes"],
            "pre_default": preflight("preflight_default.json"), "pre_lab": preflight("preflight_mechanism.json"),
            "numerics": numerics(), "time": timings(), "sweep": sweep(), "learning": learning(rows),
            "rl_rows": len(_json("numerics_run_cost.json")["lanes"]["pinned"]["rl"]), "peer": peer_trl(),
            "rehearsal": rehearsals(), "paper_presets": paper_presets()}


def render() -> dict[str, str]:
    """Each page's fresh text, keyed by its path relative to the repository root."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)
    ctx = context()
    return {page: env.get_template(name).render(**ctx) for name, page in PAGES.items()}


def main(argv: list[str] | None = None) -> int:
    """Write the pages, or with ``--check`` name each one whose committed text differs from its render."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 when a page differs")
    args = ap.parse_args(argv)
    stale = []
    for page, text in render().items():
        path = ROOT / page
        if path.exists() and path.read_text() == text:
            continue
        if args.check:
            stale.append(page)
        else:
            path.write_text(text)
            print(f"render_docs: wrote {page}")
    for page in stale:
        print(f"render_docs: {page} differs from its render; run `.venv/bin/python scripts/render_docs.py`",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
