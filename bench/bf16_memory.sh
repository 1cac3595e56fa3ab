#!/usr/bin/env bash
# bench/bf16_memory.sh — peak memory of a training step in fp32, in `--bf16` as fp32 FMAs on bf16
# values (STRETCH_BF16_PRODUCTS=fp32) and in native bf16 (=native; needs AVX512_BF16 or AMX), on the
# small and medium models at T 128 and 512 (B 8, V 10,008, 2 threads): peak RSS (VmHWM) of
# bench_model's full training steps, each configuration in a fresh process, the three of a row adjacent.
# Prints one row per configuration with the ratios to fp32 (docs/BENCHMARKS.md, sessions 28, 29, 33).
# Usage: bash bench/bf16_memory.sh [bench_model]   (default build/bench/bench_model)
set -euo pipefail
bench="${1:-build/bench/bench_model}"
[ -x "$bench" ] || { echo "bf16_memory: $bench not found: build it first (cmake --build build --target bench_model)" >&2; exit 1; }
medium=(--layers 6 --embed-dim 512 --heads 8 --ffn-dim 2048)
# "MB (ratio to fp32 MB)", or n/a where the run printed nothing (native without AVX512_BF16 or AMX).
ratio() { [ -n "$1" ] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%s (%.2fx)", a, a / b }' || echo "n/a"; }
peak() { "$@" 2>/dev/null | sed -n 's/.*"peak_rss_mb":\([0-9.]*\).*/\1/p' | tail -1; }
echo "| model | T | fp32 MB | --bf16 fp32 FMAs MB (x fp32) | native bf16 MB (x fp32) |"
echo "|---|---|---|---|---|"
for model in small medium; do
  for T in 128 512; do
    extra=(); [ "$model" = medium ] && extra=("${medium[@]}")
    run=("$bench" train --vocab 10008 --steps 2 --warmup 1 --tokens-per-sample "$T" --threads 2 "${extra[@]}")
    fp32="$(peak "${run[@]}")"
    fma="$(STRETCH_BF16_PRODUCTS=fp32 peak "${run[@]}" --bf16)"
    native="$(STRETCH_BF16_PRODUCTS=native peak "${run[@]}" --bf16 || true)"
    echo "| $model | $T | $fp32 | $(ratio "$fma" "$fp32") | $(ratio "$native" "$fp32") |"
  done
done
