#!/usr/bin/env bash
# The GPU check on the lent machine's own image, as it is: its python3 (3.12, CUDA torch, transformers,
# accelerate, peft, pandas, pyarrow, typer, pyyaml; no network; no vLLM, Prefect, MLflow, DVC, pydantic) plus the
# wheels carried in .gpu-wheels/ (scripts/gpu_wheels.sh), installed offline into a temporary folder that goes on
# PYTHONPATH after the project. One command, under 8 minutes (each step's timeout is cut to what is left):
#
#   bash scripts/gpu_check_image.sh        # device tool: carry [".gpu-wheels"]; docs/gpu.md "On the lent machine"
#
# 1. the `gpu` tests (tests/gpu) without the vLLM ones, 2. benchmarks/gpu_check.py with the hf backend; the JSON
# goes to benchmarks/results/gpu_check.json and, when $OUT is a folder, to $OUT/gpu_check.json too. Without a CUDA
# device it is a CPU fallback (the carried-wheels path, tested here): the gpu tests skip, the benchmark runs small
# on the CPU, and its JSON goes to $OUT/gpu_check_cpu_fallback.json (or ${TMPDIR:-/tmp}/...), never over a GPU
# result. Model: $SEED_GPU_MODEL, else models/smollm2-135m-instruct when present, else the tiny analyzer model built
# on the spot (SmolLM2's 94 MB GGUF does not fit in the 64 MiB that travels).
# PYTHON selects the interpreter (default python3), SEED_GPU_WHEELS the wheel folder (default .gpu-wheels).
set -uo pipefail
cd "$(dirname "$0")/.."
say() { echo "gpu_check_image: $*"; }
py="${PYTHON:-python3}"
wheels="${SEED_GPU_WHEELS:-.gpu-wheels}"
budget="${SEED_GPU_CHECK_BUDGET_S:-450}"  # the whole check; the lent machine's start and transfers come on top
start=$(date +%s)
deadline=$(( start + budget ))
left() { local n=$(( deadline - $(date +%s) )); [ "$n" -gt "$1" ] && n=$1; [ "$n" -lt 1 ] && n=1; echo "$n"; }
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 DO_NOT_TRACK=true MLFLOW_DISABLE_TELEMETRY=true
export TOKENIZERS_PARALLELISM=false PYTHONDONTWRITEBYTECODE=1 TQDM_DISABLE=1

# 1. the carried wheels, offline (no index: the machine has no network)
ls "$wheels"/*.whl >/dev/null 2>&1 || { say "no wheels in $wheels: run scripts/gpu_wheels.sh, carry it"; exit 2; }
work="$(mktemp -d "${TMPDIR:-/tmp}/seed-gpu-check.XXXXXX")"
deps="$work/site"
if "$py" -m pip --version >/dev/null 2>&1; then
  timeout "$(left 120)" "$py" -m pip install --quiet --disable-pip-version-check --no-index --no-deps \
    --find-links "$wheels" --target "$deps" "$wheels"/*.whl || { say "installing the carried wheels failed"; exit 2; }
else  # an image without pip: a wheel is a zip of its files (none of these needs a build step)
  for w in "$wheels"/*.whl; do "$py" -m zipfile -e "$w" "$deps" || { say "unpacking $w failed"; exit 2; }; done
fi
export PYTHONPATH="$PWD:$deps${PYTHONPATH:+:$PYTHONPATH}"
"$py" -c "import sys, torch, transformers, pydantic; print('gpu_check_image: python', sys.version.split()[0], \
'torch', torch.__version__, 'transformers', transformers.__version__, 'pydantic', pydantic.__version__, \
'cuda', torch.cuda.is_available())" || { say "the engine's imports fail with the carried wheels"; exit 2; }

# 2. what is not here, one line each
has() { "$py" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$1') is None)" 2>/dev/null; }
backends=hf
deselect=(-k "not vllm")
if [ -n "${SEED_VLLM_PYTHON:-}" ] || has vllm; then
  backends=hf,vllm; deselect=()
else
  say "skipped: vLLM (not importable, no SEED_VLLM_PYTHON): the vllm tests and the benchmark's vllm rollout"
fi
has prefect || say "skipped: Prefect (not importable): flows/ and tasks/ orchestration, not part of this check"
has mlflow || say "skipped: MLflow (not importable): tracking, off in this check (tracking.enabled=false)"
has dvc || say "skipped: DVC (not importable): seed run / dvc repro, not part of this check"

# 3. CUDA or the CPU fallback
if "$py" -c "import sys, torch; sys.exit(not torch.cuda.is_available())"; then
  mode=gpu
  json=benchmarks/results/gpu_check.json
  bench=()
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
else
  mode=cpu
  if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then json="$OUT/gpu_check_cpu_fallback.json"
  else json="${TMPDIR:-/tmp}/gpu_check_cpu_fallback.json"; fi
  bench=(--device cpu --prompts 4 --new-tokens 16 --train-batch 2 --train-len 64 --train-steps 1 --rounds-tasks 2)
  say "no CUDA device visible: CPU fallback (gpu tests skip, small benchmark on the CPU, JSON to $json)"
fi

# 4. the model
model="${SEED_GPU_MODEL:-}"
[ -z "$model" ] && [ -f models/smollm2-135m-instruct/config.json ] && model="$PWD/models/smollm2-135m-instruct"
if [ -z "$model" ]; then
  model="$work/tiny-analyzer"
  timeout "$(left 120)" "$py" -c "import sys; from seed_core.modeling.builders import build_tiny_analyzer_model as b; \
b(sys.argv[1])" "$model" >"$work/model.log" 2>&1 \
    || { tail -20 "$work/model.log"; say "building the tiny model failed"; exit 2; }
  say "model: the tiny analyzer model, built in $(( $(date +%s) - start )) s since the start (no real one travels)"
fi
export SEED_GPU_MODEL="$model"

# 5. the gpu tests, then the benchmark
rc=0
if has pytest; then
  timeout "$(left 240)" "$py" -m pytest -q -m gpu tests/gpu -p no:cacheprovider -p no:randomly -rs "${deselect[@]}"
  tests_rc=$?
  say "gpu tests exit $tests_rc after $(( $(date +%s) - start )) s"
  [ "$tests_rc" -eq 0 ] || rc=$tests_rc
else
  say "skipped: the gpu tests (pytest not importable: carry its wheel, scripts/gpu_wheels.sh)"
fi
mkdir -p "$(dirname "$json")"
timeout "$(left 300)" "$py" benchmarks/gpu_check.py --model "$model" --backends "$backends" "${bench[@]}" \
  --out "$json" >"$work/bench.json"
bench_rc=$?
[ "$bench_rc" -eq 0 ] || { say "benchmark exit $bench_rc"; rc=$bench_rc; }
if [ "$mode" = gpu ] && [ -n "${OUT:-}" ] && [ -d "$OUT" ] && [ -f "$json" ]; then cp "$json" "$OUT/gpu_check.json"; fi
say "$mode check: exit $rc, total $(( $(date +%s) - start )) s, results in $json"
rm -rf "$work"
exit "$rc"
