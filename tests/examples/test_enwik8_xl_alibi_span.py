#!/usr/bin/env python3
"""examples/enwik8_xl_alibi_span.sh end to end in a short form (ctest -R examples_enwik8_xl_alibi_span).

Runs the recipe with a tiny size (2 layers, C 64, T 64, M 32) and a few seconds of training per
model (the whole valid and test splits are evaluated), then checks what it wrote, from the files
the tools wrote themselves rather than from the report alone:
  - results.csv: three rows (xl, alibi, span), finite bpc, each equal to the "Bits per byte" line
    eval-lm printed in that model's eval log; parameter counts equal the training log's;
  - every training stopped by --stop-time-hours (fairseq's "cumulative_training_time" line) after
    running at least MINUTES, with CPU seconds and tokens/s recorded;
  - spans.tsv: a header, at least two rows, strictly increasing num_updates, 0 <= avg <= max span;
  - spans.svg: written by gnuplot, parses as XML with an <svg> root;
  - results.json and results.md parse / hold three rows;
  - a malformed knob (MINUTES=abc) exits non-zero naming MINUTES and writes nothing.
Usage: test_enwik8_xl_alibi_span.py --stretch build/bin/stretch --out DIR
"""
import argparse
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check, finish  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
RECIPE = os.path.join(ROOT, "examples", "enwik8_xl_alibi_span.sh")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stretch", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, STRETCH_BIN=os.path.abspath(a.stretch), OUT=out, MINUTES="0.12", THREADS="1",
               UPDATES="100000", L="2", C="64", H="2", F="128", T="64", M="32", B="4", LOG_INTERVAL="1")
    # Bad input first: one clear error, nothing written.
    bad = subprocess.run(["bash", RECIPE], env=dict(env, MINUTES="abc", OUT=out + "-bad"), capture_output=True,
                         text=True, timeout=60)
    check(bad.returncode != 0 and "MINUTES=abc" in bad.stderr and not os.path.exists(out + "-bad"),
          f"MINUTES=abc refused naming MINUTES, nothing written (exit {bad.returncode}: {bad.stderr.strip()[-200:]})")
    r = subprocess.run(["bash", RECIPE], env=env, capture_output=True, text=True, timeout=540)
    print(r.stdout[-3000:])
    if not check(r.returncode == 0, f"the recipe exits 0 (exit {r.returncode})"):
        print(r.stderr[-3000:])
        return finish()
    rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
    check([x["model"] for x in rows] == ["xl", "alibi", "span"], f"results.csv: three rows xl, alibi, span "
          f"({[x['model'] for x in rows]})")
    for x in rows:
        m = x["model"]
        for split, tag, key in (("valid", "valid", "valid_bpc"), ("test", "test", "test_bpc"),
                                ("test", "test_as_trained" if m == "xl" else "test", "test_bpc_as_trained")):
            v = float(x[key])
            log = open(os.path.join(out, m, f"eval_{tag}.log")).read()
            printed = re.findall(r"Bits per byte: ([0-9.]+)", log)
            check(math.isfinite(v) and 0 < v < 16 and len(printed) == 1 and abs(float(printed[0]) - v) < 6e-5,
                  f"{m} {key} = {v:.4f}: finite and eval-lm's printed bits per byte on {split} ({printed})")
        tlog = open(os.path.join(out, m, "train.log")).read()
        params = re.search(r"num\. shared model params: ([0-9,]+)", tlog)
        check(params and int(params.group(1).replace(",", "")) == int(x["params"]) > 0,
              f"{m}: params {x['params']} as the training log prints")
        check("Stopping training due to cumulative_training_time" in tlog and int(x["updates"]) >= 1
              and x["stopped_by_time"] == "True", f"{m}: stopped by --stop-time-hours after {x['updates']} updates")
        check(float(x["elapsed_s"]) >= 0.12 * 60, f"{m}: ran {x['elapsed_s']} s, at least MINUTES")
        check(float(x["cpu_s"]) > 0 and float(x["tokens_per_s"]) > 0, f"{m}: CPU s {x['cpu_s']}, tokens/s "
              f"{x['tokens_per_s']}")
    j = json.load(open(os.path.join(out, "results.json")))
    check(len(j["models"]) == 3 and j["settings"]["minutes_per_model"] == 0.12, "results.json: three models, settings")
    md = open(os.path.join(out, "results.md")).read()
    check(sum(1 for ln in md.splitlines() if re.match(r"\| (Transformer-XL|ALiBi|Adaptive Span)", ln)) == 3,
          "results.md: a table with three model rows")
    lines = open(os.path.join(out, "spans.tsv")).read().splitlines()
    check(lines[0].split("\t") == ["num_updates", "loss", "avg_span", "max_span"], "spans.tsv header")
    sp = [[float(v) for v in ln.split("\t")] for ln in lines[1:]]
    ups = [s[0] for s in sp]
    check(len(sp) >= 2 and all(b > a for a, b in zip(ups, ups[1:])),
          f"spans.tsv: {len(sp)} rows, strictly increasing num_updates ({ups[:5]}...)")
    check(all(math.isfinite(s[2]) and math.isfinite(s[3]) and 0 <= s[2] <= s[3] + 1e-9 for s in sp),
          "spans.tsv: finite spans, 0 <= avg_span <= max_span")
    svg = os.path.join(out, "spans.svg")
    try:
        root = ET.parse(svg).getroot()
        ok = root.tag.endswith("svg") and os.path.getsize(svg) > 500
    except (ET.ParseError, OSError) as e:
        ok = False
        print(e)
    check(ok, f"spans.svg: gnuplot's svg, parses ({os.path.getsize(svg) if os.path.exists(svg) else 0} bytes)")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
