"""benchmarks/gpu_check.py runs end to end on CPU (so the GPU check script is exercised without a GPU), and
scripts/gpu_check_image.sh (the check on the lent machine's image) keeps its skip lines and its offline wheel install."""

import json
import os
import re
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


# scripts/gpu_check_image.sh: the GPU check on the lent machine's image (no network, no vLLM/orchestration stack)
IMAGE_SCRIPT = ROOT / "scripts" / "gpu_check_image.sh"
WHEELS_SCRIPT = ROOT / "scripts" / "gpu_wheels.sh"


def _command_lines(path: Path) -> list[str]:
    """The script's lines without comments, continuation lines joined."""
    text = path.read_text().replace("\\\n", " ")
    return [line.split(" # ")[0] for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_the_image_check_says_what_it_skips_in_one_line_each():
    lines = _command_lines(IMAGE_SCRIPT)
    for name, module in [("vLLM", "vllm"), ("Prefect", "prefect"), ("MLflow", "mlflow"), ("DVC", "dvc")]:
        said = [line for line in lines if f'say "skipped: {name} (not importable' in line]
        assert len(said) == 1, f"one skip line for {name}"
        if module != "vllm":
            assert said[0].lstrip().startswith(f"has {module} ||"), said[0]
    assert any("has vllm" in line for line in lines)
    assert any('say "no CUDA device visible: CPU fallback' in line for line in lines)
    assert any('say "skipped: the gpu tests (pytest not importable' in line for line in lines)
    # the CPU fallback never writes over a GPU result
    targets = re.findall(r'\bjson="?([^";\s]+)', "\n".join(lines))
    assert targets.count("benchmarks/results/gpu_check.json") == 1, targets
    assert len(targets) > 1 and all(t.endswith("/gpu_check_cpu_fallback.json") for t in targets
                                    if t != "benchmarks/results/gpu_check.json"), targets


def test_the_image_check_installs_the_carried_wheels_offline():
    lines = _command_lines(IMAGE_SCRIPT)
    installs = [line for line in lines if "pip install" in line]
    assert len(installs) == 1 and "--no-index" in installs[0] and "--target" in installs[0], installs
    for line in lines:
        assert "pip download" not in line and "--index-url" not in line and "setup_gpu.sh" not in line, line
        assert ".venv/" not in line, "the image has no .venv: the check runs with its python3"
    assert any("timeout" in line and "pytest" in line for line in lines)
    assert any("timeout" in line and "benchmarks/gpu_check.py" in line for line in lines)
    done = subprocess.run(["bash", "-n", str(IMAGE_SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_carried_transformers_is_the_pinned_one():
    pin = re.search(r'"transformers==([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    carried = re.findall(r"\btransformers==(\S+)", WHEELS_SCRIPT.read_text())
    assert carried == [pin], f"scripts/gpu_wheels.sh carries transformers {carried}, pyproject.toml pins {pin}"
    assert ".gpu-wheels/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_benchmark_skips_vllm_in_one_line_without_a_vllm_environment(monkeypatch, tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check_bench", ROOT / "benchmarks" / "gpu_check.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench, "ROOT", tmp_path)  # no .venv-vllm there
    monkeypatch.delenv("SEED_VLLM_PYTHON", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else object())
    assert bench.vllm_python() is None
    monkeypatch.setenv("SEED_VLLM_PYTHON", "/elsewhere/python")
    assert bench.vllm_python() == "/elsewhere/python"  # as given: a wrong one is the backend's error to report
    source = (ROOT / "benchmarks" / "gpu_check.py").read_text()
    assert 'print(f"gpu_check: skipped rollout vllm: {why}"' in source
