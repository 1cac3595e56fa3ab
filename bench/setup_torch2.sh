#!/usr/bin/env bash
# bench/setup_torch2.sh — the current PyTorch from PyPI for bench/compare.py's second anchor
# (F.scaled_dot_product_attention and FlexAttention), in its own venv build/torch2env so that
# the tests keep Debian's python3-torch 1.13 as their oracle. About 5 GB (PyPI's Linux wheel
# brings its CUDA libraries; they are not used here). Idempotent: does nothing when the venv
# already imports torch >= 2.
# Usage: bash bench/setup_torch2.sh [TORCH_SPEC]   (default: torch, the newest)
set -euo pipefail
cd "$(dirname "$0")/.."
venv=build/torch2env
spec=${1:-torch}
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c \
    'import sys, torch; sys.exit(0 if int(torch.__version__.split(".")[0]) >= 2 else 1)' 2>/dev/null; then
  echo "setup_torch2: $("$venv/bin/python" -c 'import torch; print(torch.__version__)') already in $venv"
  exit 0
fi
mkdir -p build
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "$spec" numpy
echo "setup_torch2: $("$venv/bin/python" -c 'import torch; print(torch.__version__)') in $venv"
