#!/usr/bin/env python3
"""Where a training step's time goes: perf (software clock) samples of bench_model, by category.

Runs `perf record -e cpu-clock` on build/bench/bench_model train (one thread by default, so
samples are CPU time and other jobs on a shared host do not distort the shares), then groups the
samples by symbol into GEMM (oneDNN's JIT code and library), the attention kernel, dropout, ...
and prints one line per category. Model construction and initialisation are in the samples too
("model init"); more --steps make their share smaller.

  python3 bench/profile_step.py [--vocab 256] [--tokens-per-sample 128] [--steps 20] [--threads 1]
  python3 bench/profile_step.py --data perf.data        # categorise an existing recording
  python3 bench/profile_step.py --vocab 10008 --top 25 --extra "--layers 6 --embed-dim 512 --heads 8 --ffn-dim 2048"
  python3 bench/profile_step.py --threads 2 --vocab 10008 --waits   # where the threads wait, and on what

--waits records with OMP_WAIT_POLICY=active, so that a thread waiting at an OpenMP barrier spins
in the runtime (libgomp) and is sampled there instead of sleeping unseen, and prints per thread the
share of its step samples spent waiting and, for those samples, what the other thread was running
(its sample nearest in time, within 1 ms, by category): the serial or unbalanced part of a step.
Setup and the warm-up step (up to its optimizer update) are left out.

Needs linux-perf (perf record works with the software clock even where hardware counters are
not exposed, e.g. in containers).
"""
import argparse
import bisect
import collections
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (category, predicate on (dso, symbol)); the first match wins.
RULES = [
    ("GEMM (oneDNN JIT code + library)", lambda d, s: d.startswith("[JIT]") or "libdnnl" in d),
    ("GEMM (OpenBLAS)", lambda d, s: "libopenblas" in d),
    ("attention kernel", lambda d, s: any(k in s for k in ("attn::", "forward_run", "backward_run", "pack_transposed",
                                                           "backward_head", "forward_query_tile"))),
    ("dropout (Philox + apply)", lambda d, s: "dropout" in s or "philox" in s or "apply<" in s),
    ("cross-entropy (expf)", lambda d, s: "cross_entropy" in s or "row_lse" in s or "expf" in s),
    ("row max (cross-entropy, attention rows)", lambda d, s: "max_skip_nan" in s),
    ("layernorm", lambda d, s: "layernorm" in s or "row_backward" in s),
    ("activation", lambda d, s: "activation" in s),
    ("linear: bias fill / dbias", lambda d, s: "linear_forward" in s or "linear_backward" in s),
    ("residual add / axpy / scale", lambda d, s: "add_forward" in s or "axpy" in s or "scale_forward" in s),
    ("head split/merge, copies (memmove)", lambda d, s: "split_heads" in s or "merge_heads" in s or "memmove" in s
     or "memcpy" in s or "to_bf16" in s),
    ("zero-fill (memset)", lambda d, s: "memset" in s),
    ("optimizer + grad scale + clip", lambda d, s: "optim::" in s),
    ("embedding", lambda d, s: "embedding" in s),
    # core/peak_flops.h: fma_chain_ymm/zmm, dpbf16_chain_zmm, amx_chain (core/peak_amx.h), peak_gflops
    # (bench_model's startup peak)
    ("peak measurement (setup, not a step)", lambda d, s: "_chain_" in s or "amx_chain" in s or "peak_gflops" in s),
    ("model init (setup, not a step)", lambda d, s: "init_" in s or "Rng::" in s or "cosf" in s or "sinf" in s
     or "logf" in s),  # libm logf/cosf: Rng::normal's Box-Muller at initialisation
    ("kernel (page faults, scheduling)", lambda d, s: "kernel" in d),
    ("OpenMP runtime", lambda d, s: "gomp" in d),
    ("malloc/free, tensor pool", lambda d, s: "malloc" in s or "free" in s or "pool" in s),
]


