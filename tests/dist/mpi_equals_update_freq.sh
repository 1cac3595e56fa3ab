#!/usr/bin/env bash
# Two MPI ranks with --max-tokens M take batches 2u and 2u+1 of each update (fairseq's sharding),
# so with dropout 0 they must log the same losses as one process with --update-freq 2. The only
# difference is the order of one float addition per gradient element (allreduce vs in-place
# accumulation), so losses agree to ~1e-7 relative; 1e-5 is the bound checked.
set -euo pipefail
stretch="$1"; data="$2"
. "$(dirname "${BASH_SOURCE[0]}")/../oracle_skip.sh"  # missing mpirun: a failure under CI=true, else exit 77
oracle_require_cmd mpirun "apt-get install openmpi-bin, i.e. bash scripts/setup.sh"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
require_data_file "$data/ptb/ptb.valid.txt" "$data/ptb/ptb.test.txt"
"$stretch" preprocess --only-source --trainpref "$data/ptb/ptb.valid.txt" --validpref "$data/ptb/ptb.test.txt" \
  --destdir "$work/bin" >/dev/null 2>&1
common=("$work/bin" --arch transformer_lm_tiny --tokens-per-sample 32 --max-tokens 256
        --required-batch-size-multiple 1 --optimizer adam --lr 0.003 --max-update 5 --log-interval 1
        --no-save --disable-validation --dropout 0 --log-format json --log-full-precision --threads 1 --no-progress-bar --seed 3)
mpirun --allow-run-as-root --oversubscribe -np 2 "$stretch" train "${common[@]}" 2>/dev/null > "$work/mpi.jsonl"
"$stretch" train "${common[@]}" --update-freq 2 2>/dev/null > "$work/uf.jsonl"
python3 - "$work/mpi.jsonl" "$work/uf.jsonl" <<'PY'
import json, sys
tag = " | train_inner | "  # fairseq's "DATE TIME | INFO | train_inner | {...}"
a = [json.loads(l.split(tag, 1)[1]) for l in open(sys.argv[1]) if tag in l]
b = [json.loads(l.split(tag, 1)[1]) for l in open(sys.argv[2]) if tag in l]
assert len(a) == len(b) == 5, (len(a), len(b))
for x, y in zip(a, b):
    for k in ("loss", "gnorm"):
        rel = abs(x[k] - y[k]) / abs(y[k])
        assert rel < 1e-5, f"update {y['num_updates']} {k}: mpi {x[k]} vs update-freq {y[k]} (rel {rel:.2e})"
    assert x["wpb"] == y["wpb"] and x["bsz"] == y["bsz"], (x, y)
print(f"ok: {len(a)} updates, 2 MPI ranks == --update-freq 2")
PY
