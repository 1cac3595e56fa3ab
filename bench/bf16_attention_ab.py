#!/usr/bin/env python3
"""--bf16 with the attention's tiles in bf16 (STRETCH_BF16_PRODUCTS=native) against fp32 attention
(=native-fp32-attention: oneDNN's bf16 products either way), in one run, as speed ratios
(docs/BENCHMARKS.md, "Intel Xeon model 167"). Runs build/bench/bench_model --bf16 on the small and
medium models (train: B 8, V 10,008, T 128 and 512; eval: B 1, V 33,280, T 2048 and 8192),
the two settings interleaved A B B A per round, and prints each shape's tokens per CPU second
(median over rounds) and the ratio fp32-attention / bf16-attention (> 1: fp32 attention is faster).

  python3 bench/bf16_attention_ab.py [--rounds 2] [--threads 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {"small": ["--layers", "4", "--embed-dim", "256", "--heads", "4", "--ffn-dim", "1024"],
          "medium": ["--layers", "6", "--embed-dim", "512", "--heads", "8", "--ffn-dim", "2048"]}
SETTINGS = ("native", "native-fp32-attention")


def run(cmd, products):
    env = dict(os.environ, STRETCH_BF16_PRODUCTS=products, OMP_WAIT_POLICY="passive")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"bf16_attention_ab: failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    recs = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    if not recs or any(r.get("bf16_products") != products for r in recs):
        sys.exit(f"bf16_attention_ab: bench_model did not run {products}: {p.stdout}")
    return recs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    exe = os.path.join(ROOT, "build/bench/bench_model")
    base = [exe, "--threads", str(args.threads), "--bf16", "--warmup", "1", "--peak-gflops", "1", "--peak-gflops-bf16", "0"]
    shapes = []
    for m in ("small", "medium"):
        for t in (128, 512):
            shapes.append((f"train {m} T {t}", base[:1] + ["train"] + base[1:] + MODELS[m] +
                           ["--vocab", "10008", "--batch", "8", "--tokens-per-sample", str(t), "--steps", "5"]))
    for t in (2048, 8192):
        shapes.append((f"eval small T {t}", base[:1] + ["eval"] + base[1:] + MODELS["small"] +
                       ["--vocab", "33280", "--lengths", str(t), "--steps", "1"]))
    print("| shape | tok/CPU-s bf16 attention | tok/CPU-s fp32 attention | **fp32 / bf16 attention** |")
    print("|---|---|---|---|")
    for name, cmd in shapes:
        got = {s: [] for s in SETTINGS}
        for r in range(args.rounds):
            for s in (SETTINGS if r % 2 == 0 else SETTINGS[::-1]):
                got[s].append(run(cmd, s)[-1]["tokens_per_cpu_s"])
        a, b = (statistics.median(got[s]) for s in SETTINGS)
        print(f"| {name} | {a:,.0f} | {b:,.0f} | **{b / a:.3f}** |", flush=True)


if __name__ == "__main__":
    main()