class Symbolizer:
    """Addresses perf left unresolved (it reports some binaries' local symbols as raw offsets) -> the
    name of the enclosing symbol from `nm -C`, for the benchmark binary itself."""

    def __init__(self, binary):
        self.dso = os.path.basename(binary)
        self.starts, self.names = [], []
        if not os.path.exists(binary):
            return
        out = subprocess.run(["nm", "-C", "--defined-only", binary], capture_output=True, text=True).stdout
        rows = []
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[1] in "tTwWiI":
                rows.append((int(parts[0], 16), parts[2]))
        rows.sort()
        self.starts = [a for a, _ in rows]
        self.names = [n for _, n in rows]

    def __call__(self, dso, sym):
        if dso != self.dso or not re.fullmatch(r"0x[0-9a-f]+", sym) or not self.starts:
            return sym
        i = bisect.bisect_right(self.starts, int(sym, 16)) - 1
        return self.names[i] if i >= 0 else sym


def category(dso, sym):
    # perf script names JIT code's DSO after the perf map file (perf-PID.map), perf report "[JIT] tid N"
    if re.search(r"perf-\d+\.map", dso):
        dso = "[JIT]"
    return next((name for name, pred in RULES if pred(os.path.basename(dso), sym)), "other")


def categorise(data, symbolize=lambda d, s: s):
    """({category: % of samples}, {(dso, symbol): % of samples})."""
    out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,symbol", "--stdio", "-g",
                          "none"], capture_output=True, text=True, check=True).stdout
    cats = collections.Counter()
    syms = collections.Counter()
    # JIT code has no symbols: one line per sampled address, most of them below perf's 0.005%
    # display rounding, so its share is taken from a per-DSO report instead.
    by_dso = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso", "--stdio", "-g", "none"],
                            capture_output=True, text=True, check=True).stdout
    for line in by_dso.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(\[JIT\] tid \d+)\s*$", line)
        if m:
            cats[RULES[0][0]] += float(m.group(1))
            syms[("[JIT]", "(oneDNN JIT code)")] += float(m.group(1))
    for line in out.splitlines():
        m = re.match(r"\s+([\d.]+)%\s+(\S+(?: tid \d+)?)\s+\[.\]\s+(.*)", line)
        if not m:
            continue
        pct, dso = float(m.group(1)), m.group(2)
        if dso.startswith("[JIT]"):
            continue  # counted per DSO above
        sym = symbolize(dso, re.sub(r"(\s+-)*\s*$", "", m.group(3)).strip())  # drop perf's IPC columns
        syms[(dso, sym)] += pct
        cats[category(dso, sym)] += pct
    return cats, syms


def perf_script_samples(data):
    """[(tid, time_s, dso, symbol)] of every sample, from `perf script`."""
    out = subprocess.run(["perf", "script", "-i", data, "--hide-call-graph", "-F", "tid,time,ip,sym,dso"],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+):\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            rows.append((int(m.group(1)), float(m.group(2)), m.group(4), m.group(3)))
    return rows


def wait_report(rows):
    """rows: [(tid, time_s, category)] of a 2-thread recording. Leaves out setup and the warm-up step,
    then for each of the two threads with the most samples: (tid, share of its samples in the
    OpenMP runtime, Counter of the other thread's category at its nearest sample within 1 ms)."""
    # The timed steps only: after the last setup sample and after the warm-up step (its first touch
    # of every activation page-faults), which ends with its optimizer update.
    rows = sorted(rows, key=lambda r: r[1])
    setup_end = max((t for _, t, cat in rows if "setup" in cat), default=float("-inf"))
    rows = [r for r in rows if r[1] > setup_end]
    first_update = next((i for i, r in enumerate(rows) if r[2].startswith("optimizer")), None)
    if first_update is None:
        raise SystemExit("--waits: no optimizer sample after setup (more --steps?)")
    after = ("optimizer", "OpenMP runtime", "zero-fill")
    start = next((i for i in range(first_update, len(rows)) if not rows[i][2].startswith(after)), len(rows))
    by_tid = collections.defaultdict(list)
    for tid, t, cat in rows[start:]:
        by_tid[tid].append((t, cat))
    tids = sorted(by_tid, key=lambda k: -len(by_tid[k]))[:2]
    if len(tids) < 2:
        raise SystemExit("--waits needs two threads with samples (--threads 2)")
    report = []
    for a, b in ((tids[0], tids[1]), (tids[1], tids[0])):
        times = [t for t, _ in by_tid[b]]
        n_wait, other = 0, collections.Counter()
        for t, cat in by_tid[a]:
            if cat != "OpenMP runtime":
                continue
            n_wait += 1
            i = bisect.bisect_left(times, t)
            j = min((k for k in (i - 1, i) if 0 <= k < len(times)), key=lambda k: abs(times[k] - t), default=None)
            other[by_tid[b][j][1] if j is not None and abs(times[j] - t) <= 1e-3 else "(no sample within 1 ms)"] += 1
        report.append((a, n_wait / len(by_tid[a]), other))
    return report


