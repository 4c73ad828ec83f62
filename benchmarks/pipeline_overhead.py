"""Pipeline overhead: how much of a `seed run` is the engine, and where the rest goes; then no-op reruns.

    python benchmarks/pipeline_overhead.py                      # the embedded default (params.yaml)
    python benchmarks/pipeline_overhead.py --small              # SMALL below: a few minutes on 2 cores
    python benchmarks/pipeline_overhead.py -S rl.rounds=2 --out benchmarks/results/x.json

The project is copied into a fresh temporary directory (the files git tracks plus untracked ones it does not
ignore, as they are in the working tree, then committed into a new repository there), so the run has its own
DVC cache, MLflow store (``mlflow.db``, ``mlartifacts/``) and ``PREFECT_HOME``, and nothing is cached from
an earlier run. Overrides are written into that copy's ``params.yaml`` and committed, so both runs are a
plain ``seed run`` (``dvc repro``): the first runs every stage, the next three find nothing to do. Before them,
``seed init`` creates the copy's empty Prefect database and MLflow tables, as ``scripts/setup.sh`` does once
per clone (timed: ``init_stores_s``); ``--fresh-stores`` skips it, and the first run's servers create them.

Each process records its timing (``seed_core.runtime.timing``, switched on by ``$SEED_TIMING_DIR``): the OS start
time, when its imports were done, when the stage's flow body began, exclusive seconds in the ``engine``
(the seed_core stage functions), ``imports`` (stage modules imported lazily by tasks: torch,
transformers), ``mlflow`` (stage run opened and closed, checkpoints registered) and ``prefect`` spans,
and its exit. Per stage the wall time splits into:

* ``dvc_before_s``: from the previous stage process's exit (or ``dvc repro``'s start) to this process's
  start: DVC saving the previous outputs (hashing, cache), checking this stage, removing its outputs.
* ``start_imports_s``: interpreter start and the module imports of ``flows.<stage>`` (Prefect, MLflow).
* ``config_s``: loading and validating the config; the registries it checks import torch and transformers,
  which the stage's engine would import otherwise (so moving them elsewhere would not shorten the run).
* ``prefect_s``: flow-run start (a temporary Prefect server when none is configured), seed's Prefect
  API calls, and the flow-run end plus interpreter exit.
* ``mlflow_s``, ``lazy_imports_s``, ``engine_s``: the spans above.
* ``flow_other_s``: the rest of the flow body: Prefect task runs around the engine calls, per-round MLflow
  runs and metric logging done by the flow, config loading.

``disk_written_gb`` is the bytes the run made the kernel write to storage (``write_bytes`` of
``/proc/self/io`` of this script, which includes every descendant process once it is reaped; the script
makes itself a child subreaper so that orphaned daemons are reaped and counted too). ``left_on_disk_gb`` is
``du`` of the copy's ``data/``, ``.dvc/cache`` and ``mlartifacts/`` afterwards.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SMALL: dict[str, Any] = {
    "testbed.episodes": 30, "testbed.epochs": 1, "collect.num_tasks": 4, "sft.epochs": 1,
    "rl.rounds": 1, "rl.tasks_per_round": 2, "rl.group_size": 4, "eval.num_tasks": 8,
}
"""Every stage of the default with a sliver of its work (minutes on 2 cores): the fixed costs per stage
(process start, imports, Prefect, MLflow, DVC) are then most of the wall time."""
NOOP_REPEATS = 3
"""No-op reruns after the run; ``noop_s`` is their median (one ~4 s sample varies by a second on 2 shared cores)."""
QUIET = {"DO_NOT_TRACK": "true", "MLFLOW_DISABLE_TELEMETRY": "true", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
         "DVC_NO_ANALYTICS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
         "TOKENIZERS_PARALLELISM": "false", "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180"}
CLEARED = ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "DVC_STAGE", "SEED_PARENT_RUN_ID",
           "SEED_PIPELINE_FLOW_RUN_ID", "PYTHONPATH")


def set_key(params: dict[str, Any], dotted: str, value: Any) -> None:
    """``params["rl"]["rounds"] = value`` for ``"rl.rounds"``; an unknown key is an error (as in ``seed run``)."""
    node = params
    *parents, last = dotted.split(".")
    for key in parents:
        if not isinstance(node.get(key), dict):
            raise SystemExit(f"pipeline_overhead: unknown params key {dotted!r}")
        node = node[key]
    if last not in node:
        raise SystemExit(f"pipeline_overhead: unknown params key {dotted!r}")
    node[last] = value


def copy_project(dest: Path, overrides: dict[str, Any], preset: Path | None) -> None:
    """The working tree's files (tracked + untracked, not ignored) into ``dest``, committed as a new repo."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    params_path = dest / "params.yaml"
    params = yaml.safe_load((preset or params_path).read_text())
    for key, value in overrides.items():
        set_key(params, key, value)
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run([*git, "commit", "-qm", "pipeline_overhead snapshot"], cwd=dest, check=True)


