#!/usr/bin/env bash
# bench/flag_cost.sh LABEL REPEATS FLAG... — what training flags cost a step: stretch train's wps with
# and without FLAG..., interleaved, on the small (4 layers / 256) and medium (6 / 512) models, T 128,
# B 8, V 10,008 (data-bin/ptb: bash scripts/data.sh ptb), 40 updates, 2 threads; prints each pair and
# the ratio of the means (with / plain) per model. Used by bench/ema_cost.sh and
# bench/normformer_cost.sh (docs/BENCHMARKS.md).
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 LABEL REPEATS FLAG..." >&2; exit 2; }
label="$1" repeats="$2"
shift 2
flags=("$@")
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
b=build/bin/stretch
[ -x "$b" ] || { echo "$0: $b missing: build first (cmake --build build)" >&2; exit 2; }
[ -f data-bin/ptb/dict.txt ] || { echo "$0: data-bin/ptb missing: run bash scripts/data.sh ptb" >&2; exit 2; }
for model in "4 256 4 1024" "6 512 8 2048"; do
  set -- $model
  args=(train data-bin/ptb --arch transformer_lm --decoder-layers "$1" --decoder-embed-dim "$2"
        --decoder-attention-heads "$3" --decoder-ffn-embed-dim "$4" --tokens-per-sample 128 --batch-size 8
        --max-update 40 --optimizer adam --lr 0.0005 --log-format json --log-interval 40 --log-full-precision
        --no-save --threads 2 --disable-validation)
  plain=() with=()
  for ((r = 1; r <= repeats; ++r)); do
    for e in plain with; do
      extra=(); [ "$e" = with ] && extra=("${flags[@]}")
      w=$(OMP_WAIT_POLICY=passive "$b" "${args[@]}" "${extra[@]}" 2>&1 | grep -o '"wps": "\?[0-9.]*' | head -1 |
          grep -o '[0-9.]*$')
      [ -n "$w" ] || { echo "$0: no wps logged (L $1, C $2, $e)" >&2; exit 1; }
      if [ "$e" = with ]; then with+=("$w"); else plain+=("$w"); fi
    done
    printf "L %s C %-4s repeat %d: plain %8.1f wps, %s %8.1f wps\n" "$1" "$2" "$r" "${plain[-1]}" "$label" "${with[-1]}"
  done
  python3 -c 'import sys; p, e = [list(map(float, a.split())) for a in sys.argv[1:3]]
print(f"L {sys.argv[3]} C {sys.argv[4]}: {sys.argv[5]} / plain = {sum(e) / len(e) / (sum(p) / len(p)):.3f} (means of {len(p)})")' \
    "${plain[*]}" "${with[*]}" "$1" "$2" "$label"
done
