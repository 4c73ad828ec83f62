"""How long a CPU vLLM engine takes to start, with vLLM's default ahead-of-time compilation and with
``seed_core.rollout.vllm_launch.CPU_ENGINE_ENV`` (AOT off), each against its own empty compile cache.

Per variant, three starts of seed's own engine (``LaunchSpec`` + ``Engine.launch``, the CPU scheduler flags):
the first with an empty cache, the second of the same directory, the third of a copy of the model in another
directory (every RL round and evaluation serves another checkpoint directory). After each start, one request of
8 prompts x 64 tokens (``ignore_eos``) measures generation, so a faster start that generated slower would show.
Each start's log is searched for vLLM's "Compiling model again due to a load failure".

    .venv/bin/python benchmarks/vllm_cpu_startup.py   # needs .venv-vllm (scripts/setup_vllm.sh --cpu); ~10 min

Writes ``benchmarks/results/vllm_cpu_startup.json``. Run it alone: it measures wall time on a shared machine.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seed_core.modeling.builders import prepare_smollm2  # noqa: E402
from seed_core.rollout.vllm_engine import SERVED_NAME, Engine, LaunchSpec  # noqa: E402
from seed_core.rollout.vllm_launch import CPU_ENGINE_ENV, cpu_scheduler_args  # noqa: E402

VARIANTS = {"vllm_default_aot": {"VLLM_USE_AOT_COMPILE": "1"}, "seed_cpu_engine_env": CPU_ENGINE_ENV}
MAX_MODEL_LEN = 4096
LOAD_FAILURE = "Compiling model again due to a load failure"


def one_start(model: Path, env: dict[str, str], log_dir: Path) -> dict[str, float | bool]:
    spec = LaunchSpec(python=ROOT / ".venv-vllm" / "bin" / "python", model=model, dtype="float32",
                      tensor_parallel_size=1, gpu_memory_utilization=0.9, max_model_len=MAX_MODEL_LEN,
                      startup_timeout_s=1800, extra_args=cpu_scheduler_args(MAX_MODEL_LEN, ()),
                      env=tuple(env.items()))
    t0 = time.perf_counter()
    engine = Engine.launch(spec, log_dir)
    started = time.perf_counter() - t0
    try:
        t1 = time.perf_counter()
        engine.complete({"model": SERVED_NAME, "prompt": [f"Task {i}: go to the" for i in range(8)],
                         "max_tokens": 64, "ignore_eos": True, "temperature": 1.0, "seed": 0})
        generate = time.perf_counter() - t1
    finally:
        engine.stop()
    log = engine.log_path.read_text(errors="replace") if engine.log_path else ""
    return {"startup_s": round(started, 1), "generate_8x64_s": round(generate, 2),
            "compile_cache_load_failed": LOAD_FAILURE in log}


def main() -> None:
    for name in VARIANTS:
        os.environ.pop(next(iter(VARIANTS[name])), None)
    model = prepare_smollm2(ROOT / "models" / "smollm2-135m-instruct")
    out: dict[str, object] = {"load_average_before": [round(x, 2) for x in os.getloadavg()],
                              "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
                              "model": model.name, "variants": {}}
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "another-checkpoint"
        shutil.copytree(model, copy)
        for name, env in VARIANTS.items():
            os.environ["VLLM_CACHE_ROOT"] = str(Path(tmp) / f"cache-{name}")
            starts = {}
            for label, path in (("cold_cache", model), ("same_directory", model), ("another_directory", copy)):
                starts[label] = one_start(path, env, Path(tmp) / f"logs-{name}")
                print(name, label, starts[label], flush=True)
            out["variants"][name] = {"env": env, "starts": starts}  # type: ignore[index]
    base, ours = (out["variants"][n]["starts"] for n in VARIANTS)  # type: ignore[index]
    out["warm_start_ratio_default_over_seed"] = round(base["another_directory"]["startup_s"]
                                                      / ours["another_directory"]["startup_s"], 2)
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    path = ROOT / "benchmarks" / "results" / "vllm_cpu_startup.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
