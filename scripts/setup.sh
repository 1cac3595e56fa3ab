#!/usr/bin/env bash
# Installs every Debian package stretch's build, tests and benchmarks need.
# Idempotent: when everything is present it only runs dpkg-query and exits.
# Usage: scripts/setup.sh            (as root, or with sudo available)
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libdnnl-dev                 # GEMM (fp32 sgemm, bf16 matmul primitive)
  libopenblas-openmp-dev      # GEMM: fp32 products on CPUs without AVX-512 (ops/gemm.h)
  libcli11-dev                # command-line flags
  nlohmann-json3-dev          # JSON (configs, logs, checkpoint metadata)
  libgtest-dev libgmock-dev   # unit tests
  libbenchmark-dev            # micro-benchmarks
  libopenmpi-dev openmpi-bin  # data parallelism (optional at build time)
  iproute2                    # the two-host MPI test (network namespaces, tests/dist)
  python3 python3-numpy python3-torch python3-venv  # parity oracle (Debian's torch 1.13)
  libopenblas0-openmp libtcmalloc-minimal4  # PyTorch anchors (bench/torch_lm.py): MEASURED.md's tuned setup
  gnuplot-nox                 # extrapolation plot (PNG + SVG)
  clang libclang-rt-14-dev libomp-dev  # libFuzzer targets (tests/fuzz/run.sh; clang's OpenMP)
  wget ca-certificates unzip  # data script (downloads, the WikiText-103 zip)
  libzip-dev                  # PyTorch .pt (zip) checkpoints: fairseq import/export
  pybind11-dev python3-dev python3-pytest  # the Python module `import stretch` and its tests (docs/python.md)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} packages present"
fi

# Python's safetensors is not packaged for Debian 12: a venv on top of Debian's python3
# (so it sees python3-torch) gets it from PyPI. Used by tests/parity only.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${STRETCH_PYENV:-$here/build/pyenv}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import safetensors, torch" 2>/dev/null; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check safetensors || \
    echo "setup: warning: could not install safetensors from PyPI; parity tests will read checkpoints with the fallback reader"
fi
# TensorBoard's own reader: the oracle of `stretch train --tensorboard-logdir` (tests/train/check_tensorboard.py).
if ! "$venv/bin/python" -c "import tensorboard" 2>/dev/null; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check tensorboard || \
    echo "setup: warning: could not install tensorboard from PyPI; the TensorBoard check reports it missing"
fi
echo "setup: python oracle at $venv/bin/python"

# Real fairseq 0.12.2 (patched at install time) in its own venv: the oracle of the fairseq
# import/export tests (tests/fairseq). Fast when already built.
"$here/tests/fairseq/setup_fairseq.sh" || \
  echo "setup: warning: the fairseq oracle venv could not be built; tests/fairseq report it missing"
