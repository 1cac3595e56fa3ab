#!/usr/bin/env python3
"""bench/ab_memory_step.py — two stretch binaries on one --mem-len training command, in one run.

The step of bench/xl_vs_alibi.sh's default size (2 layers, C 256, 4 heads of 64, FFN 1024, T 512,
mem_len 512, B 2, enwik8 characters; data-bin/enwik8 from scripts/data.sh enwik8): for ROUNDS
rounds, each binary trains 14 updates (order alternating by round); per run the median fairseq
wps of updates 3..14; per binary the median over runs; and the after / before ratio per round
(adjacent runs) with its median. A model change that keeps the numbers (scripts/check_train_logs.sh)
is judged by this ratio, not by tokens/s compared across runs.
Usage: python3 bench/ab_memory_step.py BEFORE_STRETCH AFTER_STRETCH [--rounds 6]
           [--model alibi|alibi_pre|xl] [--threads 1]
  alibi: transformer_lm --pos alibi --post-norm (xl_vs_alibi.sh's baseline); alibi_pre: pre-norm;
  xl: transformer_xl of the same size.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

COMMON = ("--task truncated_bptt_lm --tokens-per-sample 512 --batch-size 2 --mem-len 512 --dropout 0.1 "
          "--optimizer adam --clip-norm 0.25 --lr 0.00025 --max-update 14 --seed 2 --log-format json "
          "--log-interval 1 --no-progress-bar --no-save --disable-validation").split()
LM = "--decoder-layers 2 --decoder-embed-dim 256 --decoder-attention-heads 4 --decoder-ffn-embed-dim 1024".split()
MODELS = {
    "xl": "--arch transformer_xl --n-layer 2 --d-model 256 --n-head 4 --d-head 64 --d-inner 1024".split(),
    "alibi": ["--arch", "transformer_lm", "--pos", "alibi", "--post-norm"] + LM,
    "alibi_pre": ["--arch", "transformer_lm", "--pos", "alibi"] + LM,
}


def run(stretch, model, threads):
    p = subprocess.run([stretch, "train", "data-bin/enwik8"] + COMMON + MODELS[model] + ["--threads", str(threads)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"ab_memory_step: {stretch} failed (exit {p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    wps = []
    for line in p.stdout.splitlines():
        m = re.search(r"\{.*\}", line)
        if m and '"wps"' in line:
            j = json.loads(m.group(0))
            if int(j["num_updates"]) > 2:
                wps.append(float(j["wps"]))
    if not wps:
        sys.exit(f"ab_memory_step: no train_inner lines after update 2 from {stretch}")
    return statistics.median(wps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--model", choices=sorted(MODELS), default="alibi")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if args.rounds < 1 or args.threads < 1:
        ap.error("--rounds and --threads: at least 1")
    if not os.path.isfile("data-bin/enwik8/dict.txt"):
        sys.exit("ab_memory_step: data-bin/enwik8/dict.txt missing: run scripts/data.sh enwik8")
    os.environ["OMP_WAIT_POLICY"] = "passive"
    res = {args.before: [], args.after: []}
    for r in range(args.rounds):
        for b in (args.before, args.after) if r % 2 == 0 else (args.after, args.before):
            res[b].append(run(b, args.model, args.threads))
    for b in (args.before, args.after):
        print(f"{b}: wps " + " ".join(f"{x:.0f}" for x in res[b]) + f", median {statistics.median(res[b]):.0f}")
    pairs = [a / b for a, b in zip(res[args.after], res[args.before])]
    print(f"{args.model}, {args.threads} thread(s): after / before per round " + " ".join(f"{p:.3f}" for p in pairs)
          + f", median {statistics.median(pairs):.3f}")


if __name__ == "__main__":
    main()
