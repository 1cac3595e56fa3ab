#!/usr/bin/env python3
"""The other recipes of examples/ run end to end in a short form through the real binary:
  * alibi_memory.sh: both trainings, three evaluations with a finite bits per byte each; a doubled
    --model-overrides mem_len and the model without memory give other numbers than the memory run;
  * adaptive_span_enwik8.sh: spans.tsv with rows at the log interval (updates increasing,
    0 < avg_span <= max_span <= SPAN + ramp), a finite bits per byte on test;
  * alibi_encoder.sh: table.md with the four --pos rows, finite perplexities, learned positions
    refused past the training length (the footnote's "refused");
  * alibi_variants.sh with two variants: sweep.csv with 2 models x 5 lengths of finite perplexity,
    the interpolation sweep's ALiBi row equal to the plain one at the training length.
The scripts prepare PTB and the enwik8 prefix in the repository (scripts/data.sh, as the README
demo does); a CTest RESOURCE_LOCK keeps them from racing with examples_enwik8_xl_alibi_span.
Usage: test_example_scripts.py --stretch build/bin/stretch --out DIR
"""
import argparse
import csv
import math
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import check, finish  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def recipe(name, env, out):
    r = subprocess.run(["bash", os.path.join(ROOT, "examples", name)], env=dict(env, OUT=out), cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    if not check(r.returncode == 0, f"{name} exits 0 (exit {r.returncode})"):
        print(r.stdout[-2000:], r.stderr[-2000:])
    return r


def bpcs(text):
    return [float(x) for x in re.findall(r"Bits per byte: ([0-9.eE+-]+|nan|inf)", text)]


def finite(xs):
    return bool(xs) and all(math.isfinite(x) and x > 0 for x in xs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stretch", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, STRETCH_BIN=os.path.abspath(a.stretch), OMP_NUM_THREADS="1")

    r = recipe("alibi_memory.sh", dict(env, UPDATES="4", T="32", MEM="32", BSZ="4"), os.path.join(out, "memory"))
    b = bpcs(r.stdout)
    check(len(b) == 3 and finite(b) and b[0] != b[1] and b[0] != b[2],
          f"alibi_memory: three finite bpc, memory x2 and no memory differ from the memory run ({b})")

    span = 64
    r = recipe("adaptive_span_enwik8.sh", dict(env, UPDATES="50", T="32", SPAN=str(span), BSZ="4"),
               os.path.join(out, "span"))
    rows = list(csv.DictReader(open(os.path.join(out, "span", "spans.tsv")), delimiter="\t")) \
        if r.returncode == 0 else []
    ups = [int(x["num_updates"]) for x in rows]
    spans = [(float(x["avg_span"]), float(x["max_span"])) for x in rows]
    check(ups == [25, 50] and all(0 < av <= mx <= span + 32 for av, mx in spans),
          f"adaptive_span: spans.tsv at updates 25 and 50, 0 < avg <= max <= span + ramp ({ups}, {spans})")
    check(len(bpcs(r.stdout)) == 1 and finite(bpcs(r.stdout)), f"adaptive_span: a finite bpc on test ({bpcs(r.stdout)})")

    r = recipe("alibi_encoder.sh", dict(env, UPDATES="3", MAX_TOKENS="256", LENGTHS="64,128"),
               os.path.join(out, "encoder"))
    table = open(os.path.join(out, "encoder", "table.md")).read() if r.returncode == 0 else ""
    cells = {m.group(1): m.group(2).split(" | ") for m in re.finditer(r"^\| (\w+) \| (.+) \|$", table, re.M)}
    check(sorted(cells) == ["alibi", "learned", "none", "sinusoidal"] and cells["learned"][1] == "refused¹"
          and finite([float(x) for k, v in cells.items() for x in v if x != "refused¹"]),
          f"alibi_encoder: four rows, finite perplexities, learned refused at L = 128 ({cells})")

    var = os.path.join(out, "variants")
    r = recipe("alibi_variants.sh", dict(env, UPDATES="3", MAX_TOKENS="256", VARIANTS="alibi alibi-log"), var)
    rows = list(csv.DictReader(open(os.path.join(var, "sweep.csv")))) if r.returncode == 0 else []
    interp = list(csv.DictReader(open(os.path.join(var, "interp", "sweep.csv")))) if r.returncode == 0 else []
    got = sorted((x["label"], int(x["eval_length"])) for x in rows)
    want = sorted((m, L) for m in ("alibi", "alibi-log") for L in (64, 128, 256, 512, 1024))
    check(got == want and finite([float(x["ppl"]) for x in rows]),
          f"alibi_variants: 2 models x 5 lengths of finite perplexity ({got})")
    plain = {int(x["eval_length"]): x["ppl"] for x in rows if x["label"] == "alibi"}
    inter = {int(x["eval_length"]): x["ppl"] for x in interp}
    check(len(inter) == 5 and inter.get(64) == plain.get(64) and inter.get(1024) != plain.get(1024),
          f"alibi_variants: interpolation equals plain ALiBi at L = 64 and not at 1024 ({inter}, {plain})")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
