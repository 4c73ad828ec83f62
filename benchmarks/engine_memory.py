"""How much memory a CPU vLLM engine holds while a rehearsal runs, measured from outside the run.

docs/gpu.md tells a CPU user how much RAM each engine takes (the annotator stand-in of ``seed run --rehearse``,
the engine an RL row or an evaluation starts); those figures were typed by hand. This watcher samples, every
``--interval`` seconds, each engine the running pipeline launched: a ``seed_core/rollout/vllm_worker.py``
supervisor and all its descendants (the API server, vLLM's engine core, their helpers), and sums their

- PSS (proportional set size: a page shared by k processes counts 1/k in each; the sum is what the engine tree
  adds to the machine, shared libraries split fairly),
- USS (pages only this tree holds: what stopping it frees),
- RSS (every resident page, shared ones in full in each process: the figure ``ps`` and ``top`` show, an
  over-count).

An engine's role is read from its ancestors (``role``): the annotator stand-in, an RL rank, or a stage forked
from the ``flows.warm`` server (collect, evaluate). The result keeps, per role, the largest tree seen
(``*_per_engine``), the largest sum over the role's engines at one sample (``*_all_engines``), the most engines
at once and how many samples saw any; the presets watched; and the machine's used memory (total less available)
at its peak. Sampling reads ``/proc/<pid>/smaps_rollup`` (one read per process per interval, niced), and
memory, unlike wall time, does not depend on the machine's load.

    .venv/bin/python benchmarks/engine_memory.py --out benchmarks/results/engine_memory_rehearsal.json \\
        [--interval 10] [--until-pid PID]    # stops when PID exits (e.g. the campaign), or on Ctrl-C

Writes the JSON after every sample, so a watcher stopped by the machine going away leaves what it saw.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import psutil

WORKER = "vllm_worker.py"
"""The engine supervisor's file: ``seed_core/rollout/vllm_worker.py``, or the copy a stage launches
(``<tmp>/pythonpath/seed_vllm_worker.py``); its descendants are the engine."""
STAGE_MODULES = ("flows.", "seed_core.stages.")
FORK_SERVER = "flows.warm"
"""Stages fork from this server (``flows/warm.py``), so a forked stage shows its command line: not a role."""
GIB = 1024 ** 3


def role(supervisor: psutil.Process) -> str:
    """``annotator-stand-in`` when ``seed run`` itself launched the engine; else the launching stage's module
    (``seed_core.stages.rl``: each launched rank starts its own engine); else ``forked-stage`` for a stage forked
    from ``flows.warm`` (collect, evaluate: a fork keeps the server's command line); else ``other`` (a supervisor
    whose launcher has exited: it is shutting down, a few MiB)."""
    ancestors = supervisor.parents()
    if ancestors and _is_seed_run(ancestors[0].cmdline()):
        return "annotator-stand-in"
    forked = False
    for parent in ancestors:
        args = parent.cmdline()
        module = args[args.index("-m") + 1] if "-m" in args[:-1] else ""
        forked |= module == FORK_SERVER
        if module.startswith(STAGE_MODULES) and module != FORK_SERVER:
            return module
    return "forked-stage" if forked else "other"


def _is_seed_run(args: list[str]) -> bool:
    return any(a.endswith("/seed") or a == "seed" for a in args[:2]) and "run" in args


def preset(supervisor: psutil.Process) -> str:
    """The ``--preset`` of the ``seed run`` above the engine (``""`` when there is none)."""
    for parent in supervisor.parents():
        args = parent.cmdline()
        if _is_seed_run(args) and "--preset" in args[:-1]:
            return Path(args[args.index("--preset") + 1]).stem
    return ""


def tree_memory(supervisor: psutil.Process) -> dict[str, int]:
    """PSS, USS and RSS summed over ``supervisor`` and its descendants (bytes); a process that exits between the
    listing and the read is left out."""
    total = {"pss": 0, "uss": 0, "rss": 0}
    for proc in [supervisor, *supervisor.children(recursive=True)]:
        try:
            info = proc.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for key in total:
            total[key] += getattr(info, key)
    return total


def engines() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        args = proc.info["cmdline"] or []
        if any(a.endswith(WORKER) for a in args) and "--parent-pid" in args:
            found.append(proc)
    return found


def gib(n: float) -> float:
    return round(n / GIB, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--until-pid", type=int, default=0, help="stop when this process exits")
    args = parser.parse_args()
    out = {"what": __doc__.splitlines()[0], "interval_s": args.interval, "cpu_count": os.cpu_count(),
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "load_average_start": [round(x, 2) for x in os.getloadavg()], "samples": 0, "roles": {}, "presets": [],
           "machine_used_gib_max": 0.0, "machine_total_gib": gib(psutil.virtual_memory().total)}
    try:
        while not args.until_pid or psutil.pid_exists(args.until_pid):
            out["samples"] += 1
            vm = psutil.virtual_memory()
            out["machine_used_gib_max"] = max(out["machine_used_gib_max"], gib(vm.total - vm.available))
            now: dict[str, list[dict[str, int]]] = {}
            for sup in engines():
                try:
                    now.setdefault(role(sup), []).append(tree_memory(sup))
                    out["presets"] = sorted({*out["presets"], preset(sup)} - {""})
                except psutil.NoSuchProcess:
                    continue
            for name, trees in now.items():
                seen = out["roles"].setdefault(name, {"samples": 0, "engines_max": 0})
                seen["samples"] += 1
                seen["engines_max"] = max(seen["engines_max"], len(trees))
                for key in ("pss", "uss", "rss"):
                    one, every = f"{key}_gib_max_per_engine", f"{key}_gib_max_all_engines"
                    seen[one] = max(seen.get(one, 0.0), gib(max(t[key] for t in trees)))
                    seen[every] = max(seen.get(every, 0.0), gib(sum(t[key] for t in trees)))
            out["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            out["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
            args.out.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
            time.sleep(args.interval)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
