"""SEED's extra cost over GRPO, from one run side by side (issue 29 item 3): phases, tokens/s, passes, wall ratio.

    python benchmarks/iteration_cost.py [--config params.yaml] [--set K=V ...] [--base data/models/base]
        [--sft data/sft/checkpoint] [--rounds N] [--compare-rounds 2]
        [--long-config presets/smollm2-sokoban.yaml] [--long-set env.max_steps=10 ...] [--long-rounds 2] [--no-long]
        [--no-default] [--request-order-analysis] [--workspace DIR] [--out benchmarks/results/iteration_cost.json]

For each setting (``default``: the config as given; ``long``: a preset with long episodes) the rounds of
``rl@grpo`` and ``rl@seed`` run interleaved in one process (grpo round i, seed round i, ...), each algorithm
starting where the DAG starts it (``Algorithm.init``: grpo from ``--base``, seed from ``--sft``) and handing its
live state from round to round as ``run_rl`` does, so machine load falls on both alike. Per setting it records:

* ``rounds``: each round's phase split (``time/*`` of curve.csv) per algorithm, and its wall time;
* ``tokens_per_s``: rollout = ``rollout/response_tokens / time/rollout_s``; analysis = the analyses' completion
  tokens (annotations.parquet, retries included) / ``time/analysis_s``;
* ``passes``: the teacher pass against one ordinary log-prob pass, on the very samples of each SEED round: after
  the round (outside its timing) ``score_in_chunks`` is timed on the old rows alone (one ordinary pass: what GRPO
  runs for theta_old and again for the reference) and on the teacher rows alone, with the round's micro-batching;
* ``wall``: the sum of the rounds' wall times per algorithm and ``seed_over_grpo`` (the paper: 1.10x);
* ``identity``: ``--compare-rounds K`` reruns the first K rounds of both algorithms with the batch plans off (each
  row scored and generated as the code before them did: ``unoptimized``) and compares, round by
  round, sha256 of the metrics without the time-derived keys (``time/*``, ``rl/tokens_per_s``), of the round's
  weights (``checkpoint/model.safetensors``), of the annotations without ``latency_s`` and of the trajectories;
  ``identical`` is true when every hash matches. The rerun's analysis and pass times are the speed-up's baseline.

``--base``/``--sft``: a model directory, ``build`` (``prepare_model`` / collect -> annotate -> sft of the setting's
config into the workspace), ``tiny`` (the tiny analyzer model of ``build_tiny_analyzer_model``, a smoke setting)
or, for ``--sft``, ``base`` (the base model). Defaults: the pipeline's ``data/models/base`` and
``data/sft/checkpoint`` when they exist, else ``build``. ``--request-order-analysis``: the analysis batches in
request order (``BackendClient(sort_by_length=False)``) instead of the default length-sorted ones; ``unoptimized``
always runs them in request order, so ``identity`` covers the sorting too.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
ALGORITHMS = ("grpo", "seed")
TIME_DERIVED = ("rl/tokens_per_s",)
"""Metrics computed from a time, left out of the identity hash with every ``time/*`` key."""


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def round_hashes(round_dir: Path) -> dict[str, str]:
    """sha256 of what a round produced, time values left out (the ``identity`` check of the module docstring)."""
    import pandas as pd

    metrics = json.loads((round_dir / "metrics.json").read_text())
    kept = {k: v for k, v in metrics.items() if not k.startswith("time/") and k not in TIME_DERIVED}
    out = {"metrics": _sha(json.dumps(kept, sort_keys=True).encode())}
    weights = round_dir / "checkpoint" / "model.safetensors"
    if weights.is_file():
        out["weights"] = _sha(weights.read_bytes())
    for name, drop in (("annotations", ["latency_s"]), ("trajectories", [])):
        frame = pd.read_parquet(round_dir / f"{name}.parquet")
        out[name] = _sha(frame.drop(columns=[c for c in drop if c in frame]).to_json(orient="records").encode())
    return out


@contextlib.contextmanager
def unoptimized() -> Iterator[None]:
    """The code before the batch plans and the buffered KV cache: every row of a micro-batch scored and of a greedy
    batch generated, every analysis prompt sent in request order (identity plans in ``score_in_chunks``,
    ``HFBackend``, ``BackendClient``), and transformers' own ``DynamicCache`` (``HFBackend.use_buffered_cache``)."""
    from seed_core.analyzer import clients
    from seed_core.rollout import backends
    from seed_core.trainer import logprobs

    def identity(keys: Any, *_: Any) -> tuple[list[int], list[int]]:
        return list(range(len(keys))), list(range(len(keys)))

    saved = logprobs.unique_rows, backends.unique_rows, clients.unique_by_length, backends.HFBackend.use_buffered_cache
    logprobs.unique_rows = backends.unique_rows = clients.unique_by_length = identity
    backends.HFBackend.use_buffered_cache = False
    try:
        with sorted_analysis(False):
            yield
    finally:
        (logprobs.unique_rows, backends.unique_rows, clients.unique_by_length,
         backends.HFBackend.use_buffered_cache) = saved


@contextlib.contextmanager
def sorted_analysis(on: bool | None) -> Iterator[bool]:
    """Every analyzer client's ``BackendClient(sort_by_length=on)``; ``None`` keeps the default (sorted). Yields the
    value in force."""
    from seed_core.analyzer.clients import BackendClient

    defaults = BackendClient.__init__.__kwdefaults__
    saved = defaults["sort_by_length"]
    defaults["sort_by_length"] = saved if on is None else on
    try:
        yield defaults["sort_by_length"]
    finally:
        defaults["sort_by_length"] = saved


class PassCapture:
    """Wraps ``rl_step.compute_reference_logprobs`` to keep each call's samples and scoring settings (``last``)."""

    def __init__(self) -> None:
        from seed_core.trainer import rl_step

        self.rl_step, self.real, self.last = rl_step, rl_step.compute_reference_logprobs, None

    def __enter__(self) -> PassCapture:
        def capture(model: Any, ref: Any, samples: Any, pad_id: int, micro_batch_size: int, needs_teacher: bool,
                    needs_old: bool = True, comm: Any = None, max_tokens: int = 0, share_prefix: bool = False) -> Any:
            self.last = {"samples": samples, "pad_id": pad_id, "micro": micro_batch_size, "max_tokens": max_tokens,
                         "share_prefix": share_prefix}
            return self.real(model, ref, samples, pad_id, micro_batch_size, needs_teacher, needs_old, comm,
                             max_tokens, share_prefix)

        self.rl_step.compute_reference_logprobs = capture
        return self

    def __exit__(self, *exc: Any) -> None:
        self.rl_step.compute_reference_logprobs = self.real


def time_passes(model: Any, captured: dict[str, Any]) -> dict[str, float]:
    """One ordinary log-prob pass (the old rows) and the teacher pass (the teacher rows), each alone, with the
    round's micro-batching: seconds and sequence tokens of each, and ``teacher_over_ordinary`` (None without
    teacher rows)."""
    from seed_core.trainer.logprobs import score_in_chunks

    s = captured["samples"]
    rows = {"ordinary": (s.prompt_ids, s.response_ids),
            "teacher": ([p for p in s.teacher_prompt_ids if p is not None],
                        [r for p, r in zip(s.teacher_prompt_ids, s.response_ids) if p is not None])}
    out: dict[str, float] = {}
    for name, (prompts, responses) in rows.items():
        t0 = time.perf_counter()
        if prompts:
            score_in_chunks(model, prompts, responses, captured["pad_id"], captured["micro"], captured["max_tokens"],
                            share_prefix=captured["share_prefix"])
        out[f"{name}_pass_s"] = time.perf_counter() - t0
        out[f"{name}_rows"] = float(len(prompts))
        out[f"{name}_tokens"] = float(sum(len(p) + len(r) for p, r in zip(prompts, responses)))
    out["teacher_over_ordinary"] = out["teacher_pass_s"] / max(out["ordinary_pass_s"], 1e-9) if rows["teacher"][0] \
        else None  # no skill parsed: no teacher pass
    return out


def analysis_tokens(round_dir: Path) -> float:
    import pandas as pd

    frame = pd.read_parquet(round_dir / "annotations.parquet")
    return float(frame["completion_tokens"].sum()) if len(frame) else 0.0


def run_rounds(cfg: Any, inits: dict[str, Path], out: Path, rounds: int, passes: bool) -> dict[str, Any]:
    """``rounds`` rounds of each algorithm, interleaved (module docstring); per round: phases, wall, tokens/s,
    the hashes of ``round_hashes`` and (``passes``, SEED rounds) ``time_passes``."""
    from seed_core.loader import with_overrides
    from seed_core.lineage.resume import rl_fingerprint
    from seed_core.stages.rl import RoundCarry, round_dir, run_rl_round

    cfgs = {a: with_overrides(cfg, {"rl.algorithm": a, "rl.rounds": rounds}) for a in ALGORITHMS}
    prints = {a: rl_fingerprint(cfgs[a], inits[a]) for a in ALGORITHMS}
    carries = {a: RoundCarry() for a in ALGORITHMS}
    per_round: list[dict[str, Any]] = []
    for i in range(rounds):
        row: dict[str, Any] = {"round": i}
        for algo in ALGORITHMS:
            with PassCapture() as capture:
                t0 = time.perf_counter()
                metrics = run_rl_round(cfgs[algo], i, inits[algo], out / algo, fingerprint=prints[algo],
                                       carry=carries[algo])
                wall = time.perf_counter() - t0
            rd = round_dir(out / algo, i)
            tokens = analysis_tokens(rd)
            phases = {k.removeprefix("time/"): v for k, v in metrics.items() if k.startswith("time/")}
            entry = {"wall_s": wall, **phases,
                     "rollout_tokens": metrics.get("rollout/response_tokens", 0.0), "analysis_tokens": tokens,
                     "rollout_tokens_per_s": metrics.get("rollout/response_tokens", 0.0)
                     / max(metrics["time/rollout_s"], 1e-9),
                     "samples": metrics.get("rl/samples", 0.0),
                     "teacher_sample_ratio": metrics.get("rl/teacher_sample_ratio", 0.0),
                     "parse_ok_rate": metrics.get("analysis/parse_ok_rate", 0.0), "hashes": round_hashes(rd)}
            if tokens:
                entry["analysis_tokens_per_s"] = tokens / max(metrics["time/analysis_s"], 1e-9)
            if passes and algo == "seed" and capture.last is not None:
                entry["passes"] = time_passes(carries[algo].state["policy"].model, capture.last)
            row[algo] = entry
            print(f"{out.name} round {i} {algo}: {wall:.1f} s", file=sys.stderr, flush=True)
        per_round.append(row)
    return {"rounds": per_round}


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """Totals over the rounds: wall per algorithm and their ratio, tokens/s of rollout and analysis, passes."""
    rounds = result["rounds"]

    def total(algo: str, key: str) -> float:
        return sum(r[algo].get(key, 0.0) for r in rounds)

    seed_passes = [r["seed"]["passes"] for r in rounds if "passes" in r["seed"]]
    summary = {
        "wall_s": {a: total(a, "wall_s") for a in ALGORITHMS},
        "seed_over_grpo": total("seed", "wall_s") / max(total("grpo", "wall_s"), 1e-9),
        "phases_s": {a: {k: total(a, k) for k in ("rollout_s", "analysis_s", "logprob_passes_s", "update_s",
                                                   "round_s")} for a in ALGORITHMS},
        "tokens_per_s": {"rollout": total("seed", "rollout_tokens") / max(total("seed", "rollout_s"), 1e-9),
                         "analysis": total("seed", "analysis_tokens") / max(total("seed", "analysis_s"), 1e-9)},
    }
    summary["tokens_per_s"]["analysis_over_rollout"] = (summary["tokens_per_s"]["analysis"]
                                                        / max(summary["tokens_per_s"]["rollout"], 1e-9))
    if seed_passes:
        keys = seed_passes[0].keys() - {"teacher_over_ordinary"}
        passes = {k: sum(p[k] for p in seed_passes) for k in keys}
        passes["teacher_over_ordinary"] = passes["teacher_pass_s"] / max(passes["ordinary_pass_s"], 1e-9) \
            if passes["teacher_rows"] else None
        summary["passes"] = passes
    return summary


def compare(optimized: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """Round-by-round hash comparison (``identity``) and the speed-up of analysis and log-prob passes."""
    mismatches = [f"round {b['round']} {a} {k}" for o, b in zip(optimized["rounds"], baseline["rounds"])
                  for a in ALGORITHMS for k, v in b[a]["hashes"].items() if o[a]["hashes"].get(k) != v]
    n = len(baseline["rounds"])

    def total(result: dict[str, Any], algo: str, key: str) -> float:
        return sum(r[algo].get(key, 0.0) for r in result["rounds"][:n])

    return {
        "method": "round by round, sha256 of metrics.json without time/* and rl/tokens_per_s, of "
                  "checkpoint/model.safetensors, of annotations.parquet without latency_s and of "
                  "trajectories.parquet; the baseline is the same rounds with the batch plans and the buffered KV "
                  "cache off (unoptimized)",
        "rounds_compared": n, "identical": not mismatches, "mismatches": mismatches,
        "baseline_rounds": baseline["rounds"],
        "speedup": {f"{a}_{k}": total(baseline, a, k) / max(total(optimized, a, k), 1e-9)
                    for a, k in (("seed", "analysis_s"), ("seed", "logprob_passes_s"), ("grpo", "logprob_passes_s"),
                                 ("seed", "round_s"), ("grpo", "round_s"))},
    }


def resolve_models(cfg: Any, base: str, sft: str, ws: Path) -> dict[str, Path]:
    """The starting checkpoints of grpo (base) and seed (sft) for ``--base``/``--sft`` (module docstring)."""
    from seed_core.modeling.builders import build_tiny_analyzer_model
    from seed_core.stages.annotate import run_annotate
    from seed_core.stages.collect import run_collect
    from seed_core.stages.prepare_model import run_prepare_model
    from seed_core.stages.sft import run_sft

    if base == "tiny":
        base_dir = build_tiny_analyzer_model(ws / "tiny")
    elif base == "build":
        base_dir = Path(run_prepare_model(cfg, ws / "base")["path"])
    else:
        base_dir = Path(base)
    if sft == "base" or base == "tiny":
        sft_dir = base_dir
    elif sft == "build":
        run_collect(cfg, base_dir, ws / "collect")
        run_annotate(cfg, ws / "collect", ws / "annotate")
        run_sft(cfg, base_dir, ws / "annotate", ws / "sft", collect_dir=ws / "collect")
        sft_dir = ws / "sft" / "checkpoint"
    else:
        sft_dir = Path(sft)
    return {"grpo": base_dir, "seed": sft_dir}


def run_setting(name: str, config: str, sets: list[str], base: str, sft: str, rounds: int, compare_rounds: int,
                ws: Path, sort: bool | None = None) -> dict[str, Any]:
    from seed_core.loader import load_config, parse_overrides

    cfg = load_config(ROOT / config, parse_overrides(sets))  # an absolute config path stays as it is
    inits = resolve_models(cfg, base, sft, ws / name / "models")
    t0 = time.perf_counter()
    with sorted_analysis(sort) as sorted_on:
        result = run_rounds(cfg, inits, ws / name / "optimized", rounds, passes=True)
    result.update(summarize(result))
    if compare_rounds > 0:
        with unoptimized():
            baseline = run_rounds(cfg, inits, ws / name / "baseline", min(compare_rounds, rounds), passes=False)
        result["identity"] = compare(result, baseline)
    result.update({"config": config, "overrides": sets, "inits": {a: str(p) for a, p in inits.items()},
                   "rounds_run": rounds, "bench_wall_s": time.perf_counter() - t0,
                   "sorted_analysis": sorted_on,
                   "batch": {"tasks_per_round": cfg.rl.tasks_per_round, "group_size": cfg.rl.group_size,
                             "max_steps": cfg.env.max_steps, "env": cfg.env.name,
                             "generation_batch_size": cfg.generation.batch_size,
                             "analyzer_max_new_tokens": cfg.rl.analyzer_max_new_tokens,
                             "micro_batch_size": cfg.rl.micro_batch_size}})
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="params.yaml")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--base", default=None, help="grpo's start: a model dir, build or tiny")
    parser.add_argument("--sft", default=None, help="seed's start: a checkpoint dir, build or base")
    parser.add_argument("--rounds", type=int, default=None, help="default: the config's rl.rounds")
    parser.add_argument("--compare-rounds", type=int, default=2, help="rounds rerun unoptimized (0: none)")
    parser.add_argument("--long-config", default="presets/smollm2-sokoban.yaml")
    parser.add_argument("--long-set", action="append", default=None, metavar="KEY=VALUE",
                        help="default: env.max_steps=10 (long episodes)")
    parser.add_argument("--long-base", default="build")
    parser.add_argument("--long-sft", default="build")
    parser.add_argument("--long-rounds", type=int, default=2)
    parser.add_argument("--no-long", action="store_true")
    parser.add_argument("--no-default", action="store_true", help="the long setting alone")
    parser.add_argument("--request-order-analysis", action="store_true",
                        help="analyses in request order (BackendClient sort_by_length=False), not sorted by length")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--workspace", type=Path, default=None, help="default: a new temporary directory")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "iteration_cost.json")
    args = parser.parse_args()

    import seed_core.stages  # noqa: F401  (a stage process's numerics, set before torch loads)
    import torch

    from seed_core.loader import load_config, parse_overrides

    if args.threads:
        torch.set_num_threads(args.threads)
    ws = args.workspace or Path(tempfile.mkdtemp(prefix="seed-iteration-cost-"))
    base = args.base or ("data/models/base" if (ROOT / "data/models/base/config.json").is_file() else "build")
    sft = args.sft or ("data/sft/checkpoint" if (ROOT / "data/sft/checkpoint/config.json").is_file() else "build")
    rounds = args.rounds or load_config(ROOT / args.config, parse_overrides(args.set)).rl.rounds
    load = os.getloadavg()
    out: dict[str, Any] = {"command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), "workspace": str(ws),
                           "paper_seed_over_grpo": 1.10, "settings": {}}
    order = False if args.request_order_analysis else None
    if not args.no_default:
        out["settings"]["default"] = run_setting("default", args.config, args.set, base, sft, rounds,
                                                 args.compare_rounds, ws, order)
    if not args.no_long:
        out["settings"]["long"] = run_setting("long", args.long_config, args.long_set or ["env.max_steps=10"],
                                              args.long_base, args.long_sft, args.long_rounds, 0, ws, order)
    from seed_core.repro.numerics import cpu

    from seed_core.tracking import git_commit

    out["commit"] = git_commit(ROOT)[:7]
    out["machine"] = {"cpus": os.cpu_count(), "cpu_model": cpu()["cpu_model"], "platform": platform.platform(),
                      "torch_threads": torch.get_num_threads(), "loadavg_start": load, "loadavg_end": os.getloadavg()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    brief = {name: {**{k: s[k] for k in ("seed_over_grpo", "tokens_per_s", "passes") if k in s},
                    **({"identity": {k: s["identity"][k] for k in ("identical", "mismatches", "speedup")}}
                       if "identity" in s else {})} for name, s in out["settings"].items()}
    print(json.dumps(brief, indent=2))


if __name__ == "__main__":
    main()
