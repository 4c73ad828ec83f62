"""Stage-1 annotation throughput by concurrency, and retry behaviour, against the loopback fault server.

    python benchmarks/annotation_throughput.py [--latency 0.2] [--levels 1 8 32] [--out FILE.json]

Each level runs the whole stage (``run_annotate``: cache, worker threads, the real ``openai`` client,
parsing) on fresh synthetic Sokoban trajectories against a server process (``tests/faults/openai_server``,
so it does not share the client's GIL) that answers every call after a fixed latency; ideal throughput is
``concurrency / latency``. Then the retry behaviour: one scripted fault per kind (calls and seconds until
the answer arrives) and a full run with 20% random faults at the middle concurrency level.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator
from seed_core.loader import with_overrides

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the fault server lives in tests/faults (a test helper, not an installed package)


@contextmanager
def server_process(latency: float, fault_rate: float = 0.0, hang: float = 3.0) -> Iterator[str]:
    """Start ``python -m tests.faults.openai_server`` and yield its base URL; stop it by its pid."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.faults.openai_server", "--latency", str(latency),
                             "--fault-rate", str(fault_rate), "--hang", str(hang)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        os.environ["OPENAI_BASE_URL"] = url
        yield url
    finally:
        proc.kill()
        proc.wait()


def server_stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/_stats", timeout=10) as response:
        return json.loads(response.read())


def stage_run(cfg: Any, url: str, n: int, tmp: Path) -> dict[str, Any]:
    """One Stage-1 run on ``n`` fresh trajectories: wall time, throughput, calls, latency percentiles."""
    from seed_core.stages.annotate import run_annotate
    from seed_core.runtime.io import read_records
    from seed_core.types import AnnotationRecord
    from tests.faults.helpers import write_collect

    collect, out = Path(tempfile.mkdtemp(dir=tmp)), Path(tempfile.mkdtemp(dir=tmp))
    write_collect(collect, n)
    before = server_stats(url)
    t0 = time.perf_counter()
    metrics = run_annotate(cfg, collect, out)
    wall = time.perf_counter() - t0
    after = server_stats(url)
    latencies = sorted(a.latency_s for a in read_records(out / "annotations.parquet", AnnotationRecord))
    kinds = {k: v - before["kinds"].get(k, 0) for k, v in after["kinds"].items() if v - before["kinds"].get(k, 0)}
    return {
        "trajectories": n, "wall_s": round(wall, 3), "traj_per_s": round(n / wall, 2),
        "ok": int(metrics["annotate/ok"]), "failed": int(metrics["annotate/failed"]),
        "chat_calls": after["chat_calls"] - before["chat_calls"], "server_max_in_flight": after["max_in_flight"],
        "annotation_latency_p50_s": round(statistics.median(latencies), 3),  # all calls of one trajectory
        "annotation_latency_p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 3), "reply_kinds": kinds,
    }


def one_fault_each(cfg: Any) -> dict[str, dict[str, Any]]:
    """Per fault kind: one trajectory through the stage's loop (client retries + parse re-ask) against a
    server that injects the fault once, then answers: calls and seconds until the annotation is usable."""
    from seed_core.analyzer.annotate import annotate_trajectories
    from seed_core.analyzer.clients import CLIENTS
    from seed_core.envs import make_env
    from seed_core.rollout.collector import group_by_trajectory
    from tests.faults import openai_server as fs
    from tests.faults.helpers import make_collect

    tasks, steps = make_collect(1)
    out = {}
    for kind, reply in fs.default_faults(hang_s=3.0).items():
        with fs.FaultServer(fs.scripted([reply])) as server:
            os.environ["OPENAI_BASE_URL"] = server.base_url
            client = CLIENTS.get("openai")(cfg)
            t0 = time.perf_counter()
            (record,) = annotate_trajectories(group_by_trajectory(steps), {t.task_id: t for t in tasks}, client,
                                              parse_attempts=cfg.annotate.parse_attempts, policy_version="base",
                                              env=make_env(cfg.env))
            out[kind] = {"calls": len(server.chat_calls()), "seconds": round(time.perf_counter() - t0, 3),
                         "annotated": record.ok}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.2, help="fixed server latency per call (s)")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 8, 32], help="annotate.concurrency values")
    parser.add_argument("--per-worker", type=int, default=12, help="trajectories per level = this x concurrency")
    parser.add_argument("--fault-rate", type=float, default=0.2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["OPENAI_API_KEY"] = "sk-bench"

    from seed_core.config import SeedConfig

    tmp = Path(tempfile.mkdtemp(prefix="seed-annotate-bench-"))
    base = with_overrides(SeedConfig(), {"annotate.client": "openai", "annotate.model": "fake-model",
                                        "annotate.timeout_s": 1.0, "annotate.max_retries": 5})
    result: dict[str, Any] = {"latency_s": args.latency, "cpus": os.cpu_count(), "levels": []}
    with server_process(args.latency) as url:
        stage_run(with_overrides(base, {"annotate.concurrency": 1}), url, 2, tmp)  # warm-up: imports, first client
        for level in args.levels:
            row = {"concurrency": level,
                   **stage_run(with_overrides(base, {"annotate.concurrency": level}), url, args.per_worker * level, tmp)}
            row["ideal_traj_per_s"] = round(level / args.latency, 2)
            row["efficiency"] = round(row["traj_per_s"] / row["ideal_traj_per_s"], 3)
            result["levels"].append(row)
            print(json.dumps(row), file=sys.stderr)
    result["one_fault_then_ok"] = one_fault_each(base)
    middle = sorted(args.levels)[len(args.levels) // 2]
    with server_process(args.latency, fault_rate=args.fault_rate) as url:
        cfg = with_overrides(base, {"annotate.concurrency": middle})
        result["random_faults"] = {"rate": args.fault_rate, "concurrency": middle,
                                   **stage_run(cfg, url, args.per_worker * middle, tmp)}
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
