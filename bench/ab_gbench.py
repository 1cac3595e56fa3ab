#!/usr/bin/env python3
"""Two or more builds of one Google Benchmark binary (bench_attention, bench_ops, ...) in one run.

The machine is shared and its speed drifts by ±10% over minutes, so a before/after comparison of a
kernel runs the binaries alternately (round r runs them in order, round r+1 in reverse order) and
keeps, per benchmark and binary, the best CPU time over the rounds (load only ever slows a run
down) and the median `of_gemm` counter where the benchmark reports one (bench_attention: the rate
over the GEMM measured in the same process; a ratio of two noisy times, so its best over rounds
would pick the round whose GEMM was slowed: the median, with the range). Ratios are against the
first binary.

Usage (from the repository root; OMP_NUM_THREADS defaults to 1 here):
  python3 bench/ab_gbench.py --filter 'FusedFwd/(512|2048)/1' --rounds 6 OLD/bench_attention build/bench/bench_attention
"""

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binaries", nargs="+", help="benchmark binaries; the first is the reference")
    ap.add_argument("--filter", required=True, help="--benchmark_filter regex")
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    if len(args.binaries) < 2:
        ap.error("give at least two binaries")
    for b in args.binaries:
        if not os.access(b, os.X_OK):
            ap.error(f"{b}: not an executable file")
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    best = collections.defaultdict(lambda: float("inf"))
    of_gemm = collections.defaultdict(list)
    for r in range(args.rounds):
        for b in args.binaries if r % 2 == 0 else args.binaries[::-1]:
            run = subprocess.run([b, f"--benchmark_filter={args.filter}", "--benchmark_format=json"],
                                 capture_output=True, text=True, env=env)
            if run.returncode != 0:
                sys.exit(f"{b} failed (exit {run.returncode}):\n{run.stderr[-2000:]}")
            rows = json.loads(run.stdout)["benchmarks"]
            if not rows:
                sys.exit(f"{b}: no benchmark matches --filter {args.filter!r}")
            for x in rows:
                key = (x["name"].replace("/process_time", "").replace("/real_time", ""), b)
                best[key] = min(best[key], x["cpu_time"])
                if x.get("of_gemm", 0.0) > 0:
                    of_gemm[key].append(x["of_gemm"])
    names = sorted({k[0] for k in best})
    unit = "ms"
    print(f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']}, {args.rounds} rounds, best CPU time per binary "
          f"({unit}), ratio to the first; of_gemm (median over rounds, [min, max]) where reported")
    for n in names:
        ref = best[(n, args.binaries[0])]
        cells = []
        for b in args.binaries:
            t = best[(n, b)]
            og = ""
            if of_gemm[(n, b)]:
                v = sorted(of_gemm[(n, b)])
                og = f", of_gemm {statistics.median(v):.2f} [{v[0]:.2f}, {v[-1]:.2f}]"
            cells.append(f"{t:.2f} ({t / ref:.3f}{og})")
        print(f"{n}: " + " | ".join(cells))


if __name__ == "__main__":
    main()
