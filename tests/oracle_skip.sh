# tests/oracle_skip.sh — the shell form of tests/oracle_skip.py (source it; do not run it).
# When an independent oracle (a program such as mpirun) is missing:
#   CI is "true" or "1" (any case; .ci/run exports CI=true)
#       prints "FAIL: <oracle> is missing under CI=true: <what to install>" and exits 1
#   otherwise
#       prints a "SKIPPED (no independent check ran): ..." banner and exits 77 (CTest: skipped)
# Usage:
#   . "$(dirname "${BASH_SOURCE[0]}")/../oracle_skip.sh"
#   oracle_require_cmd mpirun "apt-get install openmpi-bin, i.e. bash scripts/setup.sh"
# STRETCH_ORACLE_HIDE=mpirun,... treats the named programs as missing (tests/test_oracle_skip.py).
# Also require_data_file (below): a missing corpus file is a failure with its path named.

oracle_under_ci() {
  case "$(printf '%s' "${CI:-}" | tr '[:upper:]' '[:lower:]' | tr -d '[:space:]')" in
    true|1) return 0 ;;
    *) return 1 ;;
  esac
}

# oracle_missing ORACLE INSTALL [DETAIL]: never returns.
oracle_missing() {
  local oracle="$1" install="$2" detail="${3:-}" check
  check="$(basename "$0")"
  if oracle_under_ci; then
    echo "FAIL: $oracle is missing under CI=true: $install [$check${detail:+: $detail}]" >&2
    exit 1
  fi
  local bar
  bar="$(printf '!%.0s' $(seq 1 100))"
  {
    echo "$bar"
    echo "SKIPPED (no independent check ran): $oracle missing — install with $install"
    echo "  check: $check${detail:+ ($detail)}"
    echo "  stretch's numerics were NOT compared with the oracle; under CI=true this is a failure."
    echo "$bar"
  } >&2
  exit 77
}

# oracle_require_cmd PROGRAM INSTALL: returns when PROGRAM is on PATH (and not hidden).
oracle_require_cmd() {
  local prog="$1" install="$2" hide
  hide=",$(printf '%s' "${STRETCH_ORACLE_HIDE:-}" | tr -d '[:space:]'),"
  case "$hide" in
    *",$prog,"*) oracle_missing "$prog" "$install" "hidden by STRETCH_ORACLE_HIDE" ;;
  esac
  command -v "$prog" >/dev/null 2>&1 || oracle_missing "$prog" "$install" "not on PATH"
}

# require_data_file FILE...: returns when every FILE exists; otherwise prints which corpus file is
# missing and how to point the tests at the corpora, and exits 1 (a failure, as the Python checks
# report a missing corpus; the scripts would otherwise fail inside a silenced command).
require_data_file() {
  local f
  for f in "$@"; do
    [ -f "$f" ] && continue
    echo "FAIL: $f not found [$(basename "$0")]: set STRETCH_DATA_DIR (CMake cache or environment) to the corpora folder (default ../shared/data next to the repository)" >&2
    exit 1
  done
}
