#!/usr/bin/env bash
# Transformer-XL, ALiBi with memory and Adaptive Span of the same size for the same time on the
# enwik8 prefix (issues 13 and 14): seed 004's commands scaled down, with the program name swapped.
#   1. data: scripts/data.sh enwik8 (local: the 10^6-byte prefix as prep_enwik8-format text), then
#      the seed's `preprocess --only-source ... --joined-dictionary`;
#   2. three `stretch train --task truncated_bptt_lm` runs started at the same moment, each with
#      --threads THREADS and stopped by --stop-time-hours (MINUTES), so the load of a shared machine
#      hits them alike; /usr/bin/time records the CPU seconds:
#        xl     --arch transformer_xl, seed 004's adam + cosine (lr 0.00025, clip 0.25, warm-up 0)
#        alibi  --arch transformer_lm --pos alibi --mem-len M (examples/alibi_memory.sh), seed 000's
#               nag + cosine (lr 1, t-mult 2, shrink 0.75, warm-up from 1e-7, min-lr 1e-4, clip 0.1)
#        span   --arch adaptive_span --attn-span M, seed 004's adagrad_with_grad_clip 0.03 + fixed
#               (lr 0.07, aux loss 5e-07)
#      The seeds' schedules are in updates; their lengths scale with UPDATES (the horizon, also the
#      --max-update cap): warm-up 16000/286000 (alibi) and 32000/600000 (span) of it, alibi's first
#      cosine period 270000/286000 of it, xl's cosine period all of it.
#   3. eval-lm on valid and test the seed's way: --task truncated_bptt_lm --batch-size 8
#      --tokens-per-sample T (span, alibi); xl with the seed's --tokens-per-sample 80 and
#      --model-overrides "{'mem_len': 2100, 'clamp_len': 820, 'same_length': True}" scaled by
#      T/512 and M/512 (and once more as trained, T and M, on test);
#   4. $OUT/results.{md,csv,json} (bpc = eval-lm's bits per byte, updates, tokens/s, CPU seconds,
#      parameters), $OUT/spans.tsv (avg_span / max_span of span's JSON train lines) and the plot
#      $OUT/spans.svg (gnuplot) — examples/enwik8_xl_alibi_span_report.py.
# Same size: L layers, C model width, H heads of C/H, FFN F, T tokens per block, M memory rows (xl,
# alibi) = maximum span (span), B streams, DROPOUT. What that cannot make equal (the parameter
# counts are printed): XL's r_net and per-layer r biases, XL's and span's bias-free projections,
# span's shared key_pe [C/H, M] and per-head span parameters, ALiBi's projection biases and pre-norm
# layers (XL and span are post-norm).
# Environment:
#   MINUTES training time per model (default 8; the three run at once)  THREADS per model (1)
#   UPDATES schedule horizon and --max-update cap (default 1000: set it above what the fastest model
#     reaches in MINUTES, so that the time, not the cap, stops every run; results say which did)
#   L (4) C (128) H (4) F (512) T (64) M (64: T = M as in the seed's 512 / 512) B (8) DROPOUT (0.1)
#   LOG_INTERVAL (25)  OUT (default runs/enwik8_xl_alibi_span)
# A few minutes on 900 KB of text is a test of the recipe, not the seeds' setting (12 layers,
# C 512, T 512, 10^8 bytes, 400k-600k updates on 4 GPUs); docs/RESULTS.md has a run next to the
# published numbers.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
minutes="${MINUTES:-8}"
threads="${THREADS:-1}"
updates="${UPDATES:-1000}"
L="${L:-4}" C="${C:-128}" H="${H:-4}" F="${F:-512}" T="${T:-64}" M="${M:-64}" B="${B:-8}"
dropout="${DROPOUT:-0.1}"
log_interval="${LOG_INTERVAL:-25}"
out="${OUT:-runs/enwik8_xl_alibi_span}"
stretch="${STRETCH_BIN:-build/bin/stretch}"
die() { echo "enwik8_xl_alibi_span.sh: error: $*" >&2; exit 1; }
num() { [[ "$2" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "$1=$2: must be a non-negative number"; }
int() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1=$2: must be a positive integer"; }
num MINUTES "$minutes"
for v in THREADS:$threads UPDATES:$updates L:$L C:$C H:$H F:$F T:$T M:$M B:$B LOG_INTERVAL:$log_interval; do int "${v%%:*}" "${v#*:}"; done
num DROPOUT "$dropout"
[ $((C % H)) = 0 ] || die "C=$C is not a multiple of H=$H (heads of C/H)"
[ "$updates" -ge 20 ] || die "UPDATES=$updates: the scaled warm-ups need at least 20"
command -v gnuplot >/dev/null || die "gnuplot not found (Debian package gnuplot-nox; scripts/setup.sh installs it)"
[ -x /usr/bin/time ] || die "/usr/bin/time not found (Debian package time)"
[ -x "$stretch" ] || { cmake -S . -B build -G Ninja >/dev/null && cmake --build build --target stretch; }
hours="$(python3 -c "print($minutes / 60)")"
# 1. Data: the seed's preprocess on prep_enwik8-format text of the local prefix.
[ -f data/enwik8/train.txt ] || bash scripts/data.sh enwik8 --source local --dest data-bin/enwik8
mkdir -p "$out"
bin="$out/data-bin"
if [ ! -f "$bin/dict.txt" ]; then
  "$stretch" preprocess --only-source --trainpref data/enwik8/train.txt --validpref data/enwik8/valid.txt \
    --testpref data/enwik8/test.txt --destdir "$bin" --joined-dictionary --workers 2 > "$out/preprocess.log" 2>&1 ||
    { cat "$out/preprocess.log" >&2; die "preprocess failed (log above)"; }
fi
# 2. Training: the same size, data order, batch and time for all three.
common=(--task truncated_bptt_lm --tokens-per-sample "$T" --batch-size "$B" --update-freq 1 --dropout "$dropout"
        --max-update "$updates" --stop-time-hours "$hours" --seed 2 --log-format json --log-interval "$log_interval"
        --no-progress-bar --no-epoch-checkpoints --validate-interval-updates "$updates" --max-valid-steps 20
        --threads "$threads")
xl=(--user-dir examples/truncated_bptt --arch transformer_xl --n-layer "$L" --d-model "$C" --n-head "$H"
    --d-head "$((C / H))" --d-inner "$F" --dropatt 0.0 --mem-len "$M"
    --optimizer adam --clip-norm 0.25 --lr-scheduler cosine --warmup-updates 0 --lr 0.00025)
alibi=(--arch transformer_lm --pos alibi --decoder-layers "$L" --decoder-embed-dim "$C" --decoder-attention-heads "$H"
       --decoder-ffn-embed-dim "$F" --mem-len "$M"
       --optimizer nag --lr 1.0 --t-mult 2 --lr-period-updates "$((updates * 270000 / 286000))" --lr-scheduler cosine
       --lr-shrink 0.75 --warmup-updates "$((updates * 16000 / 286000))" --warmup-init-lr 1e-07 --stop-min-lr 1e-09
       --min-lr 0.0001 --clip-norm 0.1)
span=(--user-dir examples/adaptive_span --fp16-no-flatten-grads --arch adaptive_span --n-layer "$L" --d-model "$C"
      --n-head "$H" --d-inner "$F" --attn-span "$M" --optimizer adagrad_with_grad_clip --adagrad-clip 0.03
      --lr-scheduler fixed --warmup-updates "$((updates * 32000 / 600000))" --batch-size-valid "$B" --lr 0.07
      --criterion adaptive_span_loss --aux-loss-scaler 5e-07)
models=(xl alibi span)
for m in "${models[@]}"; do rm -rf "${out:?}/$m"; mkdir -p "$out/$m"; done
echo "training xl, alibi and span at once for $minutes min each ($threads thread(s) each; load: $(uptime | sed 's/.*load/load/'))"
uptime > "$out/uptime.txt"
pids=()
for m in "${models[@]}"; do
  case "$m" in xl) args=("${xl[@]}") ;; alibi) args=("${alibi[@]}") ;; span) args=("${span[@]}") ;; esac
  /usr/bin/time -f "elapsed_s %e user_s %U sys_s %S peak_rss_kb %M" -o "$out/$m/time.txt" \
    "$stretch" train "$bin" "${common[@]}" "${args[@]}" --save-dir "$out/$m/checkpoints" > "$out/$m/train.log" 2>&1 &
  pids+=($!)
