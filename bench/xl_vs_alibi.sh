#!/usr/bin/env bash
# bench/xl_vs_alibi.sh — Transformer-XL (--arch transformer_xl) against ALiBi with the same memory
# (--arch transformer_lm --pos alibi --post-norm --mem-len) at the same size, in one run, through
# `stretch train --task truncated_bptt_lm` (the code users run): training tokens/s (fairseq's wps
# of each logged update after the first two, median) and the process's peak RSS (/usr/bin/time),
# alternating XL / ALiBi for two rounds, best round per model; then the ratios XL / ALiBi.
# Same size: L layers, C, H heads of C/H, FFN F, T tokens per segment, M memory rows, B streams.
# (transformer_lm's q/k/v/out projections have biases and XL's have not, and XL adds r_net and the
# r biases; the parameter counts are printed.) Data: data-bin/enwik8 (scripts/data.sh enwik8).
# Usage: bash bench/xl_vs_alibi.sh [build-dir] [threads]
# Environment: T (512) M (512) L (2) C (256) H (4) F (1024) B (2) UPDATES (8)
set -euo pipefail
export OMP_WAIT_POLICY=passive
build="${1:-build}"
threads="${2:-1}"
stretch="$build/bin/stretch"
T="${T:-512}" M="${M:-512}" L="${L:-2}" C="${C:-256}" H="${H:-4}" F="${F:-1024}" B="${B:-2}"
updates="${UPDATES:-8}"
data=data-bin/enwik8
[ -f "$data/dict.txt" ] || bash scripts/data.sh enwik8 --source local --dest "$data" >/dev/null
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
common=(--task truncated_bptt_lm --tokens-per-sample "$T" --batch-size "$B" --mem-len "$M" --dropout 0.1
        --optimizer adam --clip-norm 0.25 --lr 0.00025 --max-update "$updates" --seed 2 --log-format json
        --log-interval 1 --no-progress-bar --no-save --disable-validation --threads "$threads")
xl=(--arch transformer_xl --n-layer "$L" --d-model "$C" --n-head "$H" --d-head "$((C / H))" --d-inner "$F")
alibi=(--arch transformer_lm --pos alibi --post-norm --decoder-layers "$L" --decoder-embed-dim "$C"
       --decoder-attention-heads "$H" --decoder-ffn-embed-dim "$F")
for round in 1 2; do
  for model in xl alibi; do
    if [ "$model" = xl ]; then args=("${xl[@]}"); else args=("${alibi[@]}"); fi
    /usr/bin/time -f "peak_rss_kb %M" -o "$work/$model.$round.time" \
      "$stretch" train "$data" "${common[@]}" "${args[@]}" > "$work/$model.$round.log" 2> "$work/$model.$round.err"
    echo "$model: $(grep -o 'num. shared model params: [0-9,]*' "$work/$model.$round.log" "$work/$model.$round.err" | head -1 | sed 's/.*: //') parameters"
  done
done
python3 - "$work" <<'PY'
import json, re, statistics, sys, os
work = sys.argv[1]
best = {}
for model in ("xl", "alibi"):
    for rnd in (1, 2):
        wps = []
        for line in open(os.path.join(work, f"{model}.{rnd}.log")):
            m = re.search(r"\{.*\}", line)
            if not m or '"num_updates"' not in line or '"wps"' not in line:
                continue
            j = json.loads(m.group(0))
            if int(j["num_updates"]) > 2:
                wps.append(float(j["wps"]))
        rss = int(open(os.path.join(work, f"{model}.{rnd}.time")).read().split()[-1]) / 1024
        med = statistics.median(wps)
        print(f"{model} round {rnd}: median wps {med:.1f} over {len(wps)} updates, peak RSS {rss:.0f} MB")
        b = best.setdefault(model, [0.0, 1e18])
        b[0], b[1] = max(b[0], med), min(b[1], rss)
x, a = best["xl"], best["alibi"]
print(f"step time XL / ALiBi: {a[0] / x[0]:.2f}x (tokens/s {x[0]:.1f} vs {a[0]:.1f})")
print(f"peak RSS XL / ALiBi: {x[1] / a[1]:.2f}x ({x[1]:.0f} vs {a[1]:.0f} MB)")
PY
