#!/usr/bin/env bash
# The README's main job: train short, test long — about ten minutes of training on 2 cores
# (plus the one-time setup and build on a fresh machine).
#   1. install what is needed and build (scripts/setup.sh, CMake Release build)
#   2. prepare PTB as data-bin/ptb (scripts/data.sh)
#   3. train small ALiBi, sinusoidal and rotary models at L = 64 (same budget each)
#   4. sweep 64 … 1024 on the validation set: the extrapolation table on stdout, the plot in
#      runs/demo/sweep.{png,svg}, the numbers in runs/demo/sweep.{csv,json}
# Environment: DEMO_UPDATES (updates per model), DEMO_POS (position methods), STRETCH_DATA_DIR.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Sleep rather than spin at OpenMP barriers: on a shared or oversubscribed machine (ctest -j,
# other jobs) spinning threads steal each other's time slices; on a quiet one the cost is tiny.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
cd "$here"
bash scripts/setup.sh
cmake -S . -B build -G Ninja ${STRETCH_DATA_DIR:+-DSTRETCH_DATA_DIR=$STRETCH_DATA_DIR} >/dev/null
cmake --build build -j "$(nproc)" --target stretch
bash scripts/data.sh ptb --dest data-bin/ptb

updates="${DEMO_UPDATES:-500}"
positions="${DEMO_POS:-alibi sinusoidal rope}"
out=runs/demo
mkdir -p "$out"
paths=()
for pos in $positions; do
  dir="$out/$pos"
  if [ ! -f "$dir/checkpoint_last.pt" ] || [ "${DEMO_FRESH:-0}" = 1 ]; then
    rm -rf "$dir"
    echo "== training $pos at L = 64 ($updates updates)"
    build/bin/stretch train data-bin/ptb --arch transformer_lm_small --pos "$pos" \
      --tokens-per-sample 64 --max-tokens 2048 --required-batch-size-multiple 1 \
      --optimizer adam --adam-betas "(0.9, 0.98)" --lr 0.002 --lr-scheduler inverse_sqrt \
      --warmup-updates 200 --warmup-init-lr 1e-07 --clip-norm 1.0 --dropout 0.1 \
      --max-update "$updates" --save-dir "$dir" --no-epoch-checkpoints \
      --log-format simple --log-interval 200 --seed 1 --disable-validation
  fi
  paths+=("$dir/checkpoint_last.pt")
done
echo "== sweep"
build/bin/stretch sweep data-bin/ptb --gen-subset valid --lengths 64,128,256,512,1024 \
  --path "$(IFS=,; echo "${paths[*]}")" --max-tokens 8192 --results-dir "$out" \
  --title "PTB, trained at L = 64, $updates updates"
