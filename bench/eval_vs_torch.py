#!/usr/bin/env python3
"""Evaluation benchmark (issue 7): `stretch eval-lm` against the PyTorch anchor (torch_lm.py),
in one run, as ratios.

  eval     for each T in --lengths: stretch eval-lm on the split, non-overlapping, one window of
           T tokens per forward pass (--max-sentences 1, as fairseq's README commands), against
           torch_lm.py eval (B = 1, T, fairseq's scorer: full log_softmax over V) on a model of
           the same shape and vocabulary. Reported: tokens per wall second and per CPU second
           (user + sys of the process, the steadier figure on a shared host) and peak RSS
           (VmHWM; each length in a fresh process on both sides).
  sliding  stride-1 sliding window (--context-window L-1) scored tokens per second. stretch runs
           on the first A and the first B lines of --text (binarized with the data's
           dictionary into a temporary directory); the first L-1 windows of a split have
           shorter contexts, so the steady-state rate is (N_B - N_A) / (t_B - t_A). torch_lm.py
           sliding scores full windows only.

Each measurement prints one JSON line; a Markdown table with the ratios follows.
Example (docs/BENCHMARKS.md, "Evaluation (issue 7)"):
  build/pyenv/bin/python bench/eval_vs_torch.py --stretch build/bin/stretch --data data-bin/ptb \\
      --checkpoint runs/small/checkpoint_last.pt --threads 1 --lengths 512,1024,2048,4096,8192 \\
      --stretch-only-lengths 32768 --sliding-text ../shared/data/ptb/ptb.valid.txt
The checkpoint must be the 4-layer / 256 / 4-head / FFN 1024 model (transformer_lm_small) trained on --data.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def emit(rec):
    print(json.dumps(rec), flush=True)


def run_timed(cmd, env=None):
    """Runs cmd; returns (stdout, cpu seconds of the child: user + sys)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r.stdout, cpu


def vocab_size(data):
    with open(os.path.join(data, "dict.txt"), encoding="utf-8", errors="replace") as f:
        return 4 + sum(1 for _ in f)


def stretch_eval(args, data, split, extra, tmp):
    result = os.path.join(tmp, "result.json")
    cmd = [args.stretch, "eval-lm", data, "--path", args.checkpoint, "--gen-subset", split, "--threads",
           str(args.threads), "--results-json", result] + extra
    _, cpu = run_timed(cmd)
    with open(result) as f:
        r = json.load(f)
    r["cpu_s"] = cpu
    return r


