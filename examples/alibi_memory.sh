#!/usr/bin/env bash
# ALiBi with Transformer-XL-style memory on the enwik8 prefix (issue 13, seed 004's commands with
# --arch transformer_lm --pos alibi in place of --arch transformer_xl): preprocess the seed's way
# (prep_enwik8-format text, --joined-dictionary), train with --task truncated_bptt_lm --mem-len,
# then evaluate as the seed does (--task truncated_bptt_lm --batch-size 8 --tokens-per-sample T)
# with the training memory and with a longer one (--model-overrides "{'mem_len': ...}"), and once
# without memory for comparison. Bits per byte (bpc) are printed by eval-lm.
# Environment:
#   UPDATES (default 1000)  T tokens per segment (default 64)  MEM memory rows (default 64)
#   BSZ streams per batch (default 8)  OUT results directory (default runs/alibi_memory)
#   STRETCH_BIN  the binary (default build/bin/stretch; built when missing)
# A few minutes on 2 CPU cores with the defaults; the numbers are a smoke test of the recipe on
# 900 KB of text, not an enwik8 result (docs/RESULTS.md "ALiBi with memory").
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
updates="${UPDATES:-1000}"
T="${T:-64}"
mem="${MEM:-64}"
bsz="${BSZ:-8}"
out="${OUT:-runs/alibi_memory}"
stretch="${STRETCH_BIN:-build/bin/stretch}"
[ -x "$stretch" ] || { cmake -S . -B build -G Ninja >/dev/null && cmake --build build --target stretch; }
# scripts/data.sh enwik8 (local: the 10^6-byte prefix) writes data/enwik8/{train,valid,test}.txt
# in prep_enwik8.py's format; the seed's preprocess command then runs on them as written.
[ -f data/enwik8/train.txt ] || bash scripts/data.sh enwik8 --source local --dest data-bin/enwik8
bin="$out/data-bin"
if [ ! -f "$bin/dict.txt" ]; then
  "$stretch" preprocess --only-source --trainpref data/enwik8/train.txt --validpref data/enwik8/valid.txt \
    --testpref data/enwik8/test.txt --destdir "$bin" --joined-dictionary --workers 2
fi
mkdir -p "$out"
common=(--task truncated_bptt_lm --tokens-per-sample "$T" --batch-size "$bsz" --arch transformer_lm_tiny
        --pos alibi --dropout 0.1 --optimizer adam --clip-norm 0.25 --lr-scheduler cosine --warmup-updates 0
        --lr 0.001 --max-update "$updates" --seed 2 --log-format json --log-interval 50 --no-progress-bar
        --no-epoch-checkpoints --validate-interval-updates "$updates" --max-valid-steps 20)
for run in memory nomemory; do
  [ "$run" = memory ] && m="$mem" || m=0
  [ -f "$out/$run/checkpoint_last.pt" ] ||
    "$stretch" train "$bin" "${common[@]}" --mem-len "$m" --save-dir "$out/$run" > "$out/$run.log" 2>&1
  grep '"valid_loss"' "$out/$run.log" | tail -1 || true
done
for spec in "memory:{}" "memory:{'mem_len': $((2 * mem))}" "nomemory:{}"; do
  run="${spec%%:*}" over="${spec#*:}"
  echo "== $run, --model-overrides \"$over\""
  "$stretch" eval-lm "$bin" --path "$out/$run/checkpoint_last.pt" --task truncated_bptt_lm --batch-size 8 \
    --tokens-per-sample "$T" --gen-subset test --model-overrides "$over" | grep -E 'Evaluated|Loss|Bits per byte'
done
