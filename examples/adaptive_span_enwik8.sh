#!/usr/bin/env bash
# Adaptive Span on the enwik8 prefix (issue 14): seed 004's training and evaluation commands for
# `--arch adaptive_span` with the program name swapped, scaled down in --max-update and sizes:
# preprocess the seed's way (prep_enwik8-format text, --joined-dictionary), train with
# --task truncated_bptt_lm --criterion adaptive_span_loss --optimizer adagrad_with_grad_clip, print
# the learned spans over the updates (avg_span / max_span of the JSON train lines, fairseq's keys)
# into $OUT/spans.tsv, then evaluate as the seed does (--task truncated_bptt_lm --batch-size 8
# --tokens-per-sample T). Bits per byte (bpc) are printed by eval-lm.
# Environment:
#   UPDATES (default 1000)  T tokens per block (default 64)  SPAN --attn-span (default 1024)
#   AUX --aux-loss-scaler (default 5e-07, the seed's)  BSZ streams (default 8)
#   OUT results directory (default runs/adaptive_span)
#   STRETCH_BIN  the binary (default build/bin/stretch; built when missing)
# The numbers are a smoke test of the recipe on 900 KB of text, not an enwik8 result.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
updates="${UPDATES:-1000}"
T="${T:-64}"
span="${SPAN:-1024}"
aux="${AUX:-5e-07}"
bsz="${BSZ:-8}"
out="${OUT:-runs/adaptive_span}"
stretch="${STRETCH_BIN:-build/bin/stretch}"
[ -x "$stretch" ] || { cmake -S . -B build -G Ninja >/dev/null && cmake --build build --target stretch; }
[ -f data/enwik8/train.txt ] || bash scripts/data.sh enwik8 --source local --dest data-bin/enwik8
bin="$out/data-bin"
if [ ! -f "$bin/dict.txt" ]; then
  "$stretch" preprocess --only-source --trainpref data/enwik8/train.txt --validpref data/enwik8/valid.txt \
    --testpref data/enwik8/test.txt --destdir "$bin" --joined-dictionary --workers 2
fi
mkdir -p "$out"
if [ ! -f "$out/train/checkpoint_last.pt" ]; then
  "$stretch" train --user-dir examples/adaptive_span --data "$bin" --fp16-no-flatten-grads \
    --max-update "$updates" --task truncated_bptt_lm --tokens-per-sample "$T" --arch adaptive_span \
    --n-layer 4 --d-model 128 --n-head 4 --d-inner 512 --dropout 0.1 --attn-span "$span" \
    --optimizer adagrad_with_grad_clip --adagrad-clip 0.03 --validate-interval-updates "$updates" \
    --lr-scheduler fixed --warmup-updates $((updates / 10)) --batch-size-valid "$bsz" --lr 0.07 \
    --criterion adaptive_span_loss --batch-size "$bsz" --update-freq 1 --seed 2 --log-format json \
    --log-interval 25 --aux-loss-scaler "$aux" --max-valid-steps 20 --no-epoch-checkpoints \
    --no-progress-bar --save-dir "$out/train" > "$out/train.log" 2>&1
fi
# num_updates, loss (bpc), avg_span, max_span per logged update
python3 - "$out/train.log" > "$out/spans.tsv" <<'PY'
import json, sys
print("num_updates\tloss\tavg_span\tmax_span")
for line in open(sys.argv[1]):
    if "train_inner" in line and '"avg_span"' in line:
        j = json.loads(line[line.index("{"):])
        print(f"{j['num_updates']}\t{j['loss']}\t{j['avg_span']}\t{j['max_span']}")
PY
head -2 "$out/spans.tsv"; tail -1 "$out/spans.tsv"
"$stretch" eval-lm "$bin" --path "$out/train/checkpoint_last.pt" --user-dir examples/adaptive_span \
  --task truncated_bptt_lm --batch-size 8 --tokens-per-sample "$T" --gen-subset test | grep -E 'Evaluated|Loss|Bits per byte'
