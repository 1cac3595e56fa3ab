#!/usr/bin/env python3
"""Bench-shape check of bench/compare.py's peak and anchor plumbing (CTest, seconds; needs no
PyTorch): with the real build/bench/bench_peak it checks that
  * measure_peaks() gets a record for 1 thread and each --threads count, and core_peak() is the
    t-thread fp32 peak / t (bf16: None exactly when bench_peak says "none");
  * peak_line() / host_key() name the CPU model, family and model number;
  * the 1.13 OPENBLAS_CORETYPE variants: t113-unset only when the environment sets it, t113-skx
    only on avx512f, each with the right environment;
  * agreeing() drops a variant whose loss disagrees with t113's by more than 1e-3 relative and
    keeps one that agrees, and anchor() picks the fastest agreeing side.
Usage: check_compare_peaks.py BENCH_PEAK"""
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

args = types.SimpleNamespace(peak_bench=sys.argv[1], peak_seconds=0.05, thread_list=[1, 2], torch2=None, no_flex=True)
args.peaks = compare.measure_peaks(args)
assert set(args.peaks) == {1, 2}, args.peaks
for t in (1, 2):
    assert abs(compare.core_peak(args, t) - args.peaks[t]["fp32_gflops"][str(t)] * 1e9 / t) < 1, t
    bf, amx = args.peaks[t]["bf16_gflops"], args.peaks[t]["bf16_amx_gflops"]
    assert (compare.core_peak(args, t, "bf16") is None) == (bf == "none" and amx == "none"), (bf, amx)
    if amx != "none":  # AMX's where the CPU has it (oneDNN's bf16 products run there)
        assert abs(compare.core_peak(args, t, "bf16") - amx[str(t)] * 1e9 / t) < 1, amx
        assert "AMX" in compare.peak_line(args), compare.peak_line(args)
    # the AMX field is "none" exactly where /proc/cpuinfo lacks amx_bf16 or amx_tile (Linux's grant aside)
    flags = args.peaks[t]["cpu"]["flags"]
    if "amx_bf16" not in flags or "amx_tile" not in flags:
        assert amx == "none", amx
cpu = args.peaks[1]["cpu"]
line = compare.peak_line(args)
assert cpu["model_name"] in line and f"family {cpu['family']} model {cpu['model']}" in line, line

saved = os.environ.get("OPENBLAS_CORETYPE")
try:
    os.environ["OPENBLAS_CORETYPE"] = "Haswell"
    names = [n for n, _ in compare.torch_sides(args, "train")]
    assert names[:2] == ["t113", "t113-unset"], names
    assert ("t113-skx" in names) == ("avx512f" in cpu["flags"]), names
    env = dict(os.environ)
    assert "OPENBLAS_CORETYPE" not in compare.side_env("t113-unset", env)
    assert compare.side_env("t113-skx", env)["OPENBLAS_CORETYPE"] == "SkylakeX"
    assert compare.side_env("t113", env)["OPENBLAS_CORETYPE"] == "Haswell"
    del os.environ["OPENBLAS_CORETYPE"]
    assert "t113-unset" not in [n for n, _ in compare.torch_sides(args, "train")]
finally:
    if saved is None:
        os.environ.pop("OPENBLAS_CORETYPE", None)
    else:
        os.environ["OPENBLAS_CORETYPE"] = saved


def rec(tps, loss):
    return [[{"tokens_per_cpu_s": tps, "tokens_per_s": tps, "loss": loss}]]


sides = [("t113", "1.13"), ("t113-unset", "1.13"), ("t113-skx", "1.13")]
runs = {"t113": rec(100, 5.0), "t113-unset": rec(300, 5.0 * (1 + 5e-4)), "t113-skx": rec(900, 5.1)}
assert [n for n, _ in compare.agreeing(runs, sides)] == ["t113", "t113-unset"]
name, best, _ = compare.anchor(runs, sides, 1)
assert name == "t113-unset" and best["tokens_per_cpu_s"] == 300, name
print(f"ok: compare.py divides by the measured peak ({line}); OPENBLAS_CORETYPE variants and the agreement rule")
