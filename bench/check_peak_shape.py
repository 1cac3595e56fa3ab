#!/usr/bin/env python3
"""Bench-shape check of build/bench/bench_peak (CTest, seconds): one JSON record whose fields
are what bench/compare.py and docs/BENCHMARKS.md read, with values that are possible for this
CPU. It checks the plumbing, not the speed (no wall-clock thresholds):
  * cpu.model_name / family / model as in /proc/cpuinfo (read here independently);
  * fp32_gflops for "1" and "N" positive, fp32 = the faster of ymm and zmm;
  * zmm "none" exactly when /proc/cpuinfo has no avx512f, bf16 "none" exactly when no avx512_bf16,
    bf16_amx "none" exactly when no amx_bf16 / amx_tile or Linux refuses this process the tiles
    (arch_prctl ARCH_REQ_XCOMP_PERM, asked here through ctypes);
  * a bad --threads or --seconds is refused with exit 2 and names the flag.
Usage: check_peak_shape.py BENCH_PEAK"""
import json
import subprocess
import sys

exe = sys.argv[1]
info = {}
for line in open("/proc/cpuinfo"):
    if not line.strip():
        break
    k, _, v = line.partition(":")
    info[k.strip()] = v.strip()
flags = set(info.get("flags", "").split())

p = subprocess.run([exe, "--threads", "2", "--seconds", "0.05"], capture_output=True, text=True, check=True)
recs = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
assert len(recs) == 1, p.stdout
r = recs[0]
assert r["bench"] == "peak" and r["threads"] == 2, r
assert r["cpu"]["model_name"] == info.get("model name"), (r["cpu"], info.get("model name"))
assert r["cpu"]["family"] == int(info["cpu family"]) and r["cpu"]["model"] == int(info["model"]), r["cpu"]
for f in ("avx2", "fma", "avx512f", "avx512_bf16"):
    assert (f in r["cpu"]["flags"]) == (f in flags), (f, r["cpu"]["flags"])
for key in ("fp32_gflops", "fp32_ymm_gflops"):
    assert set(r[key]) == {"1", "2"} and all(v > 0 for v in r[key].values()), r[key]
if "avx512f" in flags:
    z = r["fp32_zmm_gflops"]
    assert z != "none" and z["1"] > 0 and z["2"] > 0, z
    for t in ("1", "2"):
        assert r["fp32_gflops"][t] == max(z[t], r["fp32_ymm_gflops"][t]), r
else:
    assert r["fp32_zmm_gflops"] == "none" and r["fp32_isa"] == "ymm", r
    assert r["fp32_gflops"] == r["fp32_ymm_gflops"], r
if "avx512_bf16" in flags:
    assert r["bf16_gflops"] != "none" and r["bf16_gflops"]["1"] > 0, r
else:
    assert r["bf16_gflops"] == "none", r
def amx_granted():
    import ctypes
    SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 158, 0x1023, 18  # x86_64 <asm/prctl.h>
    return ctypes.CDLL(None, use_errno=True).syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0


amx = r["bf16_amx_gflops"]
if {"amx_bf16", "amx_tile"} <= flags and amx_granted():
    assert amx != "none" and set(amx) == {"1", "2"} and all(v > 0 for v in amx.values()), amx
else:
    assert amx == "none", amx
for bad, flag in ((["--threads", "0"], "--threads"), (["--seconds", "-1"], "--seconds"), (["--nope"], "--nope")):
    q = subprocess.run([exe] + bad, capture_output=True, text=True)
    assert q.returncode == 2 and flag in q.stderr, (bad, q.returncode, q.stderr)
print(f"ok: bench_peak on {r['cpu']['model_name']} (family {r['cpu']['family']} model {r['cpu']['model']}): "
      f"fp32 {r['fp32_gflops']} ({r['fp32_isa']}), bf16 {r['bf16_gflops']}, AMX {amx}")