def print_waits(data, symbolize, out=sys.stdout):
    rows = [(tid, t, category(dso, symbolize(os.path.basename(dso), sym)))
            for tid, t, dso, sym in perf_script_samples(data)]
    for tid, share, other in wait_report(rows):
        n = max(sum(other.values()), 1)
        print(f"thread {tid}: {100 * share:.1f}% of its step samples waiting in the OpenMP runtime; the other thread "
              "meanwhile:", file=out)
        for cat, k in other.most_common(8):
            print(f"  {100 * k / n:5.1f}%  {cat}", file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="an existing perf.data to categorise (no new run)")
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "bench_model"))
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--tokens-per-sample", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--top", type=int, default=0, help="also print the N largest symbols")
    ap.add_argument("--extra", default="", help="more bench_model flags, e.g. '--layers 6 --embed-dim 512'")
    ap.add_argument("--waits", action="store_true",
                    help="where the threads wait (OMP_WAIT_POLICY=active; needs --threads 2 or an existing 2-thread --data)")
    args = ap.parse_args()
    data = args.data
    if data is None:
        tmp = tempfile.mkdtemp()
        data = os.path.join(tmp, "perf.data")
        cmd = [args.bench, "train", "--threads", str(args.threads), "--vocab", str(args.vocab), "--tokens-per-sample",
               str(args.tokens_per_sample), "--warmup", "1", "--steps", str(args.steps)] + (["--bf16"] if args.bf16 else []) + args.extra.split()
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY="active" if args.waits else "passive")
        rec = subprocess.run(["perf", "record", "-e", "cpu-clock", "-F", "2000", "-g", "-o", data] + cmd, env=env,
                             capture_output=True, text=True)
        if rec.returncode != 0:
            sys.stderr.write(rec.stderr)
            raise SystemExit(1)
        print(next(line for line in rec.stdout.splitlines() if line.startswith("{")))
    try:
        if args.waits:
            print_waits(data, Symbolizer(args.bench))
        else:
            print_categories(data, args)
    finally:
        if args.data is None:
            os.remove(data)
            os.rmdir(os.path.dirname(data))


def print_categories(data, args):
    cats, syms = categorise(data, Symbolizer(args.bench))
    # "of step": the share among the samples that are not setup (model init, the peak measurement
    # and the kernel's page faults, which are first-touch at setup: `perf stat -e page-faults` gives
    # the same count for 2 and 8 timed steps).
    setup = sum(pct for name, pct in cats.items() if "setup" in name or name.startswith("kernel"))
    step = max(100.0 - setup, 1e-9)
    print("% of samples  % of step  category")
    for name, pct in cats.most_common():
        of_step = "" if "setup" in name or name.startswith("kernel") else f"{100 * pct / step:6.1f}%"
        print(f"{pct:6.1f}%      {of_step:>7}    {name}")
    if args.top:
        print(f"top {args.top} symbols (% of samples, % of step):")
        for (dso, sym), pct in syms.most_common(args.top):
            cat = category(dso, sym)
            of_step = "  setup" if "setup" in cat or cat.startswith("kernel") else f"{100 * pct / step:6.1f}%"
            print(f"{pct:6.1f}%  {of_step}  {dso}  {sym[:100]}")


if __name__ == "__main__":
    main()