done
# The load in the middle of the run (the report quotes it).
( sleep "$(python3 -c "print(max(1, $minutes * 30))")"; uptime >> "$out/uptime.txt" ) &
sampler=$!
failed=()
for i in "${!models[@]}"; do wait "${pids[$i]}" || failed+=("${models[$i]}"); done
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
uptime >> "$out/uptime.txt"
for m in "${failed[@]}"; do echo "== $m: training failed, the end of $out/$m/train.log:" >&2; tail -5 "$out/$m/train.log" >&2; done
[ ${#failed[@]} = 0 ] || die "training failed for: ${failed[*]}"
# 3. Evaluation, the seed's way, all seven at once (XL's long-memory evaluation is the longest).
evaluate() {  # model split tag extra-args...
  local m="$1" split="$2" tag="$3"; shift 3
  "$stretch" eval-lm "$bin" --path "$out/$m/checkpoints/checkpoint_last.pt" --task truncated_bptt_lm --batch-size 8 \
    --gen-subset "$split" --threads "$threads" --log-format none \
    --results-json "$out/$m/eval_$tag.json" "$@" > "$out/$m/eval_$tag.log" 2>&1
}
xl_T=$(( (80 * T + 256) / 512 )); [ "$xl_T" -ge 1 ] || xl_T=1
xl_over="{'mem_len': $(( (2100 * M + 256) / 512 )), 'clamp_len': $(( (820 * M + 256) / 512 )), 'same_length': True}"
echo "evaluating (xl: --tokens-per-sample $xl_T --model-overrides \"$xl_over\")"
jobs_=()
for split in valid test; do
  evaluate xl "$split" "$split" --user-dir examples/truncated_bptt --tokens-per-sample "$xl_T" --model-overrides "$xl_over" &
  jobs_+=("xl:$split:$!")
  evaluate alibi "$split" "$split" --tokens-per-sample "$T" &
  jobs_+=("alibi:$split:$!")
  evaluate span "$split" "$split" --user-dir examples/adaptive_span --tokens-per-sample "$T" &
  jobs_+=("span:$split:$!")
done
evaluate xl test test_as_trained --user-dir examples/truncated_bptt --tokens-per-sample "$T" &
jobs_+=("xl:test_as_trained:$!")
failed=()
for j in "${jobs_[@]}"; do
  IFS=: read -r m tag pid <<< "$j"
  if wait "$pid"; then grep -E 'Bits per byte' "$out/$m/eval_$tag.log" | sed "s/^/$m $tag: /"
  else failed+=("$out/$m/eval_$tag.log"); tail -5 "$out/$m/eval_$tag.log" >&2; fi
done
[ ${#failed[@]} = 0 ] || die "eval-lm failed: ${failed[*]}"
# 4. The table, csv/json, spans.tsv and the plot.
python3 examples/enwik8_xl_alibi_span_report.py "$out" --minutes "$minutes" --threads "$threads" \
  --size "L=$L C=$C H=$H F=$F T=$T M=$M B=$B dropout=$dropout" --xl-eval "T=$xl_T $xl_over" --max-span "$M"
