#!/usr/bin/env python3
"""bench/profile_step.py --waits on a hand-made recording (no perf, no timing): setup and the
warm-up step are left out, each thread's waiting share and what the other thread ran meanwhile
are counted as worked out by hand below, and a wait with no sample of the other thread within
1 ms is said so; and the categories of a few symbols. Usage: check_profile_waits.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import profile_step  # noqa: E402

W, G, O, S, A = "OpenMP runtime", "GEMM (OpenBLAS)", "optimizer + grad scale + clip", \
    "peak measurement (setup, not a step)", "attention kernel"
rows = [
    (1, 0.000, S), (2, 0.000, S),            # setup
    (1, 0.010, G), (2, 0.010, W),            # warm-up step: left out
    (1, 0.020, O), (2, 0.020, W),            # its optimizer update: left out
    (1, 0.030, G), (2, 0.0302, W),           # the timed steps from here
    (1, 0.031, G), (2, 0.0312, G),
    (1, 0.032, W), (2, 0.0322, A),
    (1, 0.033, A), (2, 0.0332, W),
    (1, 0.034, G), (2, 0.0500, W),           # thread 2's last wait: nothing of thread 1 within 1 ms
    (1, 0.035, G),
]
report = {tid: (share, other) for tid, share, other in profile_step.wait_report(rows)}
failures = []


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, expected {want!r}")


# thread 1 (6 timed samples): one wait (at 0.032, thread 2 at 0.0322 runs the attention kernel)
expect("thread 1 share", round(report[1][0], 6), round(1 / 6, 6))
expect("thread 1 other", dict(report[1][1]), {A: 1})
# thread 2 (5 timed samples): waits at 0.0302 (thread 1: GEMM at 0.030), 0.0332 (thread 1: attention at
# 0.033) and 0.0500 (nothing within 1 ms)
expect("thread 2 share", round(report[2][0], 6), round(3 / 5, 6))
expect("thread 2 other", dict(report[2][1]), {G: 1, A: 1, "(no sample within 1 ms)": 1})
expect("perf map names JIT code", profile_step.category("/tmp/perf-123.map", "[unknown]"),
       "GEMM (oneDNN JIT code + library)")
expect("libgomp is the runtime", profile_step.category("/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0", "gomp_barrier_wait"),
       W)
# the startup peak measurement (src/core/peak_flops.h, stretch:: since session 26) is setup, not a step
for sym in ("stretch::fma_chain_zmm(long)", "stretch::fma_chain_ymm(long)", "stretch::dpbf16_chain_zmm(long)",
            "stretch::peak_gflops(stretch::PeakKernel, int, double)"):
    expect(sym, profile_step.category("/work/build/bench/bench_model", sym), S)
expect("the row max", profile_step.category("/work/build/bench/bench_model", "stretch::ops::simd::max_skip_nan(float const*, long)"),
       "row max (cross-entropy, attention rows)")
if failures:
    print("FAIL\n  " + "\n  ".join(failures))
    sys.exit(1)
print("ok: setup and warm-up left out; wait shares 1/6 and 3/5; partners counted")
