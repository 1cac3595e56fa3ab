#!/usr/bin/env bash
# Real fairseq 0.12.2 as the oracle for stretch's fairseq import/export tests.
# Makes a venv over Debian's python3-torch 1.13 (--system-site-packages, as build/pyenv),
# installs PyPI's fairseq 0.12.2 from its source tarball with --no-deps after the small
# programmatic edits of tests/fairseq/patch_fairseq.py (no fairseq source is committed), and
# pins omegaconf 2.0.6, hydra-core 1.0.7, antlr4-python3-runtime 4.8, Cython < 3, bitarray.
# fairseq's transformer_xl (examples/truncated_bptt) wraps HuggingFace's TransfoXLLMHeadModel,
# which transformers removed later: transformers 4.30.2 (it still has models/transfo_xl) with
# huggingface-hub 0.16.4, safetensors 0.3.1 and filelock, all --no-deps (no tokenizers: TransfoXL's
# model does not need it, and transformers checks it only when installed).
# Idempotent: when the venv already imports fairseq 0.12.2 and TransfoXL it exits at once; a venv
# with fairseq but without TransfoXL only gets the transformers pins.
# Usage: tests/fairseq/setup_fairseq.sh     (venv at $STRETCH_FAIRSEQ_VENV or build/fairseq-venv)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${STRETCH_FAIRSEQ_VENV:-$here/build/fairseq-venv}"
py="$venv/bin/python"

check() {
  [ -x "$py" ] && [ -x "$venv/bin/fairseq-eval-lm" ] && "$py" -c '
import fairseq, sys
from fairseq.data import token_block_utils_fast
from fairseq.dataclass.initialize import hydra_init
hydra_init()
sys.exit(0 if fairseq.__version__ == "0.12.2" else 1)' >/dev/null 2>&1
}

check_xl() {
  "$py" -c 'from transformers.models.transfo_xl import TransfoXLConfig, TransfoXLLMHeadModel' >/dev/null 2>&1
}

install_xl() {
  "$py" -m pip install -q --disable-pip-version-check --no-deps "transformers==4.30.2" \
    "huggingface-hub==0.16.4" "safetensors==0.3.1" filelock
  if ! check_xl; then
    echo "setup_fairseq: error: transformers 4.30.2 in $venv does not import TransfoXLLMHeadModel:" >&2
    "$py" -c 'from transformers.models.transfo_xl import TransfoXLLMHeadModel' >&2 || true
    exit 1
  fi
}

if check; then
  check_xl || install_xl
  echo "setup_fairseq: fairseq 0.12.2 oracle (with transformers' TransfoXL) at $venv"
  exit 0
fi

echo "setup_fairseq: building the fairseq 0.12.2 oracle venv at $venv"
/usr/bin/python3 -m venv --system-site-packages "$venv"
pip=("$py" -m pip install -q --disable-pip-version-check --no-deps)
# omegaconf 2.0.6's metadata ("PyYAML>=5.1.*") is rejected by current pip's resolver: every
# pin goes in with --no-deps; PyYAML and numpy come from Debian (python3-yaml, python3-numpy).
"${pip[@]}" "omegaconf==2.0.6" "hydra-core==1.0.7" "antlr4-python3-runtime==4.8" \
  "Cython<3" bitarray regex tqdm sacrebleu portalocker tabulate colorama lxml typing-extensions
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"  # importing hydra fails before the patch
"$py" "$here/tests/fairseq/patch_fairseq.py" hydra "$site"

work="$venv/src"
mkdir -p "$work"
tarball="$work/fairseq-0.12.2.tar.gz"
sha=34f1b18426bf3844714534162f065ab733e049597476daa35fffb4d06a92b524
if [ ! -f "$tarball" ] || ! echo "$sha  $tarball" | sha256sum -c --quiet 2>/dev/null; then
  "$py" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    --no-build-isolation "fairseq==0.12.2" -d "$work" 2>/dev/null || true
  if [ ! -f "$tarball" ]; then
    wget -q -O "$tarball" \
      https://files.pythonhosted.org/packages/source/f/fairseq/fairseq-0.12.2.tar.gz
  fi
  echo "$sha  $tarball" | sha256sum -c --quiet
fi
rm -rf "$work/fairseq-0.12.2"
tar xzf "$tarball" -C "$work"
"$py" "$here/tests/fairseq/patch_fairseq.py" setup "$work/fairseq-0.12.2"
(cd "$work/fairseq-0.12.2" && "${pip[@]}" --no-build-isolation .)

if ! check; then
  echo "setup_fairseq: error: the venv at $venv does not import fairseq 0.12.2 (see above)" >&2
  exit 1
fi
check_xl || install_xl
echo "setup_fairseq: fairseq 0.12.2 oracle at $venv"
