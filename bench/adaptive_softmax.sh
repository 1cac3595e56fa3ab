#!/usr/bin/env bash
# bench/adaptive_softmax.sh — the adaptive softmax against the full softmax at WikiText-103's
# V = 267,744 on a small body (2 layers, C 256, 4 heads, F 1024), in one run: training tokens/s
# (B 2 x T 256: forward, adaptive_loss / cross_entropy, backward, clip, NAG) and eval-lm tokens/s
# (one window of 512), each head alternately, and the ratios adaptive / full. The adaptive model is
# the wiki103 layout: adaptive input, tied tables and projections, cutoffs 20000,60000, factor 4.
# Targets and inputs are uniform over V (bench_model's batches), so 78% of them fall in the
# 207,744-word last band: far more tail work than text has (where most tokens are frequent words),
# i.e. a pessimistic case for the adaptive softmax. Ratios of tokens per CPU second (steadier than
# wall time on a shared host) and per wall second, best of two alternating rounds.
# Usage: bash bench/adaptive_softmax.sh [build-dir] [threads]   (JSON lines, then the ratios)
set -euo pipefail
export OMP_WAIT_POLICY=passive
build="${1:-build}"
threads="${2:-1}"
bench="$build/bench/bench_model"
body=(--threads "$threads" --vocab 267744 --layers 2 --embed-dim 256 --heads 4 --ffn-dim 1024 --seed 1)
adaptive='{"adaptive_input":true,"adaptive_input_cutoff":"20000,60000","adaptive_softmax_cutoff":"20000,60000","tie_adaptive_weights":true,"tie_adaptive_proj":true,"adaptive_softmax_dropout":0.2,"criterion":"adaptive_loss"}'
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for round in 1 2; do
  for head in full adaptive; do
    extra=()
    [ "$head" = adaptive ] && extra=(--model-json "$adaptive")
    "$bench" train "${body[@]}" --batch 2 --tokens-per-sample 256 --warmup 1 --steps 3 "${extra[@]}" | tee -a "$out"
    "$bench" eval "${body[@]}" --lengths 512 --warmup 1 --steps 3 "${extra[@]}" | tee -a "$out"
  done
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for field, unit in (("tokens_per_cpu_s", "tokens/CPU-s"), ("tokens_per_s", "tokens/s")):
    best = {}
    for r in rows:  # the better of the two rounds per (mode, head): the machine is shared
        k = (r["mode"], r["head"])
        best[k] = max(best.get(k, 0), r[field])
    for mode in ("train", "eval"):
        a, f = best[(mode, "adaptive")], best[(mode, "softmax")]
        print(f"{mode}: adaptive {a:.1f} {unit}, full softmax {f:.1f} {unit}, ratio {a / f:.2f}x")
PY
