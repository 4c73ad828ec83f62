"""benchmarks/gpu_check.py runs end to end on CPU (so the GPU check script is exercised without a GPU)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_benchmark_runs_on_cpu_and_writes_its_json(tiny_model_dir, tmp_path):
    out = tmp_path / "gpu_check.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--model", str(tiny_model_dir),
           "--device", "cpu", "--backends", "hf,nope", "--prompts", "3", "--new-tokens", "8", "--train-batch", "2",
           "--train-len", "32", "--train-steps", "1", "--skip-iteration", "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    hf = result["rollout"]["hf"]
    assert 0 < hf["generated_tokens"] <= 3 * 8 and hf["tokens_per_s"] > 0
    assert "nope" in result["rollout"]["nope"]["error"]  # an unusable backend is reported, the check goes on
    trainer = result["trainer"]
    assert trainer["tokens_per_s"] > 0 and trainer["params"] > 0
    assert trainer["mfu"] is None and trainer["peak_memory_gb"] is None  # no known peak FLOP/s on CPU
