#!/usr/bin/env bash
# The README's test command: set up, build, and run every test registered with CTest.
#   scripts/test.sh              Release build in build/, full suite (short forms of long checks)
#   scripts/test.sh --sanitize   address+undefined sanitizer build in build-asan/, unit tests
#   scripts/test.sh --tsan       ThreadSanitizer build in build-tsan/ (clang, libomp + Archer): the
#                                tests of the layers with OpenMP kernels, and a canary that must race
#   STRETCH_LONG=1 scripts/test.sh   also run the long forms (e.g. T = 16,384 attention)
# Data is read from ../shared/data (override with STRETCH_DATA_DIR).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Sleep rather than spin at OpenMP barriers: on a shared or oversubscribed machine (ctest -j,
# other jobs) spinning threads steal each other's time slices; on a quiet one the cost is tiny.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
cd "$here"
bash scripts/setup.sh

jobs="$(nproc)"

# ctest, then a banner listing every test CTest did not run (exit 77: a missing oracle, data or
# STRETCH_LONG; or not run at all), so that a skip is never read as a pass. Under CI=true a missing
# oracle is a failure instead (tests/oracle_skip.py); the banner still lists other skips.
run_ctest() {
  local dir="$1"; shift
  local log="$dir/ctest-output.log" rc=0
  ctest --test-dir "$dir" --output-on-failure "$@" 2>&1 | tee "$log" || rc=$?
  local skipped
  skipped="$(grep -E '^[[:space:]]*[0-9]+ - .* \((Skipped|Not Run|Disabled)\)[[:space:]]*$' "$log" || true)"
  if [ -n "$skipped" ]; then
    local bar; bar="$(printf '!%.0s' $(seq 1 100))"
    echo "$bar"
    echo "SKIPPED: $(printf '%s\n' "$skipped" | wc -l) test(s) did not run; nothing was checked by them:"
    printf '%s\n' "$skipped" | sed 's/^[[:space:]]*/  /'
    local reasons="$dir/Testing/Temporary/LastTest.log"
    if [ -f "$reasons" ] && grep -q '^SKIPPED (no independent check ran)' "$reasons"; then
      echo "why (missing oracles; CI=true turns each into a failure):"
      grep '^SKIPPED (no independent check ran)' "$reasons" | sort | uniq -c | sed 's/^/  /'
    fi
    echo "$bar"
  fi
  return "$rc"
}
if [ "${1:-}" = "--sanitize" ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRETCH_SANITIZE=ON \
        -DSTRETCH_BUILD_BENCH=OFF ${STRETCH_DATA_DIR:+-DSTRETCH_DATA_DIR=$STRETCH_DATA_DIR} >/dev/null
  cmake --build build-asan -j "$jobs"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  run_ctest build-asan -j "$jobs" -LE "parity|slow|memlimit"
  exit 0
fi

if [ "${1:-}" = "--tsan" ]; then
  # Every OpenMP region of the kernels (ops), their use by the models and autograd, the optimizers'
  # loops, with 2 threads: the concurrent linear backward (two sections, oneDNN or OpenBLAS on one
  # thread each) included. cmake/tsan.cmake explains tsan.env (one OpenMP runtime, Archer).
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DSTRETCH_TSAN=ON \
        -DSTRETCH_BUILD_BENCH=OFF -DSTRETCH_PYTHON_MODULE=OFF ${STRETCH_DATA_DIR:+-DSTRETCH_DATA_DIR=$STRETCH_DATA_DIR} >/dev/null
  tsan_tests=(test_core test_tensor test_data test_ops test_autograd test_models test_optim)
  # test_train (training runs, checkpoints, resumes: ~4 min more to build and 4 to run): long form
  # only, without the README command's 234M-parameter model (its STRETCH_LONG test): ThreadSanitizer's
  # shadow memory took it past 24 GB, and the kernel's OOM killer ended it (exit 137), not a report.
  [ "${STRETCH_LONG:-0}" = 1 ] && tsan_tests+=(test_train)
  declare -A tsan_filter=([test_train]="-TrainConfigCli.AlibiReadmeCommandTrainsOneUpdate")
  cmake --build build-tsan -j "$jobs" --target tsan_race_canary "${tsan_tests[@]}"
  set -a; . build-tsan/tsan.env; set +a
  export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ignore_noninstrumented_modules=1"
  export OMP_NUM_THREADS=2
  log="build-tsan/tsan-output.log"; : > "$log"
  bar="$(printf '!%.0s' $(seq 1 100))"
  # The canary must be reported (exit 66, a data race named): otherwise the stage could not fail.
  # (ARCHER_OPTIONS=verbose=1: Archer says it is active, on stdout, so only here.)
  rc=0; ARCHER_OPTIONS=verbose=1 build-tsan/tests/tsan_race_canary > build-tsan/canary.log 2>&1 || rc=$?
  if [ "$rc" != 66 ] || ! grep -q "WARNING: ThreadSanitizer: data race" build-tsan/canary.log \
     || ! grep -q "Archer detected OpenMP application with TSan" build-tsan/canary.log; then
    cat build-tsan/canary.log
    echo "$bar"; echo "TSAN STAGE BROKEN: the canary's race was not reported (exit $rc), so a pass would mean nothing"; echo "$bar"
    exit 1
  fi
  echo "tsan: the canary's race was reported, as it must be"
  for t in "${tsan_tests[@]}"; do
    rc=0; build-tsan/tests/"$t" --gtest_brief=1 --gtest_filter="${tsan_filter[$t]:-*}" >> "$log" 2>&1 || rc=$?
    if [ "$rc" != 0 ] || grep -q "WARNING: ThreadSanitizer" "$log"; then
      grep -B2 -A40 -m3 "WARNING: ThreadSanitizer\|Failure\|FAILED" "$log" | head -n 150
      echo "$bar"; echo "TSAN: $t failed (exit $rc; 66 = a ThreadSanitizer report): see above and $log"; echo "$bar"
      exit 1
    fi
    echo "tsan: $t passed, no report"
  done
  exit 0
fi

cmake -S . -B build -G Ninja -DSTRETCH_BUILD_TESTS=ON ${STRETCH_DATA_DIR:+-DSTRETCH_DATA_DIR=$STRETCH_DATA_DIR} >/dev/null
cmake --build build -j "$jobs"
run_ctest build -j "$jobs"
