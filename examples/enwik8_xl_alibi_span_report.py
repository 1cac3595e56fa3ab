#!/usr/bin/env python3
"""The report of examples/enwik8_xl_alibi_span.sh: reads OUT/{xl,alibi,span}/ (train.log with
fairseq's JSON lines, time.txt from /usr/bin/time, eval_*.json from eval-lm --results-json) and writes

  OUT/results.md    the table (bpc = eval-lm's bits per byte on valid and test, updates, tokens/s,
                    CPU seconds, parameters), also printed
  OUT/results.csv   the same rows, one per model
  OUT/results.json  the rows plus the run's settings and the load (uptime) around it
  OUT/spans.tsv     num_updates, loss (bpc), avg_span, max_span of span's train_inner lines
  OUT/spans.svg     avg_span and max_span over the updates, drawn by gnuplot

Usage: examples/enwik8_xl_alibi_span_report.py OUT --minutes M --threads N --size TEXT --xl-eval TEXT
       [--max-span M]
Only the standard library and gnuplot; exits 1 naming the missing or malformed file.
"""
import argparse
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys

MODELS = ("xl", "alibi", "span")
LABELS = {"xl": "Transformer-XL", "alibi": "ALiBi + memory", "span": "Adaptive Span"}


def fail(msg):
    print(f"enwik8_xl_alibi_span_report.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def json_lines(path):
    """Every JSON record of a stretch/fairseq training log, as dicts."""
    if not os.path.isfile(path):
        fail(f"{path} not found (did the training run?)")
    for line in open(path, encoding="utf-8", errors="replace"):
        i = line.find("{")
        if i < 0:
            continue
        try:
            yield json.loads(line[i:])
        except json.JSONDecodeError:
            continue


def train_summary(out, m):
    log = os.path.join(out, m, "train.log")
    wps, epoch_wps, updates, valid = [], None, 0, None
    for j in json_lines(log):
        for k in ("num_updates", "train_num_updates", "valid_num_updates"):
            if k in j:
                updates = max(updates, int(j[k]))
        if "wps" in j:  # train_inner lines
            wps.append(float(j["wps"]))
        if "train_wps" in j:  # fairseq's end-of-epoch summary: the epoch's tokens / training time
            epoch_wps = float(j["train_wps"])
        if "valid_loss" in j:
            valid = float(j["valid_loss"])
    text = open(log, encoding="utf-8", errors="replace").read()
    params = re.search(r"num\. shared model params: ([0-9,]+)", text)
    if not params:
        fail(f"{log}: no 'num. shared model params' line")
    stopped = "Stopping training due to cumulative_training_time" in text
    tfile = os.path.join(out, m, "time.txt")
    if not os.path.isfile(tfile):
        fail(f"{tfile} not found (/usr/bin/time output)")
    t = dict(zip(*[iter(open(tfile).read().split()[-8:])] * 2))
    try:
        cpu = float(t["user_s"]) + float(t["sys_s"])
        elapsed = float(t["elapsed_s"])
        rss = int(t["peak_rss_kb"]) / 1024
    except (KeyError, ValueError):
        fail(f"{tfile}: expected 'elapsed_s E user_s U sys_s S peak_rss_kb K', got {open(tfile).read()!r}")
    return {"updates": updates, "params": int(params.group(1).replace(",", "")), "stopped_by_time": stopped,
            "tokens_per_s": epoch_wps if epoch_wps is not None else (statistics.median(wps) if wps else float("nan")), "cpu_s": cpu, "elapsed_s": elapsed,
            "peak_rss_mb": rss, "train_valid_loss": valid}


def bpc(out, m, tag):
    path = os.path.join(out, m, f"eval_{tag}.json")
    if not os.path.isfile(path):
        fail(f"{path} not found (eval-lm --results-json)")
    j = json.load(open(path))
    if "bits_per_byte" not in j:
        fail(f"{path}: no bits_per_byte (is the data byte level? keys: {sorted(j)})")
    return float(j["bits_per_byte"]), int(j["count"])


def spans(out):
    rows = []
    for j in json_lines(os.path.join(out, "span", "train.log")):
        if "avg_span" in j and "max_span" in j and "valid_loss" not in j and "num_updates" in j:
            rows.append((int(j["num_updates"]), float(j["loss"]), float(j["avg_span"]), float(j["max_span"])))
    return rows


def plot(rows, svg, title, max_span):
    """avg_span and max_span over the updates, the --attn-span ceiling dashed, the training loss (bpc)
    on the right axis (gnuplot, svg)."""
    data = "".join(f"{u} {a} {mx} {loss}\n" for u, loss, a, mx in rows)
    ceiling = (f"{max_span} with lines dt 2 lc rgb '#777777' title '--attn-span {max_span}', "
               if max_span else "")
    g = ["set terminal svg size 720,400 font 'sans,12' dynamic", f"set output '{svg}'",
         f"set title '{title}'", "set xlabel 'update'", "set ylabel 'span (tokens)'",
         "set y2label 'training loss (bpc)'", "set y2tics", "set ytics nomirror",
         "set key center right", "set grid lc rgb '#dddddd'",
         f"set yrange [*:{max_span * 1.05}]" if max_span else "set yrange [*:*]",
         "$d << EOD", data + "EOD",
         "plot " + ceiling + "$d using 1:3 with linespoints pt 7 ps 0.4 lw 2 lc rgb '#1f77b4' title 'max\\_span', "
         "$d using 1:2 with linespoints pt 7 ps 0.4 lw 2 lc rgb '#d62728' title 'avg\\_span', "
         "$d using 1:4 axes x1y2 with lines lw 1 lc rgb '#999999' title 'loss (right axis)'"]
    try:
        r = subprocess.run(["gnuplot"], input="\n".join(g) + "\n", text=True, capture_output=True)
    except FileNotFoundError:
        fail("gnuplot not found (Debian package gnuplot-nox)")
    if r.returncode != 0 or not os.path.isfile(svg) or os.path.getsize(svg) == 0:
        fail(f"gnuplot failed (exit {r.returncode}): {r.stderr.strip()}; {svg} was not written")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--minutes", required=True)
    ap.add_argument("--threads", required=True)
    ap.add_argument("--size", required=True)
    ap.add_argument("--xl-eval", required=True)
    ap.add_argument("--max-span", type=int, help="--attn-span of the span model (M): drawn dashed")
    a = ap.parse_args()
    rows = []
    for m in MODELS:
        r = {"model": m, **train_summary(a.out, m)}
        r["valid_bpc"], r["valid_tokens"] = bpc(a.out, m, "valid")
        r["test_bpc"], r["test_tokens"] = bpc(a.out, m, "test")
        # The seed evaluates span and alibi as trained; xl also once as trained (T, mem_len M).
        r["test_bpc_as_trained"] = bpc(a.out, m, "test_as_trained")[0] if m == "xl" else r["test_bpc"]
        for k in ("valid_bpc", "test_bpc", "test_bpc_as_trained"):
            if not math.isfinite(r[k]):
                fail(f"{m}: {k} is {r[k]} (see {a.out}/{m}/eval_*.log)")
        rows.append(r)
    cols = ["model", "params", "updates", "tokens_per_s", "cpu_s", "elapsed_s", "peak_rss_mb", "valid_bpc",
            "test_bpc", "test_bpc_as_trained", "train_valid_loss", "stopped_by_time", "valid_tokens", "test_tokens"]
    with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    uptime = open(os.path.join(a.out, "uptime.txt")).read().splitlines() if os.path.isfile(
        os.path.join(a.out, "uptime.txt")) else []
    meta = {"minutes_per_model": float(a.minutes), "threads_per_model": int(a.threads), "size": a.size,
            "xl_eval": a.xl_eval, "uptime": uptime}
    json.dump({"settings": meta, "models": rows}, open(os.path.join(a.out, "results.json"), "w"), indent=1)
    lines = [f"enwik8 prefix, {a.minutes} min per model at once, {a.threads} thread(s) each; {a.size}",
             "", "| model | params | updates | tokens/s | CPU s | valid bpc | test bpc | test bpc as trained |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {LABELS[r['model']]} | {r['params']:,} | {r['updates']} | {r['tokens_per_s']:.0f} | "
                     f"{r['cpu_s']:.0f} | {r['valid_bpc']:.4f} | {r['test_bpc']:.4f} | {r['test_bpc_as_trained']:.4f} |")
    lines.append("")
    lines.append(f"xl evaluated the seed's way with {a.xl_eval}; 'as trained' is T and mem_len as in training.")
    open(os.path.join(a.out, "results.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    sp = spans(a.out)
    if len(sp) < 2:
        fail(f"{a.out}/span/train.log: {len(sp)} train_inner line(s) with avg_span/max_span; the plot needs 2 "
             "(train longer or lower LOG_INTERVAL)")
    with open(os.path.join(a.out, "spans.tsv"), "w") as f:
        f.write("num_updates\tloss\tavg_span\tmax_span\n")
        f.writelines(f"{u}\t{l}\t{av}\t{mx}\n" for u, l, av, mx in sp)
    span_row = next(r for r in rows if r["model"] == "span")
    plot(sp, os.path.join(a.out, "spans.svg"),
         f"Adaptive Span on the enwik8 prefix: learned spans ({span_row['updates']} updates, "
         f"test {span_row['test_bpc']:.3f} bpc)", a.max_span)
    print(f"spans: {sp[0][0]}: avg {sp[0][2]:.1f} max {sp[0][3]:.1f} -> {sp[-1][0]}: avg {sp[-1][2]:.1f} "
          f"max {sp[-1][3]:.1f} ({a.out}/spans.tsv, {a.out}/spans.svg)")


if __name__ == "__main__":
    main()
