#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS] [TARGET...] — builds the libFuzzer targets (clang, ASan+UBSan, in
# build-fuzz/) and runs each for SECONDS (default 60) from its growing work corpus
# build-fuzz/corpus/<target>/ (seeded from tests/fuzz/corpus/<target>/), up to $(nproc) at a time:
# exploration, different inputs every run.
# tests/fuzz/run.sh --ci [TARGET...] — the deterministic form .ci/run uses: each target from a
# fresh copy of its committed corpus with -seed=1 and a fixed number of executions (ci_runs below,
# ~40 s each on the CI machine), so a run's verdict depends only on the code, never on the
# machine's speed or luck: CI stays a gate, and the open-ended search is the exploration form's
# job (run it before committing a parser change; docs/reliability.md).
# Both print executions, corpus size and crashes per target; exit 1 if any target found a crash,
# a leak, a hang (>10 s one input) or a >2 GB allocation. Findings are kept in
# build-fuzz/findings/<target>-*; add each to the corpus (it then replays in CTest as
# fuzz_replay_<target>) with a fix and a unit test.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$here"
ci=0
if [ "${1:-}" = --ci ]; then ci=1; shift; seconds=0; else seconds="${1:-60}"; shift || true; fi
# Executions per target in --ci mode (about 40 s each at the CI machine's rates, 2 at a time).
ci_runs() {
  case "$1" in
    pickle) echo 60000 ;;
    config_json) echo 180000 ;;
    safetensors) echo 250000 ;;
    mmidx) echo 330000 ;;
    *) echo 450000 ;;
  esac
}
build=build-fuzz
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
      -DSTRETCH_FUZZ=ON -DSTRETCH_BUILD_TESTS=OFF -DSTRETCH_BUILD_BENCH=OFF -DSTRETCH_MPI=OFF \
      ${CMAKE_CXX_COMPILER_LAUNCHER:+-DCMAKE_CXX_COMPILER_LAUNCHER=$CMAKE_CXX_COMPILER_LAUNCHER} >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzz_targets
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$build"/fuzz/fuzz_*; do targets+=("$(basename "$f" | sed 's/^fuzz_//')"); done
fi
mkdir -p "$build/findings" "$build/logs"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_one() {
  local t="$1" work="$build/corpus/$1" budget
  if [ "$ci" = 1 ]; then
    work="$build/ci-corpus/$t"
    rm -rf "$work"
    budget=(-seed=1 -runs="$(ci_runs "$t")")
  else
    budget=(-max_total_time="$seconds")
  fi
  mkdir -p "$work"
  cp -n tests/fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
  "$build/fuzz/fuzz_$t" "$work" "${budget[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/findings/$t-" >"$build/logs/$t.log" 2>&1
}
pids=() names=()
for t in "${targets[@]}"; do
  [ -x "$build/fuzz/fuzz_$t" ] || { echo "fuzz: no target '$t' (have: $(ls "$build/fuzz" | sed 's/fuzz_//' | tr '\n' ' '))"; exit 2; }
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do sleep 1; done
  run_one "$t" & pids+=($!) names+=("$t")
done
failed=0
printf '%-18s %12s %10s %8s %s\n' target executions exec/s corpus result
for i in "${!pids[@]}"; do
  t="${names[$i]}" rc=0
  wait "${pids[$i]}" || rc=$?
  log="$build/logs/$t.log"
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  corpus="$(ls "$build/$([ "$ci" = 1 ] && echo ci-corpus || echo corpus)/$t" | wc -l)"
  if [ "$rc" -eq 0 ]; then result="0 crashes"; else result="FINDING (exit $rc; $log, $(ls "$build/findings" | grep "^$t-" | tr '\n' ' '))"; failed=1; fi
  printf '%-18s %12s %10s %8s %s\n' "$t" "${execs:-?}" "${rate:-?}" "$corpus" "$result"
done
[ "$failed" -eq 0 ] || { echo "fuzz: findings above; the log's last lines:"; for t in "${names[@]}"; do grep -A12 -m1 "ERROR\|runtime error\|deadly\|uncaught" "$build/logs/$t.log" || true; done; }
exit "$failed"