def torch_run(args, mode, extra):
    cmd = [args.python, os.path.join(HERE, "torch_lm.py"), mode, "--threads", str(args.threads), "--vocab",
           str(args.vocab)] + extra
    out, _ = run_timed(cmd)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stretch", required=True)
    ap.add_argument("--data", required=True, help="data-bin (PTB: its vocabulary is the benchmark's)")
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--split", default="valid")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--lengths", default="512,1024,2048,4096,8192")
    ap.add_argument("--stretch-only-lengths", default="", help="lengths PyTorch cannot hold (e.g. 32768)")
    ap.add_argument("--torch-steps", type=int, default=2)
    ap.add_argument("--sliding-text", help="raw text of the split (enables the sliding benchmark)")
    ap.add_argument("--sliding-lines", default="30,60", help="A,B: lines of --sliding-text for the two runs")
    ap.add_argument("--sliding-L", type=int, default=512)
    ap.add_argument("--torch-sliding-steps", type=int, default=10)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    args.vocab = vocab_size(args.data)
    tmp = tempfile.mkdtemp(prefix="stretch-eval-bench-")
    rows = []
    try:
        lengths = [int(x) for x in args.lengths.split(",") if x]
        only = [int(x) for x in args.stretch_only_lengths.split(",") if x]
        for T in sorted(lengths + only):
            s = stretch_eval(args, args.data, args.split, ["--tokens-per-sample", str(T), "--max-sentences", "1"], tmp)
            rec = {"bench": "eval", "side": "stretch", "T": T, "V": args.vocab, "tokens": s["count"],
                   "tokens_per_s": round(s["tokens_per_second"], 1), "tokens_per_cpu_s": round(s["count"] / s["cpu_s"], 1),
                   "peak_rss_mb": round(s["peak_rss_mb"], 1), "threads": args.threads}
            emit(rec)
            t = None
            if T in lengths:
                t = torch_run(args, "eval", ["--lengths", str(T), "--warmup", "1", "--steps", str(args.torch_steps)])[0]
                emit(t)
            rows.append(("eval", T, rec, t))
        if args.sliding_text:
            L = args.sliding_L
            a, b = (int(x) for x in args.sliding_lines.split(","))
            pts = []
            for n in (a, b):
                text = os.path.join(tmp, f"head{n}.txt")
                with open(args.sliding_text, encoding="utf-8", errors="surrogateescape") as f, \
                        open(text, "w", encoding="utf-8", errors="surrogateescape") as g:
                    for i, line in enumerate(f):
                        if i >= n:
                            break
                        g.write(line)
                dest = os.path.join(tmp, f"bin{n}")
                run_timed([args.stretch, "preprocess", "--only-source", "--srcdict",
                           os.path.join(args.data, "dict.txt"), "--validpref", text, "--destdir", dest])
                s = stretch_eval(args, dest, "valid", ["--tokens-per-sample", str(L), "--context-window", str(L - 1)],
                                 tmp)
                pts.append(s)
                emit({"bench": "sliding", "side": "stretch", "L": L, "lines": n, "scored": s["count"],
                      "seconds": round(s["seconds"], 2), "cpu_s": round(s["cpu_s"], 2),
                      "peak_rss_mb": round(s["peak_rss_mb"], 1)})
            dn = pts[1]["count"] - pts[0]["count"]
            rec = {"bench": "sliding", "side": "stretch", "L": L, "V": args.vocab, "steady_state": True,
                   "scored_tokens_per_s": round(dn / (pts[1]["seconds"] - pts[0]["seconds"]), 2),
                   "scored_tokens_per_cpu_s": round(dn / (pts[1]["cpu_s"] - pts[0]["cpu_s"]), 2),
                   "peak_rss_mb": round(max(p["peak_rss_mb"] for p in pts), 1), "threads": args.threads}
            emit(rec)
            t = torch_run(args, "sliding", ["--tokens-per-sample", str(L), "--warmup", "2", "--steps",
                                            str(args.torch_sliding_steps)])[0]
            emit(t)
            rows.append(("sliding", L, rec, t))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\n| {args.threads} thread(s), V {args.vocab} | stretch tok/s (wall / CPU) | PyTorch tok/s (wall / CPU) "
          "| ratio wall / CPU | stretch peak RSS MB | PyTorch peak RSS MB | memory ratio |")
    print("|---|---|---|---|---|---|---|")
    for kind, T, s, t in rows:
        if kind == "eval":
            sw, sc, sm = s["tokens_per_s"], s["tokens_per_cpu_s"], s["peak_rss_mb"]
            name = f"eval T = {T}"
        else:
            sw, sc, sm = s["scored_tokens_per_s"], s["scored_tokens_per_cpu_s"], s["peak_rss_mb"]
            name = f"sliding stride 1, L = {T} (scored tokens)"
        if t is None:
            print(f"| {name} | {sw:,.1f} / {sc:,.1f} | – | – | {sm:,.0f} | – | – |")
            continue
        tw = t.get("tokens_per_s", t.get("scored_tokens_per_s"))
        tc = t.get("tokens_per_cpu_s", t.get("scored_tokens_per_cpu_s"))
        tm = t["peak_rss_mb"]
        print(f"| {name} | {sw:,.1f} / {sc:,.1f} | {tw:,.1f} / {tc:,.1f} | {sw / tw:.2f} / {sc / tc:.2f} | "
              f"{sm:,.0f} | {tm:,.0f} | {sm / tm:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
