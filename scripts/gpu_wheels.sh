#!/usr/bin/env bash
# The wheel folder that travels with the working tree to the lent GPU machine (no network there) for
# scripts/gpu_check_image.sh: what the engine-level GPU check imports and that machine's image lacks. The image
# has python3 3.12, torch (CUDA), transformers 5.17, accelerate, peft, pandas, pyarrow, typer, pyyaml (so also numpy,
# safetensors, tokenizers, filelock, psutil, tqdm, httpx, jinja2 through their dependencies); not pydantic,
# ruamel.yaml, bm25s, PyStemmer or pytest, and not the transformers release the project pins. Found by running
# scripts/gpu_check_image.sh's CPU fallback in a venv that holds only the image's packages (docs/gpu.md).
#
#   bash scripts/gpu_wheels.sh                 # cp312 manylinux x86_64 wheels into .gpu-wheels/ (git-ignored)
#   bash scripts/gpu_wheels.sh 3.11 DIR        # the same set for another CPython (the local test of the path)
#
# Versions are the ones .venv runs the test suite with. typing-extensions, packaging and pygments are carried
# although the image may have them: pydantic needs typing-extensions>=4.16 and pytest packaging>=24 and
# pygments>=2.15, which an image's older copies may not meet (newer ones are backward compatible).
set -euo pipefail
cd "$(dirname "$0")/.."
pyver="${1:-3.12}"
dir="${2:-.gpu-wheels}"
pip=(.venv/bin/python -m pip)
[ -x .venv/bin/python ] || pip=(python3 -m pip)
WHEELS=(
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5  # seed_core.config
  typing-extensions==4.16.0
  ruamel.yaml==0.19.1                                     # seed_core.loader (params files as DVC reads them)
  # the pinned transformers (pyproject.toml; tests/unit/test_gpu_check_script.py checks they agree): the image's
  # 5.17 has no `cache` argument to generate/forward (5.17 calls it past_key_values), which the hf backend passes
  transformers==5.24.0 huggingface-hub==1.33.0            # 5.24 needs huggingface-hub>=1.31 (5.17: >=1.5)
  bm25s==0.3.16 PyStemmer==3.1.0   # Search-QA/WebShop search, whose observations the tiny analyzer model learns on
  pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4 pygments==2.21.0  # the `gpu` tests
)
rm -rf "$dir"
mkdir -p "$dir"
"${pip[@]}" download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version "$pyver" --implementation cp --abi "cp${pyver/./}" --abi none --abi abi3 \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform any \
  --dest "$dir" "${WHEELS[@]}"
n=$(find "$dir" -name '*.whl' | wc -l)
bytes=$(find "$dir" -name '*.whl' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
echo "gpu_wheels: $n wheels for CPython $pyver in $dir, $(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}') MiB"