def timing_now() -> float:
    """The clock of ``seed_core.runtime.timing.now`` (boot-based, shared with the OS process start times)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def write_bytes() -> int:
    """Storage writes of this process and its reaped descendants (``/proc/self/io``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    raise RuntimeError("no write_bytes in /proc/self/io")


def become_subreaper() -> None:
    """Orphaned descendants (a daemon whose parent exited) are re-parented to this process, so that their
    I/O is counted when reaped (Linux prctl PR_SET_CHILD_SUBREAPER)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)


def reap_orphans() -> list[int]:
    """Reap exited re-parented descendants; returns the PIDs of descendants still alive (leaked processes)."""
    import psutil

    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    return [p.pid for p in psutil.Process().children(recursive=True)]


def du_gb(path: Path) -> float:
    if not path.exists():
        return 0.0
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True).stdout
    return round(int(out.split()[0]) / 1e9, 4)


def seed_env(copy: Path, timing_dir: Path | None = None) -> dict[str, str]:
    """The environment of a ``seed`` command in the copy (its own stores; timing records into ``timing_dir``)."""
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env |= QUIET | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
                    "PYTHONPATH": str(copy), "PREFECT_HOME": str(copy / ".prefect"),
                    "DVC_SITE_CACHE_DIR": str(copy / ".dvc" / "tmp" / "site-cache")}
    return env | ({"SEED_TIMING_DIR": str(timing_dir)} if timing_dir else {})


def init_stores(copy: Path) -> float:
    """``seed init`` in the copy (what ``scripts/setup.sh`` does once per clone): its wall seconds."""
    t0 = timing_now()
    subprocess.run([sys.executable, "-m", "seed_app.cli", "init"], cwd=copy, env=seed_env(copy), check=True,
                   capture_output=True)
    return round(timing_now() - t0, 2)


def run_seed(copy: Path, timing_dir: Path) -> dict[str, Any]:
    """``seed run`` in the copy; wall time, exit code, storage writes, leaked processes."""
    env = seed_env(copy, timing_dir)
    before = write_bytes()
    t0 = timing_now()
    proc = subprocess.run([sys.executable, "-m", "seed_app.cli", "run"], cwd=copy, env=env, capture_output=True,
                          text=True)
    t1 = timing_now()
    leaked = reap_orphans()
    (timing_dir / "seed_run.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    run = {"start": t0, "end": t1, "wall_s": round(t1 - t0, 2), "returncode": proc.returncode,
           "write_bytes": write_bytes() - before, "leaked_pids": leaked, "stdout_tail": proc.stdout[-1500:]}
    (timing_dir / "run.txt").write_text(json.dumps(run))  # .txt: not a timing record
    return run


def load_records(timing_dir: Path) -> list[dict[str, Any]]:
    records = [json.loads(p.read_text()) for p in sorted(timing_dir.glob("*.json"))]
    return sorted(records, key=lambda r: r["process_start"])


def stage_split(record: dict[str, Any], previous_end: float) -> dict[str, float]:
    """One stage process's wall time by where it went (see the module docstring); seconds."""
    marks, spans = record["marks"], record.get("spans_s", {})
    start, end = record["process_start"], record["exit"]
    imports_done = marks.get("imports_done", start)
    config_loaded = marks.get("config_loaded", imports_done)
    if "flow_body" in marks:
        body_start, body_end = marks["flow_body"], marks.get("stage_run_end", end)
    else:  # a flow that opened no stage run (generate_alfworld off ALFWorld): all after the imports is Prefect
        body_start = body_end = end
    engine, lazy, mlflow, prefect_api = (spans.get(k, 0.0) for k in ("engine", "imports", "mlflow", "prefect"))
    out = {"dvc_before_s": start - previous_end, "start_imports_s": imports_done - start,
           "config_s": config_loaded - imports_done,
           "prefect_s": (body_start - config_loaded) + prefect_api + (end - body_end), "mlflow_s": mlflow,
           "lazy_imports_s": lazy, "engine_s": engine,
           "flow_other_s": (body_end - body_start) - engine - lazy - mlflow - prefect_api}
    out["process_s"] = end - start
    return {k: round(v, 3) for k, v in out.items()}


def split(records: list[dict[str, Any]], run: dict[str, Any]) -> dict[str, Any]:
    """Per-stage splits, the seed run process's own phases, totals and the share outside the engine."""
    top = next((r for r in records if "cli_run" in r["marks"] or "dvc_start" in r["marks"]), None)
    stages = [r for r in records if "imports_done" in r["marks"]]  # a stage module's __main__ reached parse_args
    # a no-op `seed run` starts no DVC process: its whole wall time is before_dvc_s
    dvc_start = top["marks"].get("dvc_start", run["end"]) if top else run["start"]
    dvc_end = top["marks"].get("dvc_end", dvc_start) if top else run["end"]
    per_stage, previous_end = [], dvc_start
    for record in stages:
        per_stage.append({"stage": record["label"], **stage_split(record, previous_end)})
        previous_end = record["exit"]
    keys = ("dvc_before_s", "start_imports_s", "config_s", "prefect_s", "mlflow_s", "lazy_imports_s", "engine_s",
            "flow_other_s")
    totals = {k: round(sum(s[k] for s in per_stage), 2) for k in keys}
    wall = run["end"] - run["start"]
    seed_run: dict[str, float] = {"before_dvc_s": round(dvc_start - run["start"], 2),
                                  "dvc_after_last_stage_s": round(dvc_end - previous_end, 2),
                                  "after_dvc_s": round(run["end"] - dvc_end, 2)}
    detail: dict[str, float] = {}  # parts of before_dvc_s
    if top:
        marks = top["marks"]
        cli = marks.get("cli_run", dvc_start)
        detail["process_start_to_cli_s"] = round(cli - top["process_start"], 2)
        if "servers_up" in marks:  # the run's temporary Prefect and MLflow servers, started side by side
            detail["cli_to_servers_up_s"] = round(marks["servers_up"] - cli, 2)
    engine = totals["engine_s"]
    return {"wall_s": round(wall, 2), "engine_s": engine, "overhead_s": round(wall - engine, 2),
            "overhead_share": round(1 - engine / wall, 4) if wall else None,
            "split_s": {**totals, **seed_run}, "before_dvc_detail_s": detail, "stages": per_stage}


def git_rev() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + ("+dirty" if dirty else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", "-S", action="append", default=[], metavar="KEY=VALUE", help="a params override")
    parser.add_argument("--preset", type=Path, help="a params file (presets/...) instead of params.yaml")
    parser.add_argument("--small", action="store_true", help=f"apply {SMALL}")
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/pipeline_overhead[_small].json")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy (its path is printed)")
    parser.add_argument("--fresh-stores", action="store_true",
                        help="skip `seed init` in the copy: the run's servers create the Prefect and MLflow stores")
    args = parser.parse_args()
    overrides = dict(SMALL) if args.small else {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = yaml.safe_load(value)
    out = args.out or ROOT / "benchmarks" / "results" / f"pipeline_overhead{'_small' if args.small else ''}.json"

    become_subreaper()
    work = Path(tempfile.mkdtemp(prefix="seed-overhead-"))
    copy = work / "project"
    copy.mkdir()
    copy_project(copy, overrides, args.preset)
    init_s = None if args.fresh_stores else init_stores(copy)
    results: dict[str, Any] = {}
    for phase in ("run", *(f"noop-{i}" for i in range(1, NOOP_REPEATS + 1))):
        timing_dir = work / f"timing-{phase}"
        timing_dir.mkdir()
        run = run_seed(copy, timing_dir)
        print(f"pipeline_overhead: {phase}: {run['wall_s']} s, exit {run['returncode']}", flush=True)
        if run["returncode"] != 0:
            raise SystemExit(f"seed run failed (exit {run['returncode']}); log: {timing_dir / 'seed_run.log'}")
        results[phase] = {**run, **split(load_records(timing_dir), run)}
    full, noops = results["run"], [results[f"noop-{i}"] for i in range(1, NOOP_REPEATS + 1)]
    noop = sorted(noops, key=lambda r: r["wall_s"])[len(noops) // 2]  # the median one
    report = {
        "overhead_share": full["overhead_share"], "noop_s": noop["wall_s"],
        "noop_samples_s": [r["wall_s"] for r in noops],
        "disk_written_gb": round(full["write_bytes"] / 1e9, 3),
        "init_stores_s": init_s,
        "overhead_share_with_init": None if init_s is None else
        round((full["overhead_s"] + init_s) / (full["wall_s"] + init_s), 4),
        "wall_s": full["wall_s"], "engine_s": full["engine_s"], "overhead_s": full["overhead_s"],
        "split_s": full["split_s"], "before_dvc_detail_s": full["before_dvc_detail_s"], "stages": full["stages"],
        "noop": {"wall_s": noop["wall_s"], "split_s": noop["split_s"], "stages": noop["stages"],
                 "disk_written_gb": round(noop["write_bytes"] / 1e9, 4), "stdout_tail": noop["stdout_tail"]},
        "left_on_disk_gb": {name: du_gb(copy / name) for name in ("data", ".dvc/cache", "mlartifacts", ".prefect")},
        "leaked_pids": full["leaked_pids"] + [pid for r in noops for pid in r["leaked_pids"]],
        "dvc_cache_type": subprocess.run([sys.executable, "-m", "dvc", "config", "cache.type"], cwd=copy,
                                         capture_output=True, text=True).stdout.strip() or "default (reflink,copy)",
        "config": {"params": str(args.preset or "params.yaml"), "overrides": overrides},
        "commit": git_rev(), "cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg(),
        "how": "wall from this script; engine = seed_core.runtime.timing 'engine' spans summed over stage processes; "
               "disk_written_gb = write_bytes of /proc/self/io over the run (all descendants, reaped); "
               "see the module docstring for the split; the copy's Prefect and MLflow stores were created before "
               "the run by `seed init` (init_stores_s, as scripts/setup.sh does once per clone; "
               "overhead_share_with_init counts it as overhead of the run) unless init_stores_s is null "
               "(--fresh-stores: the run's servers created them)",
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("overhead_share", "noop_s", "disk_written_gb", "wall_s", "split_s")},
                     indent=2))
    if args.keep:
        print(f"pipeline_overhead: kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
