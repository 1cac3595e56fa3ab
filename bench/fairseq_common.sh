# bench/fairseq_common.sh — sourced by the benches that run REAL fairseq 0.12.2 next to stretch
# (eval_vs_fairseq.sh, adaptive_vs_fairseq.sh): the oracle venv of tests/fairseq/setup_fairseq.sh,
# WikiText-103 from the shared data folder, a work folder removed on exit, the thread count for
# both sides. Before sourcing set: name (for messages), root (the repository), build, threads.
# Sets: venv, wt (the WikiText-103 folder), stretch (the binary), work; puts fairseq-* on PATH.
venv="${STRETCH_FAIRSEQ_VENV:-$build/fairseq-venv}"
wt="${STRETCH_DATA:-$root/../shared/data}/wikitext-103"
[ -x "$venv/bin/fairseq-train" ] || { echo "$name: run tests/fairseq/setup_fairseq.sh first" >&2; exit 1; }
stretch="$build/bin/stretch"
[ -x "$stretch" ] || { echo "$name: no $stretch: build first" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export PATH="$venv/bin:$PATH" OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"
