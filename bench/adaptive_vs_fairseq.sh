#!/usr/bin/env bash
# bench/adaptive_vs_fairseq.sh — training and eval-lm tokens/s of stretch against REAL fairseq 0.12.2
# (PyTorch CPU, the oracle venv of tests/fairseq/setup_fairseq.sh) at WikiText-103's vocabulary size
# V = 267,744 with the wiki103 layout (adaptive input + adaptive softmax, tied tables and projections,
# cutoffs 20000,60000, factor 4), in one run (issue 12's speed goal: >= 1.3x fairseq's PyTorch).
#
# The dictionary: WikiText-103 valid's words by frequency, then filler words to 267,744 entries, so
# the text's frequent words sit in the head and its rare ones in the tails as with the real
# dictionary (the filler words never occur: the last band is mostly rows no target reaches, as in
# WikiText-103 where most of the 207,744 tail words are rare). Body: --arch transformer_lm_wiki103
# with 2 layers, C 256, 4 heads, F 1024 (the preset's dropouts, tied adaptive weights and
# projections; stretch with --pos sinusoidal, fairseq's positions, not its ALiBi default). Training: WikiText-103 valid, B 2 x T 256 per update (--max-tokens 512), NAG,
# --clip-norm 0.1, UPDATES updates, each side's train_inner wps (fairseq's meter: tokens over the
# wall time of the last --log-interval updates), the first interval (warm-up) left out. Evaluation:
# fairseq's trained checkpoint, scored by both on the first LINES lines of WikiText-103 test, blocks
# of 256 (the model's positions: fairseq-eval-lm silently skips longer blocks); each side's "Evaluated N tokens in Xs (R tokens/s)" line. Both on THREADS threads,
# alternately, ROUNDS times; the best round per side is compared (the host is shared).
# Results and command: docs/BENCHMARKS.md "Training and evaluation against real fairseq at V = 267,744".
# Usage: bash bench/adaptive_vs_fairseq.sh [build-dir] [threads] [updates] [rounds] [lines]
set -euo pipefail
export OMP_WAIT_POLICY=passive
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
threads="${2:-1}"
updates="${3:-40}"
rounds="${4:-2}"
lines="${5:-300}"
V=267744
name=adaptive_vs_fairseq
# shellcheck source=bench/fairseq_common.sh
source "$root/bench/fairseq_common.sh"

head -n "$lines" "$wt/wiki.test.tokens" > "$work/test.txt"
fairseq-preprocess --only-source --trainpref "$wt/wiki.valid.tokens" --destdir "$work/dict0" --workers 1 \
  > "$work/preprocess0.log" 2>&1
python3 - "$work/dict0/dict.txt" "$work/dict.txt" "$V" <<'PY'
import sys
words = [l for l in open(sys.argv[1], encoding="utf-8") if not l.startswith("madeupword")]
want = int(sys.argv[3]) - 4  # fairseq's Dictionary adds <s> <pad> </s> <unk>
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.writelines(words)
    f.writelines(f"stretchfill{i} 1\n" for i in range(want - len(words)))
PY
fairseq-preprocess --only-source --srcdict "$work/dict.txt" --trainpref "$wt/wiki.valid.tokens" \
  --validpref "$work/test.txt" --destdir "$work/data-bin" --workers 1 > "$work/preprocess.log" 2>&1

model=(--arch transformer_lm_wiki103 --decoder-layers 2 --decoder-embed-dim 256 --decoder-input-dim 256
       --decoder-output-dim 256 --decoder-ffn-embed-dim 1024 --decoder-attention-heads 4
       --adaptive-input-cutoff 20000,60000 --adaptive-softmax-cutoff 20000,60000 --criterion adaptive_loss)
train=(--task language_modeling --tokens-per-sample 256 --max-tokens 512 --optimizer nag --lr 0.0001
       --clip-norm 0.1 --seed 1 --max-update "$updates" --log-format simple --log-interval 10
       --disable-validation --no-epoch-checkpoints)
evalf=(--gen-subset valid --tokens-per-sample 256 --max-tokens 2048)  # fairseq skips blocks over its 256 positions
for round in $(seq "$rounds"); do
  rm -rf "$work/ck-fairseq" "$work/ck-stretch"
  fairseq-train "$work/data-bin" --cpu --num-workers 0 --ddp-backend legacy_ddp --no-save-optimizer-state \
    --save-dir "$work/ck-fairseq" "${model[@]}" "${train[@]}" > "$work/fairseq-train.log" 2>&1 \
    || { tail -20 "$work/fairseq-train.log" >&2; exit 1; }
  "$stretch" train "$work/data-bin" --threads "$threads" --save-dir "$work/ck-stretch" --pos sinusoidal \
    "${model[@]}" "${train[@]}" \
    > "$work/stretch-train.log" 2>&1 || { tail -20 "$work/stretch-train.log" >&2; exit 1; }
  grep -hoE "num\. (shared )?model params: [0-9,]+|[0-9]+ parameters, vocabulary [0-9]+" "$work/fairseq-train.log" \
    "$work/stretch-train.log" | sed "s/^/params $round: /"
  grep -E "train_inner" "$work/fairseq-train.log" | sed "s/^/fairseq-train $round: /"
  grep -E "train_inner" "$work/stretch-train.log" | sed "s/^/stretch-train $round: /"
  "$stretch" eval-lm "$work/data-bin" --path "$work/ck-fairseq/checkpoint_last.pt" --threads "$threads" "${evalf[@]}" \
    2>&1 | grep -E "^Evaluated|^Loss" | sed "s/^/stretch-eval $round: /"
  fairseq-eval-lm "$work/data-bin" --path "$work/ck-fairseq/checkpoint_last.pt" --cpu --num-workers 0 "${evalf[@]}" \
    2>&1 | grep -E "Evaluated|Loss \(base 2\)" | sed -E "s/^.*\| (Evaluated|Loss)/\1/; s/^/fairseq-eval $round: /"
done | tee "$work/out.txt"
python3 - "$work/out.txt" <<'PY'
import re, sys
best, loss, first = {}, {}, {}
for line in open(sys.argv[1]):
    side, rnd = line.split()[0], line.split()[1]
    if side.endswith("-train"):
        m = re.search(r"wps=([\d.]+)", line)
        if not m:
            continue
        if (side, rnd) not in first:  # the first interval holds the warm-up: left out
            first[(side, rnd)] = True
            continue
        best[side] = max(best.get(side, 0.0), float(m.group(1)))
    m = re.search(r"Evaluated ([\d,]+) tokens in ([\d.]+)s \(([\d.]+) tokens/s\)", line)
    if m:
        best[side] = max(best.get(side, 0.0), float(m.group(3)))
    m = re.search(r"Loss \(base 2\): ([\d.]+)", line)
    if m:
        loss.setdefault(side, set()).add(m.group(1))
for what in ("train", "eval"):
    s, f = best.get(f"stretch-{what}"), best.get(f"fairseq-{what}")
    if s is None or f is None:
        sys.exit(f"adaptive_vs_fairseq: no {what} figure for both sides (see the lines above)")
    print(f"{what}: stretch {s:,.1f} tokens/s, fairseq {f:,.1f} tokens/s, ratio {s / f:.2f}x")
print(f"eval loss (base 2), same weights: stretch {sorted(loss.get('stretch-eval', []))} "
      f"fairseq {sorted(loss.get('fairseq-eval', []))}")
PY
