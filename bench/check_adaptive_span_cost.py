#!/usr/bin/env python3
"""bench_adaptive_span_cost_shape: bench/adaptive_span_cost.py runs and reports what it says,
without speed thresholds (seconds, no fairseq): --no-fairseq --spans 64 --updates 5 --rounds 1
gives one `learned` (attn_span 8192, z = 32/8192) and one `fixed` (attn_span 64, z = 0.5) record,
each with max_span 64 (span size ceil(z·L) + 32, computed here by hand), positive step, CPU and
RSS figures, and the learned / fixed table row for S = 64; bad --spans / --updates values exit 1
with a message naming the flag.
Usage: check_adaptive_span_cost.py BUILD_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "adaptive_span_cost.py")


def main():
    build = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.jsonl")
        p = subprocess.run([sys.executable, BENCH, "--build", build, "--no-fairseq", "--spans", "64", "--updates", "5",
                            "--rounds", "1", "--json", raw], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"FAIL: the bench exited {p.returncode}:\n{p.stdout}{p.stderr}")
        recs = [json.loads(line) for line in open(raw)]
        want = {"learned": (8192, 32 / 8192), "fixed": (64, 32 / 64)}
        if sorted(r["run"] for r in recs) != sorted(want):
            failures.append(f"runs {[r['run'] for r in recs]}, expected one learned and one fixed")
        for r in recs:
            L, z = want.get(r["run"], (None, None))
            if r["attn_span"] != L or r["z"] != z or r["span"] != 64:
                failures.append(f"{r['run']}: attn_span {r['attn_span']} z {r['z']} span {r['span']}")
            if r["max_span"] != 64.0:  # ceil(z·L) + R = 32 + 32 in both
                failures.append(f"{r['run']}: logged max_span {r['max_span']}, expected 64")
            if r.get("cpu_from_update") not in (0, 1, 2, 3):  # update 3, or earlier on a loaded host
                failures.append(f"{r['run']}: cpu_from_update {r.get('cpu_from_update')}")
            for k in ("step_s", "cpu_step_s", "peak_rss_mb"):
                if not r[k] > 0:
                    failures.append(f"{r['run']}: {k} = {r[k]}")
        if not any(line.startswith("| 64 | ") for line in p.stdout.splitlines()) or "worst learned / fixed" not in p.stdout:
            failures.append(f"no S = 64 table row or summary line:\n{p.stdout}")
        for flags, name in ((["--spans", "100"], "--spans"), (["--updates", "3"], "--updates")):
            q = subprocess.run([sys.executable, BENCH, "--build", build, "--no-fairseq"] + flags, capture_output=True,
                               text=True)
            if q.returncode != 1 or name not in q.stderr:
                failures.append(f"{flags}: exit {q.returncode}, stderr {q.stderr!r}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("OK: adaptive_span_cost.py's records and table have the grid's shape; bad flags refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
