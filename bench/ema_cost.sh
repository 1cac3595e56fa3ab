#!/usr/bin/env bash
# bench/ema_cost.sh [REPEATS] — what --store-ema costs a training step (bench/flag_cost.sh: small and
# medium models, T 128, 2 threads, interleaved runs). docs/BENCHMARKS.md "--store-ema's cost".
exec bash "$(dirname "${BASH_SOURCE[0]}")/flag_cost.sh" EMA "${1:-4}" --store-ema
