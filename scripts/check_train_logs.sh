#!/usr/bin/env bash
# scripts/check_train_logs.sh — do two stretch binaries train to the same numbers with 2 threads?
# The short companion of scripts/check_identity.sh (which runs everything on one thread): eight
# training runs with --log-full-precision — Transformer-XL (also with --clamp-len --same-length),
# transformer_lm pre- and post-norm, ALiBi with the XL memory (--mem-len, post- and pre-norm), and
# one head × one sequence in fp32 and --bf16 (where the attention backward takes its split
# schedule; skipped, and said so, on a CPU without bf16 matmul) — and one md5 per run of every loss, gnorm and
# valid_loss. Identical columns for REF and NEW mean the same numbers.
#   bash scripts/check_train_logs.sh REF_STRETCH NEW_STRETCH
#   EXTRA='--bf16' bash scripts/check_train_logs.sh REF NEW   the eight runs with these flags added
#     (e.g. every run under --bf16, for a change to the bf16 paths)
#   TOL=1e-4 bash scripts/check_train_logs.sh REF NEW   for a change that moves the last bits (a
#     different exp, a different summation order): per run, the largest relative difference of
#     any logged loss / gnorm / valid_loss, and a pass when every run stays within TOL.
# Data: data-bin/enwik8 and data-bin/ptb (scripts/data.sh enwik8|ptb makes them).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 REF_STRETCH NEW_STRETCH" >&2; exit 2; }
if [ -n "${TOL:-}" ] && ! python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 0 else 1)' "$TOL" 2>/dev/null; then
  echo "$0: TOL=$TOL is not a number >= 0 (e.g. TOL=1e-4)" >&2; exit 2
fi
for s in "$1" "$2"; do [ -x "$s" ] || { echo "$0: $s: not an executable stretch binary" >&2; exit 2; }; done
for d in data-bin/enwik8 data-bin/ptb; do
  [ -f "$d/dict.txt" ] || { echo "$0: $d/dict.txt missing: run scripts/data.sh $(basename "$d")" >&2; exit 1; }
done
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log=(--log-format json --log-interval 1 --no-progress-bar --no-save --log-full-precision --threads 2)
xl=(--task truncated_bptt_lm --arch transformer_xl --n-layer 2 --d-model 256 --n-head 4 --d-head 64 --d-inner 1024
    --tokens-per-sample 512 --batch-size 2 --mem-len 512 --dropout 0.1 --optimizer adam --clip-norm 0.25
    --lr 0.00025 --max-update 30 --seed 2)
lm=(--arch transformer_lm --decoder-layers 2 --decoder-embed-dim 64 --decoder-attention-heads 4
    --decoder-ffn-embed-dim 256 --tokens-per-sample 128 --max-tokens 1024 --optimizer nag --lr 0.1 --clip-norm 0.1
    --max-update 20 --seed 3 --dropout 0.1 --attention-dropout 0.1)
h1=(--arch transformer_lm --decoder-layers 2 --decoder-embed-dim 64 --decoder-attention-heads 1
    --decoder-ffn-embed-dim 256 --tokens-per-sample 256 --batch-size 1 --optimizer adam --lr 0.001 --max-update 20
    --seed 3 --dropout 0.1 --attention-dropout 0.1)
mem=(--task truncated_bptt_lm --arch transformer_lm --pos alibi --decoder-layers 2 --decoder-embed-dim 128
     --decoder-attention-heads 4 --decoder-ffn-embed-dim 512 --tokens-per-sample 128 --batch-size 2 --mem-len 128
     --dropout 0.1 --attention-dropout 0.1 --optimizer adam --clip-norm 0.25 --lr 0.00025 --max-update 20 --seed 2)
printf "%-12s %-10s %-10s %s\n" run ref new same
for side in ref new; do
  s="$1"; [ "$side" = new ] && s="$2"
  "$s" train data-bin/enwik8 "${xl[@]}" "${log[@]}" ${EXTRA:-} > "$work/$side.xl" 2>&1
  "$s" train data-bin/enwik8 "${xl[@]}" --clamp-len 100 --same-length "${log[@]}" ${EXTRA:-} > "$work/$side.xl_clamp" 2>&1
  "$s" train data-bin/ptb "${lm[@]}" "${log[@]}" ${EXTRA:-} > "$work/$side.lm_pre" 2>&1
  "$s" train data-bin/ptb "${lm[@]}" --post-norm "${log[@]}" ${EXTRA:-} > "$work/$side.lm_post" 2>&1
  "$s" train data-bin/enwik8 "${mem[@]}" --post-norm "${log[@]}" ${EXTRA:-} > "$work/$side.mem_post" 2>&1
  "$s" train data-bin/enwik8 "${mem[@]}" "${log[@]}" ${EXTRA:-} > "$work/$side.mem_pre" 2>&1
  "$s" train data-bin/ptb "${h1[@]}" "${log[@]}" ${EXTRA:-} > "$work/$side.h1" 2>&1
  # A CPU without bf16 matmul (e.g. AVX2-only Zen 3) refuses --bf16 at startup: that run is skipped below.
  "$s" train data-bin/ptb "${h1[@]}" --bf16 "${log[@]}" ${EXTRA:-} > "$work/$side.h1_bf16" 2>&1 || true
done
values() { grep -oE '"(loss|gnorm|valid_loss)": "?[0-9.e-]+' "$1"; }
digest() { values "$1" | md5sum | cut -c1-8; }
# Largest |ref − new| / |ref| over the logged values, in order; "count" when the runs logged
# different numbers of values.
max_rel() {
  python3 -c 'import re, sys
num = lambda f: [float(re.sub(r"^.*: \"?", "", l)) for l in open(f)]
a, b = num(sys.argv[1]), num(sys.argv[2])
print("count" if len(a) != len(b) or not a else "%.2e" % max(abs(x - y) / max(abs(x), 1e-30) for x, y in zip(a, b)))' \
    <(values "$1") <(values "$2")
}
status=0
[ -n "${TOL:-}" ] && printf "(TOL=%s: the last column is the largest relative difference)\n" "$TOL"
for run in xl xl_clamp lm_pre lm_post mem_post mem_pre h1 h1_bf16; do
  if [ "$run" = h1_bf16 ] && grep -q "bf16 matmul is not supported on this CPU" "$work/new.$run"; then
    printf "%-12s %s\n" "$run" "skipped: no bf16 matmul on this CPU"
    continue
  fi
  a="$(digest "$work/ref.$run")" b="$(digest "$work/new.$run")"
  [ "$(grep -c '"loss"' "$work/new.$run")" -gt 0 ] || { echo "$run: no loss logged: the run failed"; status=1; }
  if [ -n "${TOL:-}" ]; then
    rel="$(max_rel "$work/ref.$run" "$work/new.$run")"
    ok="$(python3 -c 'import sys; print("yes" if sys.argv[1] != "count" and float(sys.argv[1]) <= float(sys.argv[2]) else "NO")' "$rel" "$TOL")"
    printf "%-12s %-10s %-10s %s %s\n" "$run" "$a" "$b" "$ok" "$rel"
    [ "$ok" = yes ] || status=1
  else
    printf "%-12s %-10s %-10s %s\n" "$run" "$a" "$b" "$([ "$a" = "$b" ] && echo yes || echo NO)"
    [ "$a" = "$b" ] || status=1
  fi
done
exit $status
