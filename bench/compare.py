#!/usr/bin/env python3
"""stretch vs PyTorch on the same configurations, in one run, as ratios (issues 5-7).

Runs build/bench/bench_model (stretch: the real TransformerLM, optimizer, clipping and eval-lm
scorer on synthetic tokens) and bench/torch_lm.py (the fairseq-style PyTorch model) on the same
shapes, interleaved A B C / C B A per configuration so that load changes hit every side alike,
and prints markdown tables. PyTorch runs as:

  1.13   Debian's python3-torch (build/pyenv), fairseq's F.multi_head_attention_forward with the
         fork's materialised ALiBi mask;
  sdpa   the current PyTorch from PyPI (build/torch2env, made by bench/setup_torch2.sh) with
         F.scaled_dot_product_attention and the ALiBi bias as its float mask;
  flex   the same PyTorch with compiled flex_attention and an ALiBi score_mod (evaluation only:
         FlexAttention has no backward on CPU).

The anchor of each row is the fastest of these (by tokens per CPU second); every ratio is
stretch over that anchor, and the anchor's name is printed with it. Without build/torch2env
(or with --no-torch2) only 1.13 runs. The tables:

  training   tokens/s for each model (4L/256/4H/1024 "small", 6L/512/8H/2048 "medium") x vocab
             (256 bytes, 10,008 PTB) x T (128, 512), B = 8, pre-norm, untied, dropout 0.1, ALiBi
  eval       B = 1 scoring at T = 512 ... 8192 (vocab 33,280 as MEASURED.md): tokens/s and peak RSS

Each side's figure is its best of --repeats runs (the least disturbed one). Both tokens per
wall second and per CPU second of the process are shown; on a shared host the CPU-second
figures are the comparable ones (one thread; with two threads a descheduled OpenMP thread makes
the other spin, which CPU time counts). Model FLOPs utilisation (MFU) uses one formula for both
sides: 6·N per trained token (2·N evaluated), N = weights of the matrix products (every Linear
and the output projection), plus causal attention 2·L·T·C per token forward (x3 in training),
against THIS host's fp32 FMA peak per core, measured in the same run by build/bench/bench_peak
(src/core/peak_flops.h) on 1 thread and on each --threads count (a row with t threads divides by the
t-thread peak / t); the bf16 column's MFU divides by the measured bf16 peak: the AMX tiles' where
the CPU has AMX (oneDNN's bf16 products run there), else vdpbf16ps's ("none" where it has neither). The CPU model, family, model number and flags head the output, and
--write-docs files the tables under that host in docs/BENCHMARKS.md (one block per host type).

PyTorch 1.13's OpenBLAS picks its kernels by OPENBLAS_CORETYPE; an environment that sets it
(e.g. Haswell on a Zen 5 host) can halve its matmul speed. The 1.13 anchor therefore runs as the
environment has it ("t113"), with it unset ("t113-unset", when it was set) and forced to
SkylakeX where the CPU has avx512f ("t113-skx"); a variant whose final loss (training) or NLL
(evaluation) disagrees with t113's by more than 1e-3 relative is dropped from the anchor choice
(and reported), and the fastest agreeing one is the anchor.

Usage (from the repository root, after building):
  build/pyenv/bin/python bench/compare.py                  # everything, 1 thread (~25 min)
  build/pyenv/bin/python bench/compare.py --only train --models small --threads 1,2
  build/pyenv/bin/python bench/compare.py --quick          # small model, T = 128, eval to 2048
  ... --bf16                                               # + stretch --bf16 training columns and a bf16
                                                           #   eval table, against PyTorch 2.x under
                                                           #   torch.autocast(bf16) (eval: SDPA and flex)
  ... --json raw.jsonl                                     # every measurement as JSON lines
  ... --write-docs                                         # also replace the tables in docs/BENCHMARKS.md
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SKX = "SkylakeX"  # OpenBLAS's AVX-512 core type

MODELS = {
    "small": {"layers": 4, "embed_dim": 256, "heads": 4, "ffn_dim": 1024},
    "medium": {"layers": 6, "embed_dim": 512, "heads": 8, "ffn_dim": 2048},
}


def matmul_params(m, V):
    C, F = m["embed_dim"], m["ffn_dim"]
    return m["layers"] * (4 * C * C + 2 * C * F) + V * C


def fwd_flops_per_token(m, V, T):
    return 2 * matmul_params(m, V) + 2 * m["layers"] * T * m["embed_dim"]


def measure_peaks(args):
    """{threads: bench_peak record} for 1 and every --threads count, measured now."""
    out = {}
    for t in sorted(set([1] + args.thread_list)):
        recs = run_json([args.peak_bench, "--threads", str(t), "--seconds", str(args.peak_seconds)])
        if len(recs) != 1 or recs[0].get("bench") != "peak":
            sys.stderr.write(f"compare: {args.peak_bench} printed no peak record\n")
            raise SystemExit(1)
        out[t] = recs[0]
    return out


def core_peak(args, threads, kind="fp32"):
    """FLOP/s per core with `threads` threads busy (the t-thread peak / t); None where the CPU
    has no such instructions (bf16 without avx512_bf16 or AMX). The bf16 peak is the AMX tiles'
    where bench_peak measured them (oneDNN's bf16 products run there), else vdpbf16ps's."""
    rec = args.peaks[threads]
    g = rec[f"{kind}_gflops"]
    if kind == "bf16" and rec.get("bf16_amx_gflops", "none") != "none":
        g = rec["bf16_amx_gflops"]
    if g == "none":
        return None
    return g[str(threads)] * 1e9 / threads


def host_key(peak):
    c = peak["cpu"]
    return f"{c['model_name']}, family {c['family']} model {c['model']} ({' '.join(c['flags'])})"


def peak_line(args):
    one = args.peaks[1]
    parts = [f"Host: {host_key(one)}. Peak measured in this run (bench_peak, best of 5): fp32 FMA "
             f"{one['fp32_gflops']['1']:.1f} GFLOP/s on 1 thread ({one['fp32_isa']})"]
    for t in args.thread_list:
        if t > 1:
            parts.append(f"{args.peaks[t]['fp32_gflops'][str(t)]:.1f} on {t}")
    bf = one["bf16_gflops"]
    bft = "" if bf == "none" else ", ".join(f"{args.peaks[t]['bf16_gflops'][str(t)]:.1f} on {t}"
                                            for t in args.thread_list if t > 1)
    parts.append("bf16 vdpbf16ps none (no avx512_bf16)" if bf == "none" else
                 f"bf16 vdpbf16ps {bf['1']:.1f} on 1 thread" + (f", {bft}" if bft else ""))
    amx = one.get("bf16_amx_gflops", "none")
    if amx != "none":
        amt = ", ".join(f"{args.peaks[t]['bf16_amx_gflops'][str(t)]:.1f} on {t}" for t in args.thread_list if t > 1)
        parts.append(f"bf16 AMX tiles {amx['1']:.1f} on 1 thread" + (f", {amt}" if amt else "") +
                     " (the bf16 MFU's peak)")
    return ", ".join(parts) + "."


def fmt_mfu(x):
    return "n/a" if x is None else f"{x:.2f}"


def run_json(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.stderr.write(f"compare: command failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}\n")
        raise SystemExit(1)
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


def model_flags(m):
    return ["--layers", str(m["layers"]), "--embed-dim", str(m["embed_dim"]), "--heads", str(m["heads"]),
            "--ffn-dim", str(m["ffn_dim"])]


def stretch_cmd(args, mode, m, V, threads, extra):
    bf = core_peak(args, threads, "bf16")
    peak = ["--peak-gflops", f"{core_peak(args, threads) / 1e9:.3f}", "--peak-gflops-bf16", f"{(bf or 0) / 1e9:.3f}"]
    return [args.stretch_bench, mode, "--threads", str(threads), "--vocab", str(V)] + model_flags(m) + extra + \
        peak + ["--warmup", str(args.warmup), "--steps", str(args.steps)]


def torch_cmd(args, mode, m, V, threads, extra, variant="1.13"):
    python = args.python if variant == "1.13" else args.torch2
    attn = {"1.13": "mha", "sdpa": "sdpa", "flex": "flex", "sdpa-bf16": "sdpa", "flex-bf16": "flex"}[variant]
    bf16 = ["--autocast", "bf16"] if variant.endswith("-bf16") else []
    return [python, os.path.join(HERE, "torch_lm.py"), mode, "--attn", attn, "--threads", str(threads), "--vocab", str(V)] + \
        model_flags(m) + extra + bf16 + ["--warmup", str(args.warmup), "--steps", str(args.steps)]


def side_env(side, env):
    """The environment of a side: the 1.13 variants differ only in OPENBLAS_CORETYPE."""
    if side == "t113-unset":
        return {k: v for k, v in env.items() if k != "OPENBLAS_CORETYPE"}
    if side == "t113-skx":
        return dict(env, OPENBLAS_CORETYPE=SKX)
    return env


def interleaved(args, makers, env):
    """A B C, C B A, ...: makers is a list of (side, make_cmd); returns {side: [records of each run]}."""
    runs = {side: [] for side, _ in makers}
    for r in range(args.repeats):
        order = makers if r % 2 == 0 else list(reversed(makers))
        for side, make in order:
            recs = run_json(make(), side_env(side, env))
            runs[side].append(recs)
            for rec in recs:
                rec["side"] = side
                if args.json_file:
                    args.json_file.write(json.dumps(rec) + "\n")
                    args.json_file.flush()
    return runs


def best(runs, key="tokens_per_cpu_s"):
    """runs: list of record lists (one list per run, same order of records) -> best record per slot."""
    out = []
    for i in range(len(runs[0])):
        out.append(max((r[i] for r in runs), key=lambda rec: rec[key]))
    return out


def torch_sides(args, mode):
    """[(side name, variant)] of the PyTorch runs for this mode."""
    sides = [("t113", "1.13")]
    if "OPENBLAS_CORETYPE" in os.environ:
        sides.append(("t113-unset", "1.13"))
    if "avx512f" in args.peaks[1]["cpu"]["flags"] and os.environ.get("OPENBLAS_CORETYPE") != SKX:
        sides.append(("t113-skx", "1.13"))
    if args.torch2:
        sides.append(("sdpa", "sdpa"))
        if mode == "eval" and not args.no_flex:
            sides.append(("flex", "flex"))
    return sides


def bf16_eval_sides(args):
    """The PyTorch bf16 evaluation sides (PyTorch 2.x under torch.autocast(bf16)): SDPA, and
    compiled FlexAttention unless --no-flex."""
    if not args.torch2:
        return []
    return ["sdpa-bf16"] + ([] if args.no_flex else ["flex-bf16"])


def agreeing(runs, sides):
    """The sides whose result agrees with t113's (the environment's own setting): an
    OPENBLAS_CORETYPE variant must compute the same loss / NLL to 1e-3 relative."""
    ref = runs["t113"][0][0].get("loss")
    ok = []
    for side, _ in sides:
        got = runs[side][0][0].get("loss")
        if side.startswith("t113-") and ref is not None and got is not None and \
                abs(got - ref) > 1e-3 * max(abs(ref), 1e-30):
            print(f"  compare: {side} disagrees with t113 (loss {got} vs {ref}): not used as the anchor",
                  file=sys.stderr)
            continue
        ok.append((side, _))
    return ok


def anchor(runs, sides, threads=1):
    """The fastest agreeing PyTorch side: (name, record, all runs). With one thread by tokens per
    CPU second (steady on a shared host); with more by tokens per wall second (what a user of all
    the threads gets: CPU seconds do not count a core left idle by a serial region)."""
    key = "tokens_per_cpu_s" if threads == 1 else "tokens_per_s"
    name = max((side for side, _ in agreeing(runs, sides)), key=lambda sd: best(runs[sd], key)[0][key])
    return name, best(runs[name], key)[0], runs[name]


def fmt(x, nd=0):
    return f"{x:,.{nd}f}"


def train_section(args, env):
    rows = []
    for threads in args.thread_list:
        for mname in args.models:
            m = MODELS[mname]
            for V in args.vocabs:
                for T in args.lengths_train:
                    extra = ["--tokens-per-sample", str(T), "--batch", str(args.batch)]
                    sides = torch_sides(args, "train")
                    makers = [("s", lambda: stretch_cmd(args, "train", m, V, threads, extra))]
                    makers += [(sd, lambda v=v: torch_cmd(args, "train", m, V, threads, extra, v)) for sd, v in sides]
                    if args.bf16:
                        makers.append(("b", lambda: stretch_cmd(args, "train", m, V, threads, extra + ["--bf16"])))
                        if args.torch2:  # the bf16 anchor: PyTorch 2.x eager under torch.autocast(bf16)
                            makers.append(("tb", lambda: torch_cmd(args, "train", m, V, threads, extra, "sdpa-bf16")))
                    runs = interleaved(args, makers, env)
                    s = best(runs["s"])[0]
                    tname, t, _ = anchor(runs, sides, threads)
                    t = dict(t, anchor=tname, others={sd: best(runs[sd])[0]["tokens_per_cpu_s"] for sd, _ in sides})
                    b = best(runs["b"])[0] if args.bf16 else None
                    tb = best(runs["tb"])[0] if "tb" in runs else None
                    f = 3 * fwd_flops_per_token(m, V, T)
                    rows.append((threads, mname, V, T, s, t, b, tb, f))
                    print(f"  train {mname} V={V} T={T} threads={threads}: stretch {s['tokens_per_cpu_s']:.0f} "
                          f"torch {t['others']}" + (f" bf16 {b['tokens_per_cpu_s']:.0f}" if b else "") +
                          " tokens/CPU-s", file=sys.stderr)
    bf = (" stretch bf16 tok/CPU-s | **bf16 ratio (CPU)** | stretch bf16 tok/s | bf16 ratio (wall) | "
          "MFU bf16 (CPU, of the bf16 peak, or the fp32 one for fp32 FMAs) | PyTorch bf16 autocast tok/CPU-s / tok/s | "
          "**stretch bf16 / PyTorch bf16 (CPU / wall)** |" if args.bf16 else "")
    lines = ["| threads | model | V | T | stretch tok/CPU-s | PyTorch tok/CPU-s (" + " / ".join(
             n for n, _ in torch_sides(args, "train")) + ") | anchor | **ratio (CPU)** | "
             "stretch tok/s | anchor tok/s | ratio (wall) | MFU stretch / anchor (CPU) |" + bf,
             "|---" * 12 + "|" + ("---|" * 7 if args.bf16 else "")]
    for threads, mname, V, T, s, t, b, tb, f in rows:
        peak = core_peak(args, threads)
        mfu_s, mfu_t = s["tokens_per_cpu_s"] * f / peak, t["tokens_per_cpu_s"] * f / peak
        bpeak = core_peak(args, threads, "bf16")
        extra = ""
        if b:
            extra = (f" {fmt(b['tokens_per_cpu_s'])} | **{b['tokens_per_cpu_s'] / t['tokens_per_cpu_s']:.2f}** | "
                     f"{fmt(b['tokens_per_s'])} | {b['tokens_per_s'] / t['tokens_per_s']:.2f} | "
                     f"{fmt_bf16_mfu(b, f, peak, bpeak)} |")
            cpu_r, wall_r = (b[k] / tb[k] for k in ("tokens_per_cpu_s", "tokens_per_s")) if tb else (None, None)
            extra += (f" {fmt(tb['tokens_per_cpu_s'])} / {fmt(tb['tokens_per_s'])} | **{cpu_r:.2f} / {wall_r:.2f}** |"
                      if tb else " n/a (no build/torch2env) | n/a |")
        others = " / ".join(fmt(x) for x in t["others"].values())
        lines.append(f"| {threads} | {mname} | {V:,} | {T} | {fmt(s['tokens_per_cpu_s'])} | {others} | {t['anchor']} | "
                     f"**{s['tokens_per_cpu_s'] / t['tokens_per_cpu_s']:.2f}** | {fmt(s['tokens_per_s'])} | "
                     f"{fmt(t['tokens_per_s'])} | {s['tokens_per_s'] / t['tokens_per_s']:.2f} | "
                     f"{mfu_s:.2f} / {mfu_t:.2f} |" + extra)
    return "\n".join(lines)


def fmt_bf16_mfu(record, flop_per_token, fp32_peak, bf16_peak):
    """MFU of a stretch --bf16 record against the peak of the products it ran: the bf16 peak, or
    the fp32 peak where --bf16 chose fp32 FMAs on bf16-rounded operands (bench_model's
    "bf16_products": "fp32"; cli/bf16_speed.h), marked so."""
    fp32_products = record.get("bf16_products") == "fp32"
    peak = fp32_peak if fp32_products else bf16_peak
    return fmt_mfu(record["tokens_per_cpu_s"] * flop_per_token / peak if peak else None) + (
        " (fp32 FMAs)" if fp32_products else "")


def fmt_skipped(record):
    """stretch's share of causal (query tile, key tile) attention pairs skipped as negligible
    (ALiBi's far tiles whose probabilities all flush to zero; bitwise the same results). The MFU
    columns still count every pair's FLOPs, so with skipping they measure effective speed."""
    frac = record.get("tiles_skipped_frac")
    return "n/a" if frac is None else f"{100 * frac:.0f}%"


def eval_section(args, env):
    m = MODELS["small"]
    V = args.eval_vocab
    rows = []
    for threads in args.thread_list:
        for T in args.lengths_eval:
            extra = ["--lengths", str(T)]
            sides = torch_sides(args, "eval")
            makers = [("s", lambda: stretch_cmd(args, "eval", m, V, threads, extra))]
            makers += [(sd, lambda v=v: torch_cmd(args, "eval", m, V, threads, extra, v)) for sd, v in sides]
            bsides = bf16_eval_sides(args)
            if args.bf16:
                makers.append(("b", lambda: stretch_cmd(args, "eval", m, V, threads, extra + ["--bf16"])))
                makers += [(sd, lambda v=sd: torch_cmd(args, "eval", m, V, threads, extra, v)) for sd in bsides]
            runs = interleaved(args, makers, env)
            s_runs = runs["s"]
            s = best(s_runs)[0]
            tname, t, t_runs = anchor(runs, sides, threads)
            # The smallest peak of any PyTorch side, so the memory ratio is also shown at its strictest.
            t_rss_min = min(min(r[0]["peak_rss_mb"] for r in runs[sd]) for sd, _ in sides)
            # Peak RSS: the smallest of the runs (each run is a fresh process; the peak is a property
            # of the program, load does not lower it).
            s_rss = min(r[0]["peak_rss_mb"] for r in s_runs)
            t_rss = min(r[0]["peak_rss_mb"] for r in t_runs)
            bf = None
            if args.bf16:
                b = best(runs["b"])[0]
                bt = None
                if bsides:
                    key = "tokens_per_cpu_s" if threads == 1 else "tokens_per_s"
                    bname = max(bsides, key=lambda sd: best(runs[sd], key)[0][key])
                    bt = dict(best(runs[bname], key)[0], anchor=bname)
                bf = (b, bt)
            rows.append((threads, T, s, dict(t, anchor=tname), s_rss, t_rss, t_rss_min, fwd_flops_per_token(m, V, T), bf))
            print(f"  eval T={T} threads={threads}: stretch {s['tokens_per_cpu_s']:.0f} torch ({tname}) "
                  f"{t['tokens_per_cpu_s']:.0f} tokens/CPU-s, RSS {s_rss:.0f} / {t_rss:.0f} MB" +
                  (f"; bf16 stretch {bf[0]['tokens_per_cpu_s']:.0f}" +
                   (f" torch ({bf[1]['anchor']}) {bf[1]['tokens_per_cpu_s']:.0f}" if bf[1] else "") if bf else ""),
                  file=sys.stderr)
    lines = ["| threads | T | stretch tok/CPU-s | anchor | anchor tok/CPU-s | **ratio (CPU)** | stretch tok/s | "
             "anchor tok/s | ratio (wall) | peak RSS stretch / anchor (MB) | **RSS ratio** | "
             "RSS ratio to the leanest PyTorch | MFU stretch (CPU) | attention pairs skipped |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for threads, T, s, t, s_rss, t_rss, t_rss_min, f, _ in rows:
        lines.append(f"| {threads} | {T} | {fmt(s['tokens_per_cpu_s'])} | {t['anchor']} | {fmt(t['tokens_per_cpu_s'])} | "
                     f"**{s['tokens_per_cpu_s'] / t['tokens_per_cpu_s']:.2f}** | {fmt(s['tokens_per_s'])} | "
                     f"{fmt(t['tokens_per_s'])} | {s['tokens_per_s'] / t['tokens_per_s']:.2f} | "
                     f"{s_rss:,.0f} / {t_rss:,.0f} | **{s_rss / t_rss:.2f}** | {s_rss / t_rss_min:.2f} | "
                     f"{s['tokens_per_cpu_s'] * f / core_peak(args, threads):.2f} | {fmt_skipped(s)} |")
    if args.bf16:
        lines += ["", "bf16 evaluation (stretch eval --bf16 against PyTorch 2.x under torch.autocast(bf16), "
                  "the fastest of " + (", ".join(bf16_eval_sides(args)) or "none: no build/torch2env") + "; "
                  "NLL drift = stretch bf16 / fp32 NLL of the same random window and weights − 1):", "",
                  "| threads | T | stretch bf16 tok/CPU-s | stretch bf16 tok/s | bf16 / fp32 stretch (CPU) | "
                  "bf16 anchor | anchor tok/CPU-s | anchor tok/s | **ratio (CPU)** | **ratio (wall)** | "
                  "MFU bf16 (CPU, of the bf16 peak, or the fp32 one for fp32 FMAs) | NLL drift |",
                  "|---" * 12 + "|"]
        for threads, T, s, t, s_rss, t_rss, t_rss_min, f, (b, bt) in rows:
            bpeak = core_peak(args, threads, "bf16")
            drift = b["loss"] / s["loss"] - 1 if s.get("loss") and b.get("loss") is not None else None
            lines.append(
                f"| {threads} | {T} | {fmt(b['tokens_per_cpu_s'])} | {fmt(b['tokens_per_s'])} | "
                f"{b['tokens_per_cpu_s'] / s['tokens_per_cpu_s']:.2f} | " +
                (f"{bt['anchor']} | {fmt(bt['tokens_per_cpu_s'])} | {fmt(bt['tokens_per_s'])} | "
                 f"**{b['tokens_per_cpu_s'] / bt['tokens_per_cpu_s']:.2f}** | "
                 f"**{b['tokens_per_s'] / bt['tokens_per_s']:.2f}** | " if bt else "n/a | n/a | n/a | n/a | n/a | ") +
                f"{fmt_bf16_mfu(b, f, core_peak(args, threads), bpeak)} | " +
                (f"{drift:+.1e} |" if drift is not None else "n/a |"))
    return "\n".join(lines)


DOC_BEGIN, DOC_END = "<!-- bench/compare.py tables: begin -->", "<!-- bench/compare.py tables: end -->"


def host_markers(key):
    """docs/BENCHMARKS.md keeps one block of compare.py tables per host type."""
    return f"<!-- bench/compare.py tables [{key}]: begin -->", f"<!-- bench/compare.py tables [{key}]: end -->"


def replace_doc_block(text, command, begin, end, who):
    """Replaces the block between the markers `begin` ... `end` of docs/BENCHMARKS.md with the
    command that made the tables and the tables (bench/compare_builds.py uses it too)."""
    path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    with open(path) as f:
        doc = f.read()
    a, b = doc.find(begin), doc.find(end)
    if a < 0 or b < a:
        sys.stderr.write(f"{who}: {path} has no {begin} ... {end} block; add the two markers where "
                         "the tables go, or drop --write-docs\n")
        raise SystemExit(1)
    block = f"{begin}\n```\n{command.strip()}\n```\n\n{text}\n"
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(doc[:a] + block + doc[b:])
    os.replace(tmp, path)
    print(f"{who}: wrote the tables into {path}", file=sys.stderr)


def write_docs(text, argv, key):
    """Files the tables under this host's markers; a host seen for the first time gets its own
    block, added after the last compare.py block."""
    begin, end = host_markers(key)
    path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    with open(path) as f:
        doc = f.read()
    if begin not in doc:
        anchor_end = doc.rfind("<!-- bench/compare.py tables")
        cut = doc.find("-->", anchor_end) + 3 if anchor_end >= 0 else len(doc)
        doc = doc[:cut] + f"\n\nHost type {key}:\n\n{begin}\n{end}" + doc[cut:]
        with open(path + ".tmp", "w") as f:
            f.write(doc)
        os.replace(path + ".tmp", path)
    replace_doc_block(text, "build/pyenv/bin/python bench/compare.py " + " ".join(argv), begin, end, "compare")


def torch_versions(args):
    out = []
    for py in [args.python] + ([args.torch2] if args.torch2 else []):
        p = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
        out.append(p.stdout.strip() or "?")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=("train", "eval", "all"), default="all")
    ap.add_argument("--threads", default="1", help="comma-separated thread counts")
    ap.add_argument("--models", default="small,medium")
    ap.add_argument("--vocabs", default="256,10008")
    ap.add_argument("--lengths-train", default="128,512")
    ap.add_argument("--lengths-eval", default="512,1024,2048,4096,8192")
    ap.add_argument("--eval-vocab", type=int, default=33280)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2, help="runs per side per configuration (A B B A ...)")
    ap.add_argument("--bf16", action="store_true",
                    help="also stretch --bf16 (training: more columns; eval: a second table), against PyTorch 2.x "
                         "under torch.autocast(bf16)")
    ap.add_argument("--quick", action="store_true", help="small model, T 128, eval up to 2048, 1 repeat")
    ap.add_argument("--stretch-bench", default=os.path.join(ROOT, "build", "bench", "bench_model"))
    ap.add_argument("--peak-bench", default=os.path.join(ROOT, "build", "bench", "bench_peak"))
    ap.add_argument("--peak-seconds", type=float, default=0.5, help="bench_peak time per kernel and thread count")
    ap.add_argument("--python", default=None, help="python with torch 1.13 (default: build/pyenv, else this one)")
    ap.add_argument("--torch2", default=None,
                    help="python with the current PyTorch (default: build/torch2env if bench/setup_torch2.sh made it)")
    ap.add_argument("--no-torch2", action="store_true", help="only Debian's PyTorch 1.13")
    ap.add_argument("--no-flex", action="store_true", help="skip the FlexAttention evaluation anchor")
    ap.add_argument("--json", default=None, help="also write every measurement here (JSON lines)")
    ap.add_argument("--write-docs", action="store_true",
                    help=f"replace the text between the markers {DOC_BEGIN!r} and {DOC_END!r} in "
                    "docs/BENCHMARKS.md with this run's tables and command")
    args = ap.parse_args()
    if args.quick:
        args.models, args.lengths_train, args.lengths_eval, args.repeats = "small", "128", "512,2048", 1
    args.thread_list = [int(x) for x in args.threads.split(",")]
    args.models = args.models.split(",")
    for m in args.models:
        if m not in MODELS:
            ap.error(f"--models: unknown model '{m}' (use {', '.join(MODELS)})")
    args.vocabs = [int(x) for x in args.vocabs.split(",")]
    args.lengths_train = [int(x) for x in args.lengths_train.split(",")]
    args.lengths_eval = [int(x) for x in args.lengths_eval.split(",")]
    if args.python is None:
        venv = os.path.join(ROOT, "build", "pyenv", "bin", "python")
        args.python = venv if os.path.exists(venv) else sys.executable
    if args.no_torch2:
        args.torch2 = None
    elif args.torch2 is None:
        venv2 = os.path.join(ROOT, "build", "torch2env", "bin", "python")
        args.torch2 = venv2 if os.path.exists(venv2) else None
    for flag, py in (("--python", args.python), ("--torch2", args.torch2)):
        if py and not os.path.exists(py):
            ap.error(f"{flag} {py}: no such interpreter (bash bench/setup_torch2.sh makes build/torch2env; "
                     "or pass --no-torch2)")
    if not os.path.exists(args.stretch_bench):
        ap.error(f"{args.stretch_bench} not found: build first (cmake --build build --target bench_model)")
    if not os.path.exists(args.peak_bench):
        ap.error(f"{args.peak_bench} not found: build first (cmake --build build --target bench_peak)")
    args.peaks = measure_peaks(args)
    args.json_file = open(args.json, "w") if args.json else None
    env = dict(os.environ)
    load0, t0 = os.getloadavg(), time.time()
    out = [f"Run {time.strftime('%Y-%m-%d %H:%M')}, load average at start {load0[0]:.1f} "
           f"(1 min) / {load0[1]:.1f} (5 min) on {os.cpu_count()} cores; best of {args.repeats} per side, "
           f"A B B A interleaved; {args.warmup} warm-up + {args.steps} timed steps each; PyTorch "
           f"{' and '.join(torch_versions(args))}; OPENBLAS_CORETYPE "
           f"{os.environ.get('OPENBLAS_CORETYPE', 'unset')} and OMP_WAIT_POLICY "
           f"{os.environ.get('OMP_WAIT_POLICY', 'unset')} in the environment.", "", peak_line(args)]
    if args.only in ("train", "all"):
        out += ["", "Training (B = %d, pre-norm, untied, dropout 0.1, ALiBi):" % args.batch, "",
                train_section(args, env)]
    if args.only in ("eval", "all"):
        out += ["", f"Evaluation (small model, B = 1, V = {args.eval_vocab:,}, ALiBi; stretch: eval-lm's "
                "scorer; PyTorch: full log_softmax as fairseq's; the MFU counts every causal pair, the "
                "ones stretch skips as negligible included):", "", eval_section(args, env)]
    load1 = os.getloadavg()
    out += ["", f"Load average at end {load1[0]:.1f} / {load1[1]:.1f}; {time.time() - t0:.0f} s in all."]
    print("\n".join(out))
    if args.write_docs:
        write_docs("\n".join(out), [a for a in sys.argv[1:] if a != "--write-docs"], host_key(args.peaks[1]))


if __name__ == "__main__":
    main()
