#!/usr/bin/env bash
# tests/parity/run_model_parity.sh — model-level parity of every position method × pre/post-norm ×
# tied/untied output against the float64 oracle (check_transformer_lm.py at its default rtol 1e-4).
# By hand after any change to the model, autograd or ops (about 2 minutes; not in the default CTest
# suite). Exit 0 when all pass; prints one line per configuration.
# Usage: bash tests/parity/run_model_parity.sh [build-dir]
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$here/build}"
py="${STRETCH_PYTHON:-$build/pyenv/bin/python}"
[ -x "$py" ] || py=/usr/bin/python3
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0
for pos in alibi sinusoidal learned rope t5 none; do
  for norm in true false; do
    for tied in false true; do
      json="{\"pos\":\"$pos\",\"vocab_size\":96,\"decoder_layers\":2,\"decoder_embed_dim\":32,\"decoder_attention_heads\":4,\"decoder_ffn_embed_dim\":64,\"decoder_normalize_before\":$norm,\"share_decoder_input_output_embed\":$tied,\"tokens_per_sample\":24,\"max_target_positions\":24}"
      name="pos=$pos prenorm=$norm tied=$tied"
      if ! "$build/tools/stretch_parity_dump" --model-json "$json" --batch 3 --len 19 --pad 4 --seed 3 \
          --checkpoint "$tmp/ck.pt" --dump "$tmp/dump.safetensors" > /dev/null; then
        echo "FAIL (dump) $name"; fail=1; continue
      fi
      if "$py" "$here/tests/parity/check_transformer_lm.py" --checkpoint "$tmp/ck.pt" --dump "$tmp/dump.safetensors" --quiet; then
        echo "ok   $name"
      else
        echo "FAIL $name"; fail=1
      fi
    done
  done
done
exit $fail
