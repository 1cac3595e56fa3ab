#!/usr/bin/env bash
# The ALiBi ablation of issue 15 (seed 002 §4-6, seed 000's position interpolation): every ALiBi
# variant and the baselines trained at L = 64 on PTB under one budget, then swept to 16L = 1024
# on the validation set (non-overlapping windows), plus plain ALiBi with position interpolation.
# Table on stdout, plot + numbers in $OUT/sweep.{png,svg,csv,json} and $OUT/interp/.
# Environment:
#   UPDATES   updates per model (default 300)     MAX_TOKENS  tokens per update (default 2048)
#   ARCH      preset (default transformer_lm_tiny) VARIANTS    names below to run (default: all)
#   OUT       results directory (default runs/alibi_variants)  FRESH=1  retrain existing models
#   STRETCH_BIN  the binary (default build/bin/stretch; built when missing)
# Every model: --tokens-per-sample 64, Adam (0.9, 0.98), lr 0.002, inverse_sqrt with 10% warm-up,
# clip 1.0, dropout 0.1, seed 1. The docs/RESULTS.md table came from
#   UPDATES=150 MAX_TOKENS=1024 bash examples/alibi_variants.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
updates="${UPDATES:-300}"
max_tokens="${MAX_TOKENS:-2048}"
arch="${ARCH:-transformer_lm_tiny}"
out="${OUT:-runs/alibi_variants}"
stretch="${STRETCH_BIN:-build/bin/stretch}"
[ -x "$stretch" ] || { cmake -S . -B build -G Ninja >/dev/null && cmake --build build --target stretch; }
[ -f data-bin/ptb/dict.txt ] || bash scripts/data.sh ptb --dest data-bin/ptb

# name | flags (the transformer_lm_tiny preset has 2 layers and 4 heads)
declare -A flags=(
  [sinusoidal]="--pos sinusoidal"
  [rope]="--pos rope"
  [t5]="--pos t5"
  [alibi]="--pos alibi"
  [alibi-blog-slopes]="--alibi-slopes 0.5,0.25,0.125,0.0625"
  [alibi-learnable]="--alibi-learnable-slopes --alibi-positive-slopes"
  [alibi-log]="--alibi-shape log"
  [alibi-clipped]="--alibi-shape clipped --alibi-clip-distance 32"
  [alibi-groups]="--alibi-slope-groups 2:1,2:0.5"
  [alibi-layer-scale]="--alibi-layer-scale linear:0.5"
  [alibi-warmup]="--alibi-slope-warmup-updates $((updates / 2)) --alibi-slope-warmup-init 0.25"
  [alibi-no-bias-head]="--alibi-no-bias-heads 1:0"
  [alibi+rope-upper]="--pos-upper rope --pos-upper-from-layer 1"
)
order=(sinusoidal rope t5 alibi alibi-blog-slopes alibi-learnable alibi-log alibi-clipped alibi-groups
       alibi-layer-scale alibi-warmup alibi-no-bias-head alibi+rope-upper)
names=(${VARIANTS:-${order[@]}})
for n in "${names[@]}"; do
  [ -n "${flags[$n]+x}" ] || { echo "alibi_variants.sh: unknown variant '$n' (known: ${order[*]})" >&2; exit 2; }
done

mkdir -p "$out"
paths=() labels=()
for n in "${names[@]}"; do
  dir="$out/$n"
  if [ ! -f "$dir/checkpoint_last.pt" ] || [ "${FRESH:-0}" = 1 ]; then
    rm -rf "$dir"
    echo "== training $n ($updates updates of $max_tokens tokens at L = 64): ${flags[$n]}"
    # shellcheck disable=SC2086  # the flags are words
    $stretch train data-bin/ptb --arch "$arch" ${flags[$n]} \
      --tokens-per-sample 64 --max-tokens "$max_tokens" --required-batch-size-multiple 1 \
      --optimizer adam --adam-betas "(0.9, 0.98)" --lr 0.002 --lr-scheduler inverse_sqrt \
      --warmup-updates $((updates / 10 + 1)) --warmup-init-lr 1e-07 --clip-norm 1.0 --dropout 0.1 \
      --max-update "$updates" --save-dir "$dir" --no-epoch-checkpoints \
      --log-format simple --log-interval "$updates" --seed 1 --disable-validation
  fi
  paths+=("$dir/checkpoint_last.pt")
  labels+=("$n")
done
echo "== sweep (every model)"
$stretch sweep data-bin/ptb --gen-subset valid --lengths 64,128,256,512,1024 \
  --path "$(IFS=,; echo "${paths[*]}")" --labels "$(IFS=,; echo "${labels[*]}")" \
  --max-tokens 8192 --results-dir "$out" --title "PTB, $arch trained at L = 64, $updates updates"
if [ -f "$out/alibi/checkpoint_last.pt" ]; then
  echo "== sweep (ALiBi with and without position interpolation)"
  $stretch sweep data-bin/ptb --gen-subset valid --lengths 64,128,256,512,1024 \
    --path "$out/alibi/checkpoint_last.pt" --labels alibi --alibi-interpolate \
    --max-tokens 8192 --results-dir "$out/interp" --title "ALiBi with position interpolation (arXiv:2310.13017)"
fi
