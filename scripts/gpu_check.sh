#!/usr/bin/env bash
# GPU check (one GPU, < 8 minutes): the `gpu` tests, then benchmarks/gpu_check.py, whose JSON lands in
# ${OUT:-benchmarks/results/gpu_check.json} (rollout tokens/s hf vs vllm, trainer tokens/s, MFU, peak memory,
# SEED/GRPO iteration ratio). Needs: .venv (scripts/setup_gpu.sh), a model dir in $SEED_GPU_MODEL
# (default: models/smollm2-135m-instruct), and .venv-vllm or $SEED_VLLM_PYTHON for the vLLM parts.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 DO_NOT_TRACK=true MLFLOW_DISABLE_TELEMETRY=true
export SEED_GPU_MODEL="${SEED_GPU_MODEL:-$PWD/models/smollm2-135m-instruct}"
if [ -z "${SEED_VLLM_PYTHON:-}" ] && [ -x .venv-vllm/bin/python ]; then
  export SEED_VLLM_PYTHON="$PWD/.venv-vllm/bin/python"
fi
out="${OUT:-benchmarks/results/gpu_check.json}"
python=".venv/bin/python"
"$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_check: no CUDA device visible')"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
start=$(date +%s)
set +e
timeout 300 "$python" -m pytest -q -m gpu tests/gpu -p no:cacheprovider
tests_rc=$?
set -e
echo "gpu_check: gpu tests exit $tests_rc after $(( $(date +%s) - start )) s"
timeout 240 "$python" benchmarks/gpu_check.py --model "$SEED_GPU_MODEL" --out "$out"
echo "gpu_check: total $(( $(date +%s) - start )) s, results in $out"
exit "$tests_rc"
