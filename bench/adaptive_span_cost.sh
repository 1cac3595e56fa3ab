#!/usr/bin/env bash
# bench/adaptive_span_cost.sh — cost follows the learned span (issue 14): `stretch train --arch
# adaptive_span` step time and peak memory, in one run, for
#   learned   --attn-span 8192 with every z at 68/8192 (span size ceil(z·L) + R = 100, so trim_len
#             64·floor(8092/64) = 8064 and S = 128 keys per query, a 192-row cache)
#   fixed128  --attn-span 128 with z = 68/128 (span size 100, trim 0, S = 128, a 128-row cache)
#   full8192  --attn-span 8192 with z = 1 (no trimming: S = 8192, an 8192-row cache)
# The spans are held (--lr 1e-9, --aux-loss-scaler 0), so each run measures its span's cost. Same
# data (characters of tiny-shakespeare), 2 layers, C 128, 4 heads, F 512, B 4 × T 64, 1 thread,
# alternating rounds; step time = the median train_wall of updates 4..N of the JSON log lines; peak
# RSS from /usr/bin/time. Prints one JSON line per run, then learned / fixed128 and full / learned.
# Usage: bash bench/adaptive_span_cost.sh [build-dir] [updates]
set -euo pipefail
export OMP_WAIT_POLICY=passive
build="${1:-build}"
updates="${2:-20}"
stretch="$build/bin/stretch"
data_dir="${STRETCH_DATA_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/../shared/data}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
head -c 200000 "$data_dir/tinyshakespeare/input.txt" | sed 's/./& /g' > "$work/train.txt"
tail -c 20000 "$data_dir/tinyshakespeare/input.txt" | sed 's/./& /g' > "$work/valid.txt"
"$stretch" preprocess --only-source --trainpref "$work/train.txt" --validpref "$work/valid.txt" \
  --destdir "$work/bin" --workers 1 > /dev/null 2>&1
run() {  # name attn_span z
  local log="$work/$1.log"
  /usr/bin/time -f '%M' -o "$work/$1.rss" "$stretch" train "$work/bin" --task truncated_bptt_lm \
    --tokens-per-sample 64 --batch-size 4 --arch adaptive_span --n-layer 2 --d-model 128 --n-head 4 \
    --d-inner 512 --attn-span "$2" --adapt-span-init "$3" --aux-loss-scaler 0 --criterion adaptive_span_loss \
    --optimizer adagrad_with_grad_clip --adagrad-clip 0.03 --lr 1e-9 --max-update "$updates" --no-save \
    --disable-validation --log-format json --log-interval 1 --log-full-precision --threads 1 --no-progress-bar \
    > "$log" 2>&1
  python3 - "$1" "$2" "$log" "$work/$1.rss" <<'PY'
import json, statistics, sys
name, span, log, rss = sys.argv[1:5]
rows = [json.loads(l[l.index("{"):]) for l in open(log) if "train_inner" in l]
walls = [r["train_wall"] for r in rows if r["num_updates"] >= 4]
print(json.dumps({"run": name, "attn_span": int(span), "max_span": rows[-1]["max_span"],
                  "step_s": round(statistics.median(walls), 5), "peak_rss_mb": round(int(open(rss).read()) / 1024, 1)}))
PY
}
out="$work/all.jsonl"
for round in 1 2; do
  for r in "learned 8192 0.0083" "fixed128 128 0.53125" "full8192 8192 1"; do
    run $r | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import json, sys
best = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    b = best.setdefault(r["run"], r)
    if r["step_s"] < b["step_s"]:
        best[r["run"]] = dict(r, peak_rss_mb=min(r["peak_rss_mb"], b["peak_rss_mb"]))
l, f, u = best["learned"], best["fixed128"], best["full8192"]
print(f"learned/fixed128: step {l['step_s'] / f['step_s']:.2f}x, peak RSS {l['peak_rss_mb'] / f['peak_rss_mb']:.2f}x")
print(f"full8192/learned: step {u['step_s'] / l['step_s']:.2f}x, peak RSS {u['peak_rss_mb'] / l['peak_rss_mb']:.2f}x")
PY
