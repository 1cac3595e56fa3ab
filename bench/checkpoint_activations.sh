#!/usr/bin/env bash
# bench/checkpoint_activations.sh — --checkpoint-activations at a long context, in one run: peak
# RSS (VmHWM of the process: weights, gradients, optimizer state and activations together) and
# training step time of bench_model's full training steps (forward with dropout, loss, backward,
# clip, NAG; each in a fresh process so the peak is that configuration's own), without and with the
# flag, alternately, twice; the ratios with / without. A small model (4 layers, C 256, 4 heads,
# F 1024, V 8192, ALiBi) at B 1 x T 4096 by default, where the activations dominate the memory.
# Ratios only: the host is shared and loaded, so absolute times mean little; step time is also
# given per CPU second (steadier than wall time there).
# Usage: bash bench/checkpoint_activations.sh [build-dir] [threads] [T]   (JSON lines, then the ratios)
set -euo pipefail
export OMP_WAIT_POLICY=passive
build="${1:-build}"
threads="${2:-1}"
T="${3:-4096}"
bench="$build/bench/bench_model"
body=(train --threads "$threads" --vocab 8192 --layers 4 --embed-dim 256 --heads 4 --ffn-dim 1024 --seed 1
      --batch 1 --tokens-per-sample "$T" --dropout 0.1 --warmup 1 --steps 2)
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for round in 1 2; do
  "$bench" "${body[@]}" | tee -a "$out"
  "$bench" "${body[@]}" --checkpoint-activations | tee -a "$out"
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def best(flag, field, pick):
    return pick(r[field] for r in rows if r["checkpoint_activations"] == flag)
keep_rss, ckpt_rss = best(False, "peak_rss_mb", max), best(True, "peak_rss_mb", max)
keep_s, ckpt_s = best(False, "step_s", min), best(True, "step_s", min)
keep_c, ckpt_c = best(False, "tokens_per_cpu_s", max), best(True, "tokens_per_cpu_s", max)
T = rows[0]["T"]
print(f"T {T}: peak RSS {keep_rss:.0f} MB without, {ckpt_rss:.0f} MB with --checkpoint-activations: "
      f"ratio {ckpt_rss / keep_rss:.2f}")
print(f"T {T}: step {keep_s:.2f} s without, {ckpt_s:.2f} s with (best of 2): ratio {ckpt_s / keep_s:.2f}; "
      f"CPU seconds per token, with / without: {keep_c / ckpt_c:.2f}")
PY
