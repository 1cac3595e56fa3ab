#!/usr/bin/env python3
"""stretch's matrix products against PyTorch's on the same shapes, in one run (issue 18).

A training step's MFU is bounded by its GEMM rate (bench/profile_step.py: ~80% of a step). This
asks whether another library computes the step's products faster on THIS host: for each linear
layer of the small and medium models (bench_gemm's layers) and each of its three products

  fwd  x[N, in] · W[out, in]ᵀ     dx  dy[N, out] · W[out, in]     dw  dy[N, out]ᵀ · x[N, in]

it measures oneDNN's two fp32 routes as stretch calls them (build/bench/bench_gemm
`sgemm_vs_matmul`: dnnl_sgemm and the matmul primitive) and PyTorch's torch.mm on the same
shapes and layouts (PyPI PyTorch in build/torch2env: MKL on x86; Debian's 1.13 in build/pyenv
with --python: OpenBLAS), in --rounds interleaved rounds (bench_gemm, then torch, then bench_gemm
...) so that a host's slow minutes hit both sides. Each figure is the median over rounds of each
round's rate (bench_gemm: its mean over ≥ 0.3 s; torch: the median of --reps calls). The ratio
column is torch / the faster oneDNN route: > 1 where PyTorch's library is the faster. (bench_gemm's
dx and dw accumulate into their output, beta = 1, as stretch's backward does; torch.mm overwrites:
one extra read of the output, which favours torch slightly.)

The fp32 FMA peak of this host is measured at the start (build/bench/bench_peak) and every rate
is also given as a fraction of it.

  python3 bench/gemm_vs_torch.py [--threads 2] [--tokens 1024] [--rounds 3]
  python3 bench/gemm_vs_torch.py --python build/pyenv/bin/python    # Debian's PyTorch 1.13
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (measure_peaks, host_key, run_json)

ROOT = compare.ROOT

# bench_gemm's layers (register_libraries): name -> (in, out)
LAYERS = {"small_out": (256, 256), "small_fc1": (256, 1024), "small_fc2": (1024, 256),
          "small_vocab": (256, 10008), "medium_out": (512, 512), "medium_fc1": (512, 2048),
          "medium_fc2": (2048, 512)}
PRODUCTS = ("fwd", "dx", "dw")

TORCH_SNIPPET = r"""
import json, statistics, sys, time, torch
threads, tokens, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
layers = json.loads(sys.argv[4])
torch.set_num_threads(threads)
torch.manual_seed(0)
out = {}
for name, (fin, fout) in layers.items():
    x, w, dy = torch.randn(tokens, fin), torch.randn(fout, fin), torch.randn(tokens, fout)
    for what, (a, b) in (("fwd", (x, w.t())), ("dx", (dy, w)), ("dw", (dy.t(), x))):
        c = torch.mm(a, b)
        for _ in range(3):
            torch.mm(a, b, out=c)
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            torch.mm(a, b, out=c)
            ts.append(time.perf_counter() - t0)
        flop = 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
        out[f"{name}_{what}"] = flop / statistics.median(ts) / 1e9
