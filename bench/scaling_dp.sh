#!/usr/bin/env bash
# bench/scaling_dp.sh — data parallelism on one host: 2 MPI processes × 1 thread against
# 1 process × 2 threads on the same global batch (the process takes --update-freq 2, so both
# compute the same updates), interleaved A B B A, as one ratio of training words per second.
#   bash bench/scaling_dp.sh [BUILD_DIR] [UPDATES]      (default build, 12 updates per run)
#   EXTRA="--bf16" bash bench/scaling_dp.sh ...          (more `stretch train` flags for both layouts)
# Model: transformer_lm_small sizes (4 layers, C 256, 4 heads, F 1024), ALiBi, T 128, 8 rows per
# process per micro-batch, PTB valid as the corpus (V 10,000 + specials), dropout 0.1, NAG.
# Prints each run's mean wps over updates 3..N (fairseq's train_inner wps, all ranks' words), the
# ratio 2×1 / 1×2, and the load average before and after (a shared host skews both alike only
# roughly: quote the ratio with the load).
set -euo pipefail
build="${1:-build}"; updates="${2:-12}"
stretch="$build/bin/stretch"
data="${STRETCH_DATA_DIR:-$(dirname "$0")/../../shared/data}"
[ -x "$stretch" ] || { echo "scaling_dp: $stretch not found: build first (cmake --build $build --target stretch)" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "scaling_dp: mpirun not found: bash scripts/setup.sh (openmpi-bin)" >&2; exit 1; }
[ -f "$data/ptb/ptb.valid.txt" ] || { echo "scaling_dp: $data/ptb/ptb.valid.txt not found: set STRETCH_DATA_DIR" >&2; exit 1; }
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
"$stretch" preprocess --only-source --trainpref "$data/ptb/ptb.valid.txt" --validpref "$data/ptb/ptb.test.txt" \
  --destdir "$work/bin" >/dev/null 2>&1
common=("$work/bin" --arch transformer_lm_tiny --decoder-layers 4 --decoder-embed-dim 256 --decoder-attention-heads 4
        --decoder-ffn-embed-dim 1024 --decoder-normalize-before --tokens-per-sample 128 --max-tokens 1024
        --required-batch-size-multiple 1 --optimizer nag --lr 0.01 --clip-norm 0.1 --max-update "$updates"
        --log-interval 1 --no-save --disable-validation --dropout 0.1 --log-format json --no-progress-bar --seed 1)
read -r -a extra <<< "${EXTRA:-}"
common+=("${extra[@]}")
export OMP_WAIT_POLICY=passive
load0="$(cut -d' ' -f1-3 /proc/loadavg)"
run() {  # KIND N: one run, appends its mean wps to $work/KIND; a failed run shows its errors
  if ! case "$1" in
    2x1) mpirun --allow-run-as-root -np 2 --bind-to core "$stretch" train "${common[@]}" --threads 1 ;;
    1x2) "$stretch" train "${common[@]}" --threads 2 --update-freq 2 ;;
  esac > "$work/$1.log" 2> "$work/$1.err"; then
    echo "scaling_dp: the $1 run failed (EXTRA=\"${EXTRA:-}\"); stretch said:" >&2
    # stretch's own message (mpirun's report around it left out), once even with two ranks
    awk '/^stretch: /{p = 1} p && !/^stretch: |^  |^hint: /{p = 0} p && !seen[$0]++' "$work/$1.err" | head -n 8 >&2
    exit 1
  fi
  python3 -c '
import json, sys
tag = " | train_inner | "
w = [float(json.loads(l.split(tag, 1)[1])["wps"]) for l in sys.stdin if tag in l][2:]
assert w, "no train_inner lines after update 2"
print(sum(w) / len(w))' < "$work/$1.log" >> "$work/$1"
}
for kind in 2x1 1x2 1x2 2x1; do run "$kind"; done
load1="$(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work" "$load0" "$load1" "$(nproc)" "${EXTRA:-}" <<'PY'
import sys
work, load0, load1, ncpu, extra = sys.argv[1:]
a = [float(x) for x in open(f"{work}/2x1")]
b = [float(x) for x in open(f"{work}/1x2")]
print(f"2 processes x 1 thread: wps {', '.join(f'{x:,.0f}' for x in a)} (best {max(a):,.0f})")
print(f"1 process x 2 threads:  wps {', '.join(f'{x:,.0f}' for x in b)} (best {max(b):,.0f})")
print(f"ratio 2x1 / 1x2 (best of 2 each): {max(a) / max(b):.2f}; load average {load0} before, {load1} after, {ncpu} CPUs"
      + (f"; extra flags: {extra}" if extra else ""))
PY
