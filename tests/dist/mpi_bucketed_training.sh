#!/usr/bin/env bash
# 2-rank training with the bucketed all-reduce overlapped with backward (--ddp-backend
# pytorch_ddp, the default) must log exactly the losses and gradient norms of the per-parameter
# all-reduce after backward (--ddp-backend legacy_ddp): for 2 ranks both sums are g0 + g1 in
# every element, so equality is exact (string equality of the full-precision JSON values).
# Covered: --bucket-cap-mb 25 (default) and 0 (one parameter per bucket), --update-freq 1 and 2
# (only the last micro-batch's backward is overlapped), dropout on (masks per rank and micro).
# Missing mpirun: a failure under CI=true, else exit 77 (tests/oracle_skip.sh).
set -euo pipefail
stretch="$1"; data="$2"
. "$(dirname "${BASH_SOURCE[0]}")/../oracle_skip.sh"
oracle_require_cmd mpirun "apt-get install openmpi-bin, i.e. bash scripts/setup.sh"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
require_data_file "$data/ptb/ptb.valid.txt" "$data/ptb/ptb.test.txt"
"$stretch" preprocess --only-source --trainpref "$data/ptb/ptb.valid.txt" --validpref "$data/ptb/ptb.test.txt" \
  --destdir "$work/bin" >/dev/null 2>&1
common=("$work/bin" --arch transformer_lm_tiny --tokens-per-sample 32 --max-tokens 256
        --required-batch-size-multiple 1 --optimizer adam --lr 0.003 --max-update 4 --log-interval 1
        --no-save --disable-validation --dropout 0.1 --log-format json --log-full-precision --threads 1
        --no-progress-bar --seed 3)
run() {  # NAME ARGS...: 2 ranks
  local name="$1"; shift
  mpirun --allow-run-as-root --oversubscribe -np 2 "$stretch" train "${common[@]}" "$@" 2>"$work/$name.err" >"$work/$name.jsonl" \
    || { echo "FAIL: mpirun stretch train $* exited non-zero:"; tail -5 "$work/$name.err"; exit 1; }
}
run legacy --ddp-backend legacy_ddp
run bucketed
run bucketed0 --bucket-cap-mb 0 --ddp-backend c10d
run legacy_uf2 --ddp-backend legacy_ddp --update-freq 2
run bucketed_uf2 --bucket-cap-mb 0 --update-freq 2
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
tag = " | train_inner | "
def rows(name):
    r = [json.loads(l.split(tag, 1)[1]) for l in open(f"{work}/{name}.jsonl") if tag in l]
    assert len(r) == 4, (name, len(r))
    return [(x["num_updates"], repr(x["loss"]), repr(x["gnorm"]), x["wpb"]) for x in r]
for ref, new in (("legacy", "bucketed"), ("legacy", "bucketed0"), ("legacy_uf2", "bucketed_uf2")):
    a, b = rows(ref), rows(new)
    assert a == b, f"{new} differs from {ref}:\n{a}\n{b}"
    print(f"ok: {new} == {ref} (4 updates, loss and gnorm identical)")
assert rows("legacy") != rows("legacy_uf2")  # the runs differ, so equality above means something
PY
