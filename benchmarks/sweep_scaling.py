"""Cells per hour of ``seed sweep --pool`` with 1 and with 2 local workers, side by side in one run.

    python benchmarks/sweep_scaling.py [--project DIR] [--params FILE] [--seeds 4] [--workers 1 2]
                                       [--out benchmarks/results/sweep_scaling.json]

In a scratch ``git clone`` of ``--project`` (its committed state; DVC cache shared with the project, so
``data/models/base`` is checked out, not rebuilt, when the committed ``dvc.lock`` is current) with ``--params``
(default: the clone's ``params.yaml``, the embedded default), one Prefect server and one sqlite MLflow store in the
scratch directory; ``dvc repro prepare_model`` runs first, untimed. For each worker count W (``--workers``, in that order): W ``seed worker``s in the clone, each with
``cores // W`` torch threads, then ``seed sweep --pool --seeds N`` on fresh cells (``data/sweep_pool`` emptied), the
workers stopped after it. Per count: the sweep's wall time, ``cells_per_hour = N / wall * 3600``, each cell's own
wall time (``cell_wall_s``) and the load average before and after; the machine (CPU model, cores). Run it on a
quiet machine: the 1-minute load average before each count says how quiet it was.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def scratch_clone(project: Path, dest: Path, params: Path | None, env: dict[str, str]) -> Path:
    """``git clone`` of ``project`` at ``dest`` sharing its DVC cache, with ``params`` as its params.yaml, committed."""
    subprocess.run(["git", "clone", "-q", str(project), str(dest)], check=True, env=env)
    subprocess.run(["dvc", "cache", "dir", "--local", str(project / ".dvc" / "cache")], cwd=dest, check=True, env=env)
    if params is not None:
        shutil.copy(params, dest / "params.yaml")
        subprocess.run(["git", "commit", "-qam", "benchmark params"], cwd=dest, check=True, env=env)
    subprocess.run(["dvc", "checkout", "-q", "data/models/base"], cwd=dest, env=env)  # absent or stale: rebuilt later
    return dest


def stop_group(proc: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """SIGTERM ``proc``'s process group (its own session), SIGKILL after ``timeout_s``."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_count(clone: Path, workers: int, seeds: int, env: dict[str, str], logs: Path) -> dict[str, object]:
    """One worker count: W workers, one pooled sweep on fresh cells; its measurements."""
    pool, cores = f"bench-{workers}", os.cpu_count() or 1
    threads = max(1, cores // workers)
    shutil.rmtree(clone / "data" / "sweep_pool", ignore_errors=True)
    procs = []
    for i in range(workers):
        with open(logs / f"{pool}-worker-{i}.log", "wb") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "seed_app.cli", "worker", "--pool", pool, "--threads", str(threads), "--name",
                 f"{pool}-{i}"], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    load_before = os.getloadavg()
    start = time.perf_counter()
    try:
        with open(logs / f"{pool}-sweep.log", "wb") as log:
            subprocess.run([sys.executable, "-m", "seed_app.cli", "sweep", "--seeds", str(seeds), "--pool", pool],
                           cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
        wall = time.perf_counter() - start
    finally:
        for proc in procs:
            stop_group(proc)
    learning = json.loads((clone / "reports" / "sweep" / "learning.json").read_text())
    return {"workers": workers, "torch_threads_per_cell": threads, "seeds": seeds, "wall_s": wall,
            "cells_per_hour": seeds / wall * 3600, "cell_wall_s": learning["cell_wall_s"],
            "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg()),
            "success_means": {m: s["mean"] for m, s in learning["methods"].items()}}


def main() -> None:
    from flows import servers
    from seed_core.repro.numerics import cpu

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", type=Path, default=ROOT)
    parser.add_argument("--params", type=Path, default=None, help="params file of the sweep (default: the clone's)")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "sweep_scaling.json")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="sweep_scaling-"))
    env = {**os.environ, "PREFECT_HOME": str(scratch / "prefect"), "MLFLOW_TRACKING_URI":
           f"sqlite:///{scratch / 'mlflow.db'}", "DVC_NO_ANALYTICS": "1", "DO_NOT_TRACK": "true",
           "MLFLOW_DISABLE_TELEMETRY": "true", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           **{k: os.environ.get(k, "bench") for k in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME")},
           **{k: os.environ.get(k, "bench@localhost") for k in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL")}}
    env.pop("PREFECT_API_URL", None)
    clone = scratch_clone(args.project.resolve(), scratch / "project", args.params, env)
    with open(scratch / "prepare_model.log", "wb") as log:  # untimed: the first count must not pay for it
        subprocess.run(["dvc", "repro", "prepare_model"], cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT,
                       check=True)
    name = f"prefect-bench-{os.getpid()}"
    command, health, url = servers.prefect_server()
    server = servers.start(name, command, health, env=env)
    env["PREFECT_API_URL"] = f"{url}/api"
    try:
        counts = [run_count(clone, w, args.seeds, env, scratch) for w in args.workers]
    finally:
        servers.stop(name, server)
    out = {"what": "cells per hour of `seed sweep --pool` with W local workers (cores split between them), one run",
           "params": str(args.params or "params.yaml"),
           "machine": {"cpu_model": cpu()["cpu_model"], "cores": os.cpu_count(), "platform": platform.platform()},
           "counts": counts, "logs": str(scratch)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({c["workers"]: round(c["cells_per_hour"], 2) for c in counts}), f"-> {args.out}")


if __name__ == "__main__":
    main()
