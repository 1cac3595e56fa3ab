#!/usr/bin/env python3
"""stretch against stretch: two builds of bench/bench_model in the same run, as after/before ratios.

For a change that must not cost speed (issue 11's refactor: "bench/compare.py training and
evaluation ratios within noise of before"), the PyTorch anchor is beside the point: what counts is
the new binary against the old one on the same configurations, measured so that the load of a
shared host hits both alike. This script runs two bench_model binaries (A = before, B = after)
on compare.py's training and evaluation shapes and prints, per row, the B/A ratio of tokens per
CPU second (one thread; the steady figure on a loaded host) or per wall second (more threads; also
per CPU second), each as min / median / max over the repetitions, and the ratio of each side's
best run (compare.py's figure: load only ever slows a run down, so the fastest is the least
disturbed).

Schedule: repetitions are the outer loop and configurations the inner one, so every configuration
is sampled across the whole run; inside a repetition each configuration runs A then B (odd
repetitions B then A), back to back, and a ratio is taken only between those two adjacent runs.
Every run is a fresh process with OMP_NUM_THREADS = threads and OMP_WAIT_POLICY=passive
(--omp-wait-policy unset: libgomp's default spin, as bench/compare.py runs); --bf16 adds --bf16
to every row (bf16 matrix products in training and evaluation).

Configurations (as bench/compare.py): training on the small model (transformer_lm_small, 4 layers /
C 256 / 4 heads / F 1024, pre-norm, untied, dropout 0.1, ALiBi), B = 8, V 256 and 10,008, T 128 and
512; evaluation (eval-lm's scorer, B = 1, V = 33,280, ALiBi) at --lengths-eval.

Usage (from the repository root):
  # the commit before, built out of tree (only the bench target):
  tmp=$(mktemp -d); git archive e369cbe | tar -x -C $tmp
  cmake -S $tmp -B $tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRETCH_BUILD_TESTS=OFF
  ninja -C $tmp/build bench_model
  python3 bench/compare_builds.py --before $tmp/build/bench/bench_model --after build/bench/bench_model
  ... --threads 1,2 --repeats 8 --json raw.jsonl --write-docs
  python3 bench/compare_builds.py --load raw1.jsonl raw2.jsonl --write-docs   # re-tabulate saved runs
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import replace_doc_block  # noqa: E402  (the one writer of docs/BENCHMARKS.md blocks)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SMALL = ["--layers", "4", "--embed-dim", "256", "--heads", "4", "--ffn-dim", "1024"]
MEDIUM = ["--layers", "6", "--embed-dim", "512", "--heads", "8", "--ffn-dim", "2048"]  # compare.py's "medium"
DOC_BEGIN = "<!-- bench/compare_builds.py tables: begin -->"
DOC_END = "<!-- bench/compare_builds.py tables: end -->"


def configs(args):
    """[(name, mode, extra flags)] in table order."""
    out = []
    bf16 = ["--bf16"] if args.bf16 else []
    if args.only in ("train", "all"):
        for model in args.models:
            sizes = SMALL if model == "small" else MEDIUM
            prefix = "train" if model == "small" else f"train {model}"
            for V in args.vocabs:
                for T in args.lengths_train:
                    out.append((f"{prefix} V={V} T={T}", "train",
                                ["--vocab", str(V), "--tokens-per-sample", str(T), "--batch", str(args.batch),
                                 "--arch", "transformer_lm_small", "--pos", "alibi", "--dropout", "0.1"] + sizes +
                                ["--warmup", str(args.warmup), "--steps", str(args.steps)] + bf16))
    if args.only in ("eval", "all"):
        for T in args.lengths_eval:
            out.append((f"eval T={T}", "eval",
                        ["--vocab", str(args.eval_vocab), "--lengths", str(T), "--arch", "transformer_lm_small",
                         "--pos", "alibi"] + SMALL + ["--warmup", str(args.warmup), "--steps", str(args.eval_steps)] +
                        bf16))
    return out


def run_one(binary, mode, extra, threads, wait_policy="passive", side_env=()):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    env.update(kv.split("=", 1) for kv in side_env)
    env.pop("OMP_WAIT_POLICY", None)
    if wait_policy != "unset":
        env["OMP_WAIT_POLICY"] = wait_policy
    cmd = [binary, mode, "--threads", str(threads)] + extra
    load = os.getloadavg()[0]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.stderr.write(f"compare_builds: command failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}\n")
        raise SystemExit(1)
    recs = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    if len(recs) != 1:
        sys.stderr.write(f"compare_builds: expected one JSON line from {' '.join(cmd)}, got {len(recs)}\n")
        raise SystemExit(1)
    recs[0]["load1"] = load
    return recs[0]


def spread(xs, nd=3):
    return f"{min(xs):.{nd}f} / **{statistics.median(xs):.{nd}f}** / {max(xs):.{nd}f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="bench_model of the old build (A)")
    ap.add_argument("--after", default=os.path.join(ROOT, "build", "bench", "bench_model"),
                    help="bench_model of the new build (B); default build/bench/bench_model")
    ap.add_argument("--env-before", action="append", default=[], metavar="KEY=VALUE",
                    help="an environment variable for side A only (repeatable); with --before = --after this "
                         "compares two settings of one binary, e.g. --env-before STRETCH_GEMM=onednn")
    ap.add_argument("--env-after", action="append", default=[], metavar="KEY=VALUE",
                    help="the same for side B")
    ap.add_argument("--label-before", default="before")
    ap.add_argument("--label-after", default="after")
    ap.add_argument("--only", choices=("train", "eval", "all"), default="all")
    ap.add_argument("--bf16", action="store_true", help="every row with --bf16 (bf16 matrix products)")
    ap.add_argument("--omp-wait-policy", default="passive", choices=("passive", "active", "unset"),
                    help="OMP_WAIT_POLICY of every run (unset: libgomp's default spin, as bench/compare.py)")
    ap.add_argument("--threads", default="1", help="comma-separated thread counts")
    ap.add_argument("--models", default="small", help="training models: small and/or medium (compare.py's sizes)")
    ap.add_argument("--vocabs", default="256,10008")
    ap.add_argument("--lengths-train", default="128,512")
    ap.add_argument("--lengths-eval", default="512,1024,2048,4096")
    ap.add_argument("--eval-vocab", type=int, default=33280)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3, help="timed training steps per run")
    ap.add_argument("--eval-steps", type=int, default=3, help="timed evaluation passes per run")
    ap.add_argument("--repeats", type=int, default=6, help="A/B pairs per configuration and thread count")
    ap.add_argument("--json", default=None, help="also write every measurement here (JSON lines)")
    ap.add_argument("--load", nargs="+", default=None, metavar="JSONL",
                    help="measure nothing: tabulate the --json files of earlier runs (same row flags)")
    ap.add_argument("--write-docs", action="store_true",
                    help=f"replace the text between {DOC_BEGIN!r} and {DOC_END!r} in docs/BENCHMARKS.md")
    args = ap.parse_args()
    args.thread_list = [int(x) for x in args.threads.split(",")]
    args.models = [m for m in args.models.split(",") if m]
    for m in args.models:
        if m not in ("small", "medium"):
            ap.error(f"--models: unknown model {m!r} (small, medium)")
    args.vocabs = [int(x) for x in args.vocabs.split(",")]
    args.lengths_train = [int(x) for x in args.lengths_train.split(",")]
    args.lengths_eval = [int(x) for x in args.lengths_eval.split(",")]
    if not args.load:
        if not args.before:
            ap.error("--before is required (or --load earlier runs)")
        for b in (args.before, args.after):
            if not os.access(b, os.X_OK):
                ap.error(f"{b}: not an executable (build bench_model first)")
    for kv in args.env_before + args.env_after:
        if "=" not in kv or not kv.split("=", 1)[0]:
            ap.error(f"--env-before/--env-after: {kv!r} is not KEY=VALUE")
    rows = configs(args)
    if args.load:
        results, loads, elapsed = load_runs(args, rows)
    else:
        results, loads, elapsed = measure(args, rows)
    if not loads:
        sys.stderr.write("compare_builds: no measurements\n")
        raise SystemExit(1)
    text = tables(args, rows, results, loads, elapsed)
    print(text)
    if args.write_docs:
        write_docs(text, [a for a in sys.argv[1:] if a != "--write-docs"])


def measure(args, rows):
    """Runs every (threads, repetition, row) pair; returns ({(threads, row): [(A, B)]}, loads, seconds)."""
    jf = open(args.json, "w") if args.json else None
    sides = [("A", args.before, args.env_before), ("B", args.after, args.env_after)]
    results = {(th, name): [] for th in args.thread_list for name, _, _ in rows}
    loads = []
    t0 = time.time()
    for th in args.thread_list:
        for r in range(args.repeats):
            for name, mode, extra in rows:
                order = sides if r % 2 == 0 else list(reversed(sides))
                got = {}
                for side, binary, side_env in order:
                    rec = run_one(binary, mode, extra, th, args.omp_wait_policy, side_env)
                    rec.update(side=side, rep=r, row=name, wall_clock=time.time() - t0)
                    loads.append(rec["load1"])
                    got[side] = rec
                    if jf:
                        jf.write(json.dumps(rec) + "\n")
                        jf.flush()
                results[(th, name)].append((got["A"], got["B"]))
                a, b = got["A"], got["B"]
                print(f"  threads={th} rep {r + 1}/{args.repeats} {name}: {args.label_before} "
                      f"{a['tokens_per_cpu_s']:.0f} {args.label_after} {b['tokens_per_cpu_s']:.0f} tok/CPU-s "
                      f"(ratio {b['tokens_per_cpu_s'] / a['tokens_per_cpu_s']:.3f}; load {a['load1']:.1f}, "
                      f"{time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    return results, loads, time.time() - t0


def load_runs(args, rows):
    """The same from --json files of earlier runs (pairs matched by threads, row and repetition)."""
    by = {}
    elapsed = 0.0
    for path in args.load:
        last = 0.0
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                by.setdefault((rec["threads"], rec["row"], path, rec["rep"]), {})[rec["side"]] = rec
                last = max(last, rec.get("wall_clock", 0.0))
        elapsed = None if elapsed is None or last == 0.0 else elapsed + last  # None: not recorded
    names = [name for name, _, _ in rows]
    results, loads = {}, []
    for (th, name, _, _), pair in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][3])):
        if name not in names or "A" not in pair or "B" not in pair:
            continue
        results.setdefault((th, name), []).append((pair["A"], pair["B"]))
        loads += [pair["A"]["load1"], pair["B"]["load1"]]
    args.thread_list = sorted({th for th, _ in results})
    counts = {th: sorted({len(v) for (t, _), v in results.items() if t == th}) for th in args.thread_list}
    args.repeats = ", ".join("/".join(map(str, n)) + f" ({th} thread{'s' if th > 1 else ''})" for th, n in counts.items())
    return results, loads, elapsed


def tables(args, rows, results, loads, elapsed):
    lines = []
    for th in args.thread_list:
        hdr = (f"| threads | row | {args.label_before} tok/CPU-s (median) | {args.label_after} tok/CPU-s (median) | "
               f"**{args.label_after}/{args.label_before}, CPU** min / median / max |")
        sep = "|---|---|---|---|---|"
        hdr += " best/best, CPU |"
        sep += "---|"
        if th > 1:
            hdr += (f" {args.label_before} tok/s (median) | {args.label_after} tok/s (median) | "
                    f"{args.label_after}/{args.label_before}, wall min / median / max |")
            sep += "---|---|---|"
        lines += ["", hdr, sep]
        for name, _, _ in rows:
            pairs = results.get((th, name))
            if not pairs:
                continue
            ca = [a["tokens_per_cpu_s"] for a, _ in pairs]
            cb = [b["tokens_per_cpu_s"] for _, b in pairs]
            rc = [b / a for a, b in zip(ca, cb)]
            line = (f"| {th} | {name} | {statistics.median(ca):,.0f} | {statistics.median(cb):,.0f} | "
                    f"{spread(rc)} |")
            line += f" {max(cb) / max(ca):.3f} |"
            if th > 1:
                wa = [a["tokens_per_s"] for a, _ in pairs]
                wb = [b["tokens_per_s"] for _, b in pairs]
                rw = [b / a for a, b in zip(wa, wb)]
                line += f" {statistics.median(wa):,.0f} | {statistics.median(wb):,.0f} | {spread(rw)} |"
            lines.append(line)
        lines += [""] + pooled(th, rows, results, args)
    host = host_line()
    when = (f"Runs tabulated from {', '.join(os.path.basename(p) for p in args.load)}" if args.load
            else f"Run {time.strftime('%Y-%m-%d %H:%M')}")
    head = (f"{when} on {host}; load average (1 min) before each run: "
            f"min {min(loads):.1f} / median {statistics.median(loads):.1f} / max {max(loads):.1f}; "
            f"{args.repeats} {args.label_before}/{args.label_after} pairs per row (A B, B A, ... adjacent), "
            f"OMP_WAIT_POLICY={args.omp_wait_policy}{'; --bf16' if args.bf16 else ''}; training {args.warmup} warm-up + {args.steps} timed steps, evaluation "
            f"{args.warmup} + {args.eval_steps} passes per run" +
            (f"; {elapsed:.0f} s in all." if elapsed is not None else "."))
    return head + "\n" + "\n".join(lines)


def pooled(th, rows, results, args):
    """Per mode: the geometric mean of every pair's CPU ratio, with a 95% interval (normal, on logs)."""
    out = []
    for mode in ("train", "eval"):
        logs = [math.log(b["tokens_per_cpu_s"] / a["tokens_per_cpu_s"])
                for name, m, _ in rows if m == mode for a, b in results.get((th, name), [])]
        if len(logs) < 2:
            continue
        mean, se = statistics.mean(logs), statistics.stdev(logs) / math.sqrt(len(logs))
        slower = sum(x < 0 for x in logs)
        out.append(f"- {th} thread{'s' if th > 1 else ''}, {mode}, all {len(logs)} pairs pooled: {args.label_after}/{args.label_before} "
                   f"(CPU) geometric mean **{math.exp(mean):.3f}**, 95% interval {math.exp(mean - 1.96 * se):.3f} - "
                   f"{math.exp(mean + 1.96 * se):.3f}; {args.label_after} slower in {slower} of {len(logs)} pairs.")
    return out


def host_line():
    info = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
    except OSError:
        pass
    return (f"{info.get('Model name', '?')} (family {info.get('CPU family', '?')}, model {info.get('Model', '?')}), "
            f"{os.cpu_count()} cores")


def write_docs(text, argv):
    replace_doc_block(text, "python3 bench/compare_builds.py " + " ".join(argv), DOC_BEGIN, DOC_END, "compare_builds")


if __name__ == "__main__":
    main()
