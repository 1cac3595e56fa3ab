#!/usr/bin/env bash
# Symmetric ALiBi in a bidirectional encoder (issue 15, seed 000's FAQ): a small RoBERTa-style
# encoder trained with --task masked_lm at L = 64 on PTB with --pos alibi (symmetric: −m·|i − j|)
# and the sinusoidal / learned / none baselines under one budget, then evaluated by masked-token
# perplexity (`eval-lm --task masked_lm`, the masks of seed 1) at longer blocks up to 16L = 1024.
# Table on stdout and in $OUT/table.md; one eval-lm --results-json per (model, length) in $OUT.
# Environment:
#   UPDATES   updates per model (default 300)      MAX_TOKENS  tokens per update (default 2048)
#   ARCH      preset (default roberta_tiny)         LENGTHS     evaluation lengths (default 64,128,256,512,1024)
#   POS       methods to run (default: alibi sinusoidal learned none)
#   SUBSET    evaluation split (default valid)      OUT  results directory (default runs/alibi_encoder)
#   STRETCH_BIN  the binary (default build/bin/stretch; built when missing)
#   FRESH=1   retrain existing models
# Every model: Adam (0.9, 0.98), lr 0.002, inverse_sqrt with 10% warm-up, clip 1.0, dropout 0.1,
# attention dropout 0.1 (RoBERTa's), seed 1, 15% masking with 80/10/10. The docs/RESULTS.md table came from
#   UPDATES=120 MAX_TOKENS=1024 LENGTHS=64,256,1024 bash examples/alibi_encoder.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
updates="${UPDATES:-300}"
max_tokens="${MAX_TOKENS:-2048}"
arch="${ARCH:-roberta_tiny}"
lengths="${LENGTHS:-64,128,256,512,1024}"
subset="${SUBSET:-valid}"
out="${OUT:-runs/alibi_encoder}"
names=(${POS:-alibi sinusoidal learned none})
stretch="${STRETCH_BIN:-build/bin/stretch}"
[ -x "$stretch" ] || { cmake -S . -B build -G Ninja >/dev/null && cmake --build build --target stretch; }
[ -f data-bin/ptb/dict.txt ] || bash scripts/data.sh ptb --dest data-bin/ptb
for n in "${names[@]}"; do
  case "$n" in alibi | sinusoidal | learned | none) ;; *) echo "alibi_encoder.sh: unknown --pos '$n'" >&2; exit 2 ;; esac
done

mkdir -p "$out"
for n in "${names[@]}"; do
  dir="$out/$n"
  if [ ! -f "$dir/checkpoint_last.pt" ] || [ "${FRESH:-0}" = 1 ]; then
    rm -rf "$dir"
    echo "== training $n ($updates updates of $max_tokens tokens at L = 64)"
    $stretch train data-bin/ptb --task masked_lm --arch "$arch" --pos "$n" \
      --tokens-per-sample 64 --max-tokens "$max_tokens" --required-batch-size-multiple 1 \
      --optimizer adam --adam-betas "(0.9, 0.98)" --lr 0.002 --lr-scheduler inverse_sqrt \
      --warmup-updates $((updates / 10 + 1)) --warmup-init-lr 1e-07 --clip-norm 1.0 --dropout 0.1 \
      --attention-dropout 0.1 --max-update "$updates" --save-dir "$dir" --no-epoch-checkpoints \
      --log-format simple --log-interval "$updates" --seed 1 --disable-validation
  fi
done
table="$out/table.md"
{
  printf '| --pos |'
  for L in ${lengths//,/ }; do printf ' L = %s |' "$L"; done
  printf '\n|---|'
  for _ in ${lengths//,/ }; do printf -- '---:|'; done
  printf '\n'
  for n in "${names[@]}"; do
    printf '| %s |' "$n"
    for L in ${lengths//,/ }; do
      res="$out/$n.L$L.json"
      if [ ! -f "$res" ] || [ "${FRESH:-0}" = 1 ]; then
        if ! $stretch eval-lm data-bin/ptb --path "$out/$n/checkpoint_last.pt" --task masked_lm \
          --gen-subset "$subset" --tokens-per-sample "$L" --max-tokens 8192 --log-format none \
          --results-json "$res" >"$out/$n.L$L.log" 2>&1; then
          rm -f "$res"
        fi
      fi
      if [ -f "$res" ]; then
        printf ' %s |' "$(python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["ppl"])' "$res")"
      else
        printf ' refused¹ |'
      fi
    done
    printf '\n'
  done
  printf '\nMasked-token perplexity on PTB %s (15%% chosen, 80/10/10, the masks of seed 1); ' "$subset"
  printf '%s, trained at L = 64 for %s updates of %s tokens.\n' "$arch" "$updates" "$max_tokens"
  printf '¹ learned positions have no rows past the training length (eval-lm says so and exits 2).\n'
} >"$table"
cat "$table"
