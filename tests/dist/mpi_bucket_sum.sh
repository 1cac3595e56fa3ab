#!/usr/bin/env bash
# The bucketed all-reduce's sums against the rank-order sum, bit for bit, under mpirun with NP
# ranks (tests/dist/mpi/bucket_sum_check.cpp says what is checked). Missing mpirun: a failure
# under CI=true, else exit 77 (tests/oracle_skip.sh).
set -euo pipefail
check="$1"; np="$2"
. "$(dirname "${BASH_SOURCE[0]}")/../oracle_skip.sh"
oracle_require_cmd mpirun "apt-get install openmpi-bin, i.e. bash scripts/setup.sh"
OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe -np "$np" "$check"
