"""What "imports paid once" would save per DVC stage: one stage process run plainly vs forked from a parent
that imported Prefect, MLflow, torch, transformers and seed_core once (a prototype of a pre-forked stage
server; nothing in the pipeline uses forking yet).

    python benchmarks/pipeline_overhead.py --keep            # a finished copy of the project, path printed
    python benchmarks/stage_fork_probe.py --project /tmp/seed-overhead-XXXX/project [--repeats 3]

Both ways run the same stage (default ``flows.evaluate --method vanilla``) in ``--project`` against the same
temporary Prefect and MLflow servers on that copy's databases, alternately. The forked child runs the stage
module as ``__main__`` (``runpy``) with the stage's argv, then its exit handlers (Prefect's log/event
flush, seed's timing file). Reported: the wall time of each run, the parent's one-off import time, whether
each forked run exited 0, and whether the stage's ``metrics.json`` after a forked run equals the one after a
plain run except wall-clock fields (``time/*``, ``*tokens_per_s``). JSON in benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUIET = {"DO_NOT_TRACK": "true", "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1",
         "TOKENIZERS_PARALLELISM": "false", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "DVC_NO_ANALYTICS": "1"}

FORKED = r'''
import atexit, json, os, runpy, sys, time
project, module, args, repeats = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
os.chdir(project); sys.path.insert(0, project)
t0 = time.perf_counter()
import flows, flows.common, prefect, mlflow, torch, transformers
from prefect.flow_engine import run_flow
from seed_core.loader import load_config
load_config("params.yaml")
import importlib
stage = module.rsplit(".", 1)[1]
for name in (f"tasks.{stage}", f"seed_core.stages.{stage}"):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
out = {"warmup_s": time.perf_counter() - t0, "runs": []}
for _ in range(repeats):
    sys.stdout.flush(); sys.stderr.flush()
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        sys.argv = [os.path.join(project, *module.split(".")) + ".py", *args]
        code = 0
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        atexit._run_exitfuncs()
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    out["runs"].append({"wall_s": time.perf_counter() - t, "exit_status": os.waitstatus_to_exitcode(status)})
print("FORKED_RESULT " + json.dumps(out), flush=True)
'''


def wait_healthy(url: str, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"stage_fork_probe: {url} did not answer within {timeout_s:.0f} s")


def comparable(metrics: dict[str, Any]) -> dict[str, Any]:
    """The metrics without wall-clock fields."""
    return {k: v for k, v in metrics.items() if not k.startswith("time/") and not k.endswith("tokens_per_s")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--project", type=Path, required=True, help="a finished copy (pipeline_overhead.py --keep)")
    parser.add_argument("--module", default="flows.evaluate")
    parser.add_argument("--args", default='["--method", "vanilla"]', help="the stage's arguments, a JSON list")
    parser.add_argument("--metrics", default="data/eval/vanilla/metrics.json", help="the stage's metrics file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "stage_fork_probe.json")
    args = parser.parse_args()
    project = args.project.resolve()
    python = sys.executable
    bin_dir = Path(python).parent
    env = {**os.environ, **QUIET, "PREFECT_HOME": str(project / ".prefect"), "PYTHONPATH": str(project)}
    ports = {"prefect": 4291, "mlflow": 5291}
    servers = [
        subprocess.Popen([str(bin_dir / "prefect"), "server", "start", "--host", "127.0.0.1", "--port",
                          str(ports["prefect"]), "--analytics-off"], env=env, start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([str(bin_dir / "mlflow"), "server", "--backend-store-uri", f"sqlite:///{project}/mlflow.db",
                          "--host", "127.0.0.1", "--port", str(ports["mlflow"]), "--workers", "1",
                          "--default-artifact-root", (project / "mlartifacts").as_uri()], env=env,
                         start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        wait_healthy(f"http://127.0.0.1:{ports['prefect']}/api/health")
        wait_healthy(f"http://127.0.0.1:{ports['mlflow']}/health")
        env |= {"PREFECT_API_URL": f"http://127.0.0.1:{ports['prefect']}/api",
                "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{ports['mlflow']}"}
        stage_args = json.loads(args.args)
        plain: list[float] = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            subprocess.run([python, "-m", args.module, *stage_args], cwd=project, env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            plain.append(time.perf_counter() - t)
        plain_metrics = json.loads((project / args.metrics).read_text())
        t = time.perf_counter()
        done = subprocess.run([python, "-c", FORKED, str(project), args.module, json.dumps(stage_args),
                               str(args.repeats)], cwd=project, env=env, check=True, capture_output=True, text=True)
        parent_wall = time.perf_counter() - t
        forked = json.loads(next(line for line in done.stdout.splitlines()
                                 if line.startswith("FORKED_RESULT "))[len("FORKED_RESULT "):])
        forked_metrics = json.loads((project / args.metrics).read_text())
    finally:
        for proc in servers:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
    forked_walls = [r["wall_s"] for r in forked["runs"]]
    result = {
        "saved_per_stage_s": round(statistics.median(plain) - statistics.median(forked_walls), 2),
        "plain_median_s": round(statistics.median(plain), 2),
        "forked_median_s": round(statistics.median(forked_walls), 2),
        "plain_s": [round(x, 2) for x in plain], "forked_s": [round(x, 2) for x in forked_walls],
        "parent_warmup_s": round(forked["warmup_s"], 2), "parent_wall_s": round(parent_wall, 2),
        "forked_exit_codes": [r["exit_status"] for r in forked["runs"]],
        "same_metrics": comparable(plain_metrics) == comparable(forked_metrics),
        "stage": [args.module, *stage_args], "repeats": args.repeats, "cpus": os.cpu_count(),
        "how": "plain = `python -m <stage>` as DVC runs it; forked = os.fork() of a parent that imported "
               "Prefect, MLflow, torch, transformers, seed_core (config registries, the stage's task and engine "
               "modules) once, the child running the stage module as __main__; same servers, alternately",
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