config = torch.__config__.show()
blas = config.split("BLAS_INFO=")[1].split(",")[0] if "BLAS_INFO=" in config else "?"
print(json.dumps({"version": torch.__version__, "blas": blas, "gflops": out}))
"""


def run_bench_gemm(args, names):
    flt = "^sgemm_vs_matmul/(" + "|".join(names) + f")/tokens:{args.tokens}/threads:{args.threads}/"
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    p = subprocess.run([args.bench_gemm, f"--benchmark_filter={flt}", "--benchmark_format=json"],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{args.bench_gemm} failed ({p.returncode}):\n{p.stderr}")
    rates = {}
    for b in json.loads(p.stdout)["benchmarks"]:
        key = b["name"].split("/")[1]
        rates[key] = (b["sgemm_GFLOPs"], b["matmul_GFLOPs"])
    missing = set(names) - set(rates)
    if missing:
        sys.exit(f"bench_gemm gave no sgemm_vs_matmul figure for {sorted(missing)} at tokens {args.tokens}, "
                 f"threads {args.threads} (bench_gemm registers tokens 1024 and 4096, threads 1 and 2)")
    return rates


def run_torch(args, layers):
    return compare.run_json([args.python, "-c", TORCH_SNIPPET, str(args.threads), str(args.tokens), str(args.reps),
                             json.dumps(layers)], env=dict(os.environ, OMP_NUM_THREADS=str(args.threads)))[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2, choices=(1, 2))
    ap.add_argument("--tokens", type=int, default=1024, choices=(1024, 4096))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30, help="torch.mm calls timed per shape and round")
    ap.add_argument("--layers", default=",".join(LAYERS), help="comma-separated, of: " + ", ".join(LAYERS))
    ap.add_argument("--python", default=os.path.join(ROOT, "build", "torch2env", "bin", "python"))
    ap.add_argument("--bench-gemm", default=os.path.join(ROOT, "build", "bench", "bench_gemm"))
    ap.add_argument("--peak-bench", default=os.path.join(ROOT, "build", "bench", "bench_peak"))
    ap.add_argument("--peak-seconds", type=float, default=0.5, help="bench_peak time per kernel")
    args = ap.parse_args()
    if args.rounds < 1 or args.reps < 3:
        sys.exit("--rounds must be >= 1 and --reps >= 3")
    for path, what in ((args.bench_gemm, "bench_gemm"), (args.peak_bench, "bench_peak")):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path}: not built (cmake --build build --target {what})")
    if not os.access(args.python, os.X_OK):
        sys.exit(f"{args.python}: no such Python (bench/setup_torch2.sh makes build/torch2env; or pass --python)")
    chosen = [l for l in args.layers.split(",") if l]
    unknown = [l for l in chosen if l not in LAYERS]
    if unknown:
        sys.exit(f"--layers: unknown {unknown}; choose from {', '.join(LAYERS)}")
    layers = {l: LAYERS[l] for l in chosen}
    names = [f"{l}_{w}" for l in chosen for w in PRODUCTS]

    args.thread_list = [args.threads]
    peak_rec = compare.measure_peaks(args)[args.threads]
    peak = peak_rec["fp32_gflops"][str(args.threads)]
    sg, mm, th = {n: [] for n in names}, {n: [] for n in names}, {n: [] for n in names}
    torch_info = None
    for r in range(args.rounds):
        for n, (s, m) in run_bench_gemm(args, names).items():
            sg[n].append(s)
            mm[n].append(m)
        torch_info = run_torch(args, layers)
        for n in names:
            th[n].append(torch_info["gflops"][n])
        print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr)

    print(f"Host: {compare.host_key(peak_rec)}; fp32 FMA peak on "
          f"{args.threads} thread(s), measured now: {peak:.1f} GFLOP/s. Tokens {args.tokens}, {args.rounds} "
          f"interleaved rounds; PyTorch {torch_info['version']} (BLAS: {torch_info['blas']}).\n")
    print("| product | oneDNN sgemm GFLOP/s | oneDNN matmul | torch.mm | of peak: oneDNN best / torch | "
          "**torch / oneDNN best** |")
    print("|---|---|---|---|---|---|")
    ratios = []
    for n in names:
        s, m, t = (statistics.median(v[n]) for v in (sg, mm, th))
        best = max(s, m)
        ratios.append(t / best)
        print(f"| {n} | {s:.1f} | {m:.1f} | {t:.1f} | {best / peak:.2f} / {t / peak:.2f} | **{t / best:.2f}** |")
    geo = statistics.geometric_mean(ratios)
    print(f"\nGeometric mean of torch / oneDNN best over the {len(names)} products: **{geo:.3f}** "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}).")


if __name__ == "__main__":
    main()
