#!/usr/bin/env bash
# bench/normformer_cost.sh [REPEATS] — what NormFormer's four flags cost a training step
# (bench/flag_cost.sh: small and medium models, T 128, 2 threads, interleaved runs).
# docs/BENCHMARKS.md "NormFormer's cost".
exec bash "$(dirname "${BASH_SOURCE[0]}")/flag_cost.sh" NormFormer "${1:-4}" \
  --scale-heads --scale-attn --scale-fc --scale-resids
