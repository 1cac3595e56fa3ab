#!/usr/bin/env bash
# bench/eval_vs_fairseq.sh — eval-lm tokens/s of stretch against REAL fairseq-eval-lm (fairseq 0.12.2,
# PyTorch CPU, the oracle venv of tests/fairseq/setup_fairseq.sh) on the SAME model, in one run.
# The model is a small transformer_lm_wiki103 that real fairseq trains for one update (so the file
# is fairseq's, and stretch reads it through import-fairseq): 4 layers, C 256, 4 heads, F 1024,
# adaptive input + adaptive softmax with tied tables and projections, cutoffs 2000,8000 (factor 4),
# dictionary of WikiText-103 valid (V = 18,896). Scored text: the first LINES lines of WikiText-103
# test, non-overlapping blocks of 512 tokens (--tokens-per-sample 512 --max-tokens 2048, 4 blocks a
# batch), both on THREADS threads, alternately, ROUNDS times. Each side's figure is its own
# "Evaluated N tokens in Xs (R tokens/s)" line (fairseq's StopwatchMeter over the scoring loop,
# the same line in stretch: process start-up and model loading excluded on both sides), plus the
# loss both print (they must agree: same weights). The best round per side is compared (the host is
# shared). Usage: bash bench/eval_vs_fairseq.sh [build-dir] [threads] [lines] [rounds]
set -euo pipefail
export OMP_WAIT_POLICY=passive
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
threads="${2:-1}"
lines="${3:-600}"
rounds="${4:-2}"
name=eval_vs_fairseq
# shellcheck source=bench/fairseq_common.sh
source "$root/bench/fairseq_common.sh"

head -n "$lines" "$wt/wiki.test.tokens" > "$work/test.txt"
fairseq-preprocess --only-source --trainpref "$wt/wiki.valid.tokens" --validpref "$work/test.txt" \
  --destdir "$work/data-bin" --workers 1 > "$work/preprocess.log" 2>&1
fairseq-train "$work/data-bin" --task language_modeling --arch transformer_lm_wiki103 --cpu --seed 1 \
  --criterion adaptive_loss --ddp-backend legacy_ddp --decoder-layers 4 --decoder-embed-dim 256 \
  --decoder-input-dim 256 --decoder-output-dim 256 --decoder-ffn-embed-dim 1024 --decoder-attention-heads 4 \
  --adaptive-input-cutoff 2000,8000 --adaptive-softmax-cutoff 2000,8000 --tokens-per-sample 512 \
  --max-tokens 2048 --max-update 1 --optimizer nag --lr 0.0001 --no-save-optimizer-state \
  --no-epoch-checkpoints --disable-validation --num-workers 0 --save-dir "$work/ck" > "$work/train.log" 2>&1 \
  || { tail -20 "$work/train.log" >&2; exit 1; }
"$stretch" import-fairseq "$work/ck/checkpoint_last.pt" --out "$work/model.stretch" \
  --dict "$work/data-bin/dict.txt" | head -1
flags=(--gen-subset valid --tokens-per-sample 512 --max-tokens 2048)
for round in $(seq "$rounds"); do
  "$stretch" eval-lm "$work/data-bin" --path "$work/model.stretch" --threads "$threads" "${flags[@]}" \
    2>&1 | grep -E "^Evaluated|^Loss" | sed "s/^/stretch $round: /"
  fairseq-eval-lm "$work/data-bin" --path "$work/ck/checkpoint_last.pt" --cpu --num-workers 0 "${flags[@]}" \
    2>&1 | grep -E "Evaluated|Loss \(base 2\)" | sed -E "s/^.*\| (Evaluated|Loss)/\1/; s/^/fairseq $round: /"
done | tee "$work/out.txt"
python3 - "$work/out.txt" <<'PY'
import re, sys
best, loss = {}, {}
for line in open(sys.argv[1]):
    side = line.split()[0]
    m = re.search(r"Evaluated ([\d,]+) tokens in ([\d.]+)s \(([\d.]+) tokens/s\)", line)
    if m:
        best[side] = max(best.get(side, 0.0), float(m.group(3)))
    m = re.search(r"Loss \(base 2\): ([\d.]+)", line)
    if m:
        loss.setdefault(side, set()).add(m.group(1))
print(f"stretch {best['stretch']:.1f} tokens/s, fairseq {best['fairseq']:.1f} tokens/s, "
      f"ratio {best['stretch'] / best['fairseq']:.2f}x; loss (base 2) stretch {sorted(loss['stretch'])} "
      f"fairseq {sorted(loss['fairseq'])}")
PY
